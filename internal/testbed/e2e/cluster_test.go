package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/pgstore"
	"github.com/logist/logist/internal/pgtest"
)

// TestClusterScripts runs the cluster mode scripts (testdata/cluster):
// logistd nodes and logist against a real, throwaway PostgreSQL, each
// script with a database of its own in $LOGISTD_DATABASE_URL.
func TestClusterScripts(t *testing.T) {
	t.Cleanup(pgtest.Stop)
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/cluster",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("REPO", repo)
			env.Setenv("LOGIST_JOBS_DIR", "")
			env.Setenv("LOGISTD_DATABASE_URL", pgtest.DB(t))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"clusterwait": cmdClusterWait,
			"clusterhas":  cmdClusterHas,
			"clusterfire": cmdClusterFire,
			"exitcode":    cmdExitCode,
			"waitfile":    cmdWaitFile,
			"waitgone":    cmdWaitGone,
		},
	})
}

// clusterwait STATUS JOB...: wait (up to 60 s) until every JOB has STATUS
// in the cluster's database.
func cmdClusterWait(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: clusterwait STATUS JOB...")
	}
	ctx := context.Background()
	s, err := pgstore.Open(ctx, ts.Getenv("LOGISTD_DATABASE_URL"))
	ts.Check(err)
	defer s.Close()
	want := lifecycle.Status(args[0])
	deadline := time.Now().Add(60 * time.Second)
	for {
		var notYet []string
		for _, id := range args[1:] {
			j, err := s.Job(ctx, id)
			if err != nil || j.Status != want {
				st := "missing"
				if err == nil {
					st = string(j.Status)
				}
				notYet = append(notYet, id+"="+st)
			}
		}
		if len(notYet) == 0 {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("not %s after 60s: %s", want, strings.Join(notYet, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clusterhas JOB FIELD VALUE: the job's row in the database has FIELD
// (owner, epoch) equal to VALUE now.
func cmdClusterHas(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: clusterhas JOB owner|epoch VALUE")
	}
	ctx := context.Background()
	s, err := pgstore.Open(ctx, ts.Getenv("LOGISTD_DATABASE_URL"))
	ts.Check(err)
	defer s.Close()
	j, err := s.Job(ctx, args[0])
	ts.Check(err)
	var got string
	switch args[1] {
	case "owner":
		got = j.Owner
	case "epoch":
		got = fmt.Sprint(j.Epoch)
	default:
		ts.Fatalf("clusterhas: unknown field %s", args[1])
	}
	if (got == args[2]) == neg {
		ts.Fatalf("job %s: %s is %q (want %s%q)", args[0], args[1], got, map[bool]string{true: "not ", false: ""}[neg], args[2])
	}
}

// clusterfire TEMPLATE RUN FILE: fire a tick of TEMPLATE now that
// creates run RUN with the manifest in FILE, as a node's schedule would.
func cmdClusterFire(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: clusterfire TEMPLATE RUN FILE")
	}
	ctx := context.Background()
	s, err := pgstore.Open(ctx, ts.Getenv("LOGISTD_DATABASE_URL"))
	ts.Check(err)
	defer s.Close()
	fired, err := s.Fire(ctx, clusterstore.Tick{Template: args[0], At: time.Now(), Node: "test", Run: args[1], Manifest: []byte(ts.ReadFile(args[2]))})
	ts.Check(err)
	if !fired {
		ts.Fatalf("tick of %s not fired", args[0])
	}
}
