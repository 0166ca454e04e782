package agent

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
)

// KeepRequests is how many calls' request files (and answer files) a
// job's requests/ folder keeps: the newest. The history holds every
// request (the intent record) and every answer; the files are what the
// agent read and wrote, kept for a person looking at the last calls, and
// the newest is the one an interrupted call is re-asked with (written
// again by the re-attempt anyway).
const KeepRequests = 32

// requestName matches a call's files in requests/: its request file
// (NNNNNN.json), an uncontained call's answer file (NNNNNN.answer.json)
// and a contained call's answer folder (NNNNNN.answer/, bound into its
// sandbox); the second group is the suffix.
var requestName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\d{6,})(\.json|\.answer\.json|\.answer)$`) })

// PruneRequests removes the request and answer files and the contained
// answer folders of all but the KeepRequests newest calls in the job
// folder jobDir's requests/ folder (a request file emptied into the
// pool, reqpool.go). It returns how many entries it removed.
func PruneRequests(jobDir string) (int, error) { return TidyRequests(jobDir, false) }

// readDir is os.ReadDir; tests count the folder reads.
var readDir = os.ReadDir

// TidyRequests is what a run of the job in jobDir does to its requests/
// folder as it starts: ClearPredicted's removals when predicted (its
// daemon predicts calls: a dead one may have left their files), then
// PruneRequests', from one read of the folder; a job that has none (a
// scripted one) costs one failed open.
func TidyRequests(jobDir string, predicted bool) (int, error) {
	ents, err := readDir(filepath.Join(jobDir, "requests"))
	if err != nil {
		if os.IsNotExist(err) {
			return 0, nil
		}
		return 0, err
	}
	if predicted {
		ents = clearPredicted(jobDir, ents)
	}
	return pruneRequests(jobDir, ents)
}

// pruneRequests is PruneRequests of the requests/ folder's entries ents.
func pruneRequests(jobDir string, ents []os.DirEntry) (int, error) {
	dir := filepath.Join(jobDir, "requests")
	byCall := map[int][]string{}
	for _, e := range ents {
		m := requestName().FindStringSubmatch(e.Name())
		if m == nil || (m[2] == ".answer") != e.IsDir() || (!e.IsDir() && !e.Type().IsRegular()) {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		byCall[n] = append(byCall[n], e.Name())
	}
	calls := slices.Sorted(maps.Keys(byCall))
	removed := 0
	for _, n := range calls[:max(0, len(calls)-KeepRequests)] {
		for _, name := range byCall[n] {
			p := filepath.Join(dir, name)
			var err error
			switch {
			case name == filepath.Base(RequestFile(jobDir, n)):
				err = poolRequest(jobDir, p, n) // emptied for a later call
			case name == filepath.Base(answerDir(jobDir, n)):
				err = os.RemoveAll(p) // what the agent left in it goes too
			default:
				err = os.Remove(p)
			}
			if err != nil && !os.IsNotExist(err) {
				return removed, err
			}
			removed++
		}
	}
	return removed, nil
}

// ForgetRequest removes the request and answer files of call n of the job
// in jobDir (requests/NNNNNN.json, NNNNNN.answer.json and the contained
// answer folder NNNNNN.answer/): for a job whose history is sealed, the
// only copies of its prompt and answer in the clear.
func ForgetRequest(jobDir string, n int) error {
	dir := filepath.Join(jobDir, "requests")
	var errs []error
	for _, name := range []string{fmt.Sprintf("%06d.json", n), fmt.Sprintf("%06d.answer.json", n), fmt.Sprintf("%06d.answer", n)} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
