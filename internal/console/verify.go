package console

import (
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/verify"
)

// verifyJob checks job id's history as logist verify does: the chain, the
// signatures with the jobs folder's keyring, the replay (with the job's
// manifest; an invalid one replays with the default workflow), sealed
// answers opened with the content key when the console has it.
func (c *Console) verifyJob(id string) (*verify.Report, error) {
	m, err := c.o.Store.Load(id)
	if errorsIsNotFound(err) {
		return nil, err // "job ID: not found"
	}
	// A keyring: one key in file mode, the nodes' and stewards' in
	// cluster mode (cluster.Mirror writes them), as logist verify reads.
	keys, err := signing.LoadKeyring(filepath.Join(c.o.Store.Dir, signing.Dir, signing.PublicFile))
	if err != nil {
		return nil, err
	}
	return verify.Job(id, c.o.Store.JobDir(id), verify.Options{Public: keys[0], Keyring: keys[1:], Manifest: m, Reveal: c.opener().Reveal(id)})
}

// apiVerify is logist verify JOB --format json's report under items, with
// intact (whether the history passed) beside it. A history that failed
// its checks is not an error of the request: the answer is 200 and ok
// true, intact false, the message "FAILED: " and the first problem
// (logist verify exits 1 on it).
func (c *Console) apiVerify(w http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	rep, err := c.verifyJob(id)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	ok(w, verdict(rep), map[string]any{"items": []*verify.Report{rep}, "intact": rep.OK()})
}

// verdict is a report in one line.
func verdict(rep *verify.Report) string {
	if !rep.OK() {
		return "FAILED: " + rep.FirstBad()
	}
	s := fmt.Sprintf("intact: chain, signatures (key %s) and replay of %d answers, %d transitions", rep.KeyID, rep.Responses, rep.Transitions)
	if rep.Encrypted > 0 {
		s += fmt.Sprintf("; %d encrypted answers not re-validated", rep.Encrypted)
	}
	return s
}
