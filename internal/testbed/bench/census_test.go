package bench

import "testing"

// countCensus counts only calls on the job's folder, each new path once,
// and the jobs folder's fsyncs once the job's first call is seen.
func TestCountCensus(t *testing.T) {
	t.Parallel()
	log := `17401 fsync(3</t/jobs>) = 0
17401 openat(AT_FDCWD</t>, "/t/jobs/.logistd.lock", O_RDWR|O_CREAT|O_CLOEXEC, 0600) = 5</t/jobs/.logistd.lock>
17401 openat(AT_FDCWD</t>, "/t/jobs/j/history.jsonl", O_RDWR|O_CREAT|O_APPEND|O_CLOEXEC, 0600) = 9</t/jobs/j/history.jsonl>
17401 mkdirat(AT_FDCWD</t>, "/t/jobs/j/workspace", 0700) = 0
17401 fsync(9</t/jobs/j/history.jsonl>) = 0
17403 fsync(9</t/jobs/j/history.jsonl> <unfinished ...>
17403 <... fsync resumed>) = -1 EIO (Input/output error)
17401 fsync(12</t/jobs> <unfinished ...>
17402 fsync(11</t/jobs/j>) = 0
17401 <... fsync resumed>) = 0
17401 write(9</t/jobs/j/history.jsonl>, "{\"hash\"..."..., 1200) = 1200
17401 unlinkat(AT_FDCWD</t>, "/t/jobs/j/requests/000000.answer.json", 0) = -1 ENOENT (No such file or directory)
17401 openat(AT_FDCWD</t>, "/t/jobs/j/requests/agent-pids", O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC, 0600) = 12</t/jobs/j/requests/agent-pids>
17401 openat(AT_FDCWD</t>, "/t/jobs/j/requests/agent-pids", O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC, 0600) = 12</t/jobs/j/requests/agent-pids>
17401 renameat(AT_FDCWD</t>, "/t/jobs/j/.jobHistory.json.tmp-1", AT_FDCWD</t>, "/t/jobs/j/jobHistory.json") = 0
17401 openat(AT_FDCWD</t>, "/t/jobs/j2/x", O_RDWR|O_CREAT, 0600) = 4</t/jobs/j2/x>
`
	c := countCensus(log, "/t/jobs/j")
	want := census{fsyncs: 3, inodes: 3, renames: 1, missingUnlinks: 1, written: 1200}
	if *c != want {
		t.Fatalf("census %+v, want %+v", *c, want)
	}
}
