package clusterstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// Claimable is the one rule of which jobs a node may claim: a status the
// daemon runs, no lease or an expired one, and not backing off (now is
// the store's clock). A job waiting for a human (or finished) is never
// claimable, and holds no lease.
func Claimable(j *Job, now time.Time) bool {
	return j.Status.Active() && !j.Template && !now.Before(j.ClaimAfter) && (j.Owner == "" || !now.Before(j.LeaseUntil))
}

// IsTemplate is the one rule of which manifests are schedules' templates
// (a "schedule" that is not null): the store marks their rows, which no
// node claims.
func IsTemplate(manifest []byte) bool { return readHead(manifest).template() }

// head is what the store reads of a manifest, decoded once (readHead): a
// field of the wrong type is left out, as if absent.
type head struct {
	Status   lifecycle.Status `json:"status"`
	Schedule json.RawMessage  `json:"schedule"`
	Budget   *float64         `json:"cost_threshold"`
	Metrics  struct {
		Cents float64 `json:"cumulative_cost"`
	} `json:"metrics"`
}

func readHead(manifest []byte) head {
	var h head
	_ = json.Unmarshal(manifest, &h) // what did not decode is absent
	return h
}

// unitHead is the head of the manifest u commits: as its encoder said
// it (Unit.Said), else as decoded.
func unitHead(u *Unit) head {
	if u.Said == nil {
		return readHead(u.Manifest)
	}
	h := head{Status: lifecycle.Status(u.Said.Status), Budget: u.Said.Budget}
	h.Metrics.Cents = u.Said.Cost
	return h
}

func (h head) template() bool { return len(h.Schedule) > 0 && string(h.Schedule) != "null" }

func (h head) cost() int64 { return centsToMicros(h.Metrics.Cents) }

func (h head) budget() int64 {
	if h.Budget == nil || *h.Budget <= 0 {
		return 0
	}
	return centsToMicros(*h.Budget)
}

// OwnLease is the rule of which jobs a node started again takes back at
// once (Store.TakeBack): those that still name it as their lease's holder,
// expired or not, in a status the daemon runs. Only a node that has proved
// its previous process gone may ask (internal/cluster: its working
// folder's lock, its key bound to its id): the lease is then nobody's.
func OwnLease(j *Job, node string) bool {
	return j.Owner == node && j.Status.Active() && !j.Template
}

// Claimed is j after node claims it at now: the epoch bumped (every write
// of the previous owner is fenced from here on), the lease taken.
func Claimed(j Job, node string, now time.Time, ttl time.Duration) (Job, Lease) {
	rescued := j.Owner != ""
	j.Epoch++
	j.Owner = node
	j.LeaseUntil, j.ClaimAfter = now.Add(ttl), time.Time{}
	if rescued {
		j.Rescues++
	}
	return j, Lease{Job: j.ID, Node: node, Epoch: j.Epoch, Until: j.LeaseUntil, Rescued: rescued}
}

// Fence is the check every ownership-dependent write makes, on the job as
// read under its lock in the same transaction as the write. A job still at
// the lease's epoch that nobody holds is refused with ErrLeaseEnded (the
// lease's holder ended it itself); any other mismatch is a fence proper:
// another node or a steward moved the epoch on.
func Fence(j *Job, l *Lease) error {
	if j.Epoch == l.Epoch && j.Owner == "" {
		return fmt.Errorf("job %s: lease of %s at epoch %d: %w", j.ID, l.Node, l.Epoch, ErrLeaseEnded)
	}
	if j.Epoch != l.Epoch || j.Owner != l.Node {
		return fmt.Errorf("job %s: lease of %s at epoch %d, job at epoch %d owned by %q: %w", j.ID, l.Node, l.Epoch, j.Epoch, j.Owner, ErrFenced)
	}
	return nil
}

// Continue checks that lines continue j's history (sequence, predecessor,
// hash of content) and returns the job's next sequence and last hash.
func Continue(j *Job, lines [][]byte) (next int64, last string, err error) {
	next, last, _, err = continues(j, lines, nil)
	return next, last, err
}

// continues is Continue, saying too whether lines hold an intent: an
// agent call that starts once the unit is stored. links, when not nil,
// are the lines' links as their encoder sealed them (Unit.Links), read
// in place of parsing each line again; the checks against j are the same.
func continues(j *Job, lines [][]byte, links []history.Link) (next int64, last string, intent bool, err error) {
	if links != nil && len(links) != len(lines) {
		return 0, "", false, fmt.Errorf("job %s: %d links for %d records: %w", j.ID, len(links), len(lines), ErrConflict)
	}
	next, last = j.NextSeq, j.LastHash
	if last == "" {
		last = history.GenesisHash
	}
	for i, line := range lines {
		var k history.Link
		if links != nil {
			k = links[i]
		} else if k, err = lineLink(line); err != nil {
			return 0, "", false, fmt.Errorf("job %s: record %d: %v: %w", j.ID, next, err, ErrConflict)
		}
		if k.Seq != next || k.PrevHash != last {
			return 0, "", false, fmt.Errorf("job %s: record %d (after %s) does not follow record %d (%s): %w", j.ID, k.Seq, short(k.PrevHash), next-1, short(last), ErrConflict)
		}
		next, last = next+1, k.Hash
		intent = intent || k.Type == history.TypeIntent
	}
	return next, last, intent, nil
}

// lineLink is the link of a line that came without one: a sealed
// envelope, whose hash is that of its record's exact bytes.
func lineLink(line []byte) (history.Link, error) {
	e, err := history.ParseLine(line)
	if err != nil {
		return history.Link{}, err
	}
	sum := sha256.Sum256(e.Body)
	if e.Legacy || hex.EncodeToString(sum[:]) != e.Hash {
		return history.Link{}, errors.New("not a sealed envelope")
	}
	return history.Link{Seq: e.Seq, PrevHash: e.PrevHash, Hash: e.Hash, Type: e.Type}, nil
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// Apply is the one rule of a fenced commit: j as read under its lock, the
// lease, the unit in; the job as it must be stored out, or why the commit
// is refused (then nothing of it may be stored).
//
// The budget is checked where spending starts: a unit that starts a call
// (holds an intent) is refused with ErrBudget when the job's spending,
// this unit's debit included, has reached its budget — in the same
// transaction as the fence, so of two nodes (or two commits) racing for a
// job's last dollar one starts its call and the other is refused. A debit
// itself is never refused for the budget: it records what calls already
// cost in the world (the engine halts the job before it asks again).
//
// A release with a Backoff leaves the job unclaimable, by any node, until
// now (the store's clock) plus the backoff.
func Apply(j Job, l *Lease, u *Unit, now time.Time) (Job, error) {
	if err := Fence(&j, l); err != nil {
		return j, err
	}
	if u.Status != "" && !u.Status.Valid() {
		return j, fmt.Errorf("job %s: unknown status %q", j.ID, u.Status)
	}
	if u.DebitMicros < 0 || (u.BudgetMicros != nil && *u.BudgetMicros < 0) {
		return j, fmt.Errorf("job %s: negative debit or budget", j.ID)
	}
	if u.Backoff < 0 || (u.Backoff > 0 && !u.Release) {
		return j, fmt.Errorf("job %s: a backoff is a release's, and not negative", j.ID)
	}
	if err := CheckPoint(j.ID, u); err != nil {
		return j, err
	}
	if err := CheckFiles(j.ID, u.Files); err != nil {
		return j, err
	}
	next, last, intent, err := continues(&j, u.Lines, u.Links)
	if err != nil {
		return j, err
	}
	if u.BudgetMicros != nil {
		j.BudgetMicros = *u.BudgetMicros
	}
	spent := j.SpentMicros + u.DebitMicros
	if spent < j.SpentMicros {
		// Both are at least 0: past what an int64 holds (an agent that
		// reported an absurd cost, twice) is the most, not a wrap round
		// to a negative sum under every budget.
		spent = math.MaxInt64
	}
	if j.BudgetMicros > 0 && spent >= j.BudgetMicros && intent {
		return j, fmt.Errorf("job %s: spent %d µ$ of a budget of %d µ$, a call may not start: %w", j.ID, spent, j.BudgetMicros, ErrBudget)
	}
	j.NextSeq, j.LastHash = next, last
	j.SpentMicros = spent
	if u.Status != "" {
		j.Status = u.Status
	}
	if u.Manifest != nil {
		j.Manifest = u.Manifest
	}
	if u.Release || !j.Status.Active() {
		j.Owner, j.LeaseUntil = "", time.Time{}
	}
	if u.Backoff > 0 && j.Status.Active() {
		j.ClaimAfter = now.Add(u.Backoff)
	}
	return j, nil
}

// ValidSum reports whether sum names an object: a SHA-256 in lowercase
// hex (it becomes a file name when a node restores a snapshot).
func ValidSum(sum string) bool {
	if len(sum) != sha256.Size*2 {
		return false
	}
	for _, c := range sum {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ListingSums are the objects a recovery point's snapshot listing names
// (internal/snapshot's Listing), sorted and unique; none for no listing.
func ListingSums(listing []byte) ([]string, error) {
	if len(listing) == 0 {
		return nil, nil
	}
	var l struct {
		Entries []struct {
			SHA256 string `json:"sha256"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(listing, &l); err != nil {
		return nil, fmt.Errorf("snapshot listing: %w", err)
	}
	var out []string
	for _, e := range l.Entries {
		if e.SHA256 == "" {
			continue
		}
		if !ValidSum(e.SHA256) {
			return nil, fmt.Errorf("snapshot listing names object %q", short(e.SHA256))
		}
		out = append(out, e.SHA256)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// BundleFile is the file of a job's folder (outside its workspace) that
// names, by its sum, the object holding the git bundle of the job's latest
// recovery point (internal/cluster moves a git workspace so); and
// ParkedBundleFile the one holding the bundle of the repository as the
// job's last stop for a steward left it (its "parked" point's, replaced
// with it). Besides the points' listings they are the one reference to
// an object: a sweep (Store.CollectObjects) keeps every object a listing
// or one of a job's BundleFiles names (FileObject).
const (
	BundleFile       = ".git-bundle.sha256"
	ParkedBundleFile = ".git-parked-bundle.sha256"
)

// BundleFiles are the files of a job's folder that name an object.
var BundleFiles = []string{BundleFile, ParkedBundleFile}

// FileObject is the object a job's file names, if it names one: one of
// BundleFiles' content (surrounding white space aside) when it is a sum.
func FileObject(path string, content []byte) (string, bool) {
	if !slices.Contains(BundleFiles, path) {
		return "", false
	}
	sum := strings.TrimSpace(string(content))
	return sum, ValidSum(sum)
}

// NamedObjects is the one rule of what a change (a unit, a steering)
// needs stored: the objects its point's listing names (ListingSums) and
// those its BundleFiles name (FileObject), sorted and unique. Each must
// be carried by the change or held by the store when it commits, checked
// under the lock its sweeps (CollectObjects) take, else the change is
// refused whole with ErrMissingObject: no row names an object a sweep
// collected before it (the node sends the objects again).
func NamedObjects(p *RecoveryPoint, files map[string][]byte) ([]string, error) {
	var sums []string
	if p != nil {
		var err error
		if sums, err = ListingSums(p.Snapshot); err != nil {
			return nil, fmt.Errorf("point %s: %w", p.ID, err)
		}
	}
	for path, b := range files {
		if sum, ok := FileObject(path, b); ok {
			sums = append(sums, sum)
		}
	}
	slices.Sort(sums)
	return slices.Compact(sums), nil
}

// Dropped are the objects a replaced point's listing (old) named that
// its replacement (new) does not: those the replacement may leave
// unreferenced, for Store.CollectObjects.
func Dropped(old, new []byte) []string {
	was, _ := ListingSums(old)
	now, _ := ListingSums(new)
	return slices.DeleteFunc(was, func(s string) bool { _, ok := slices.BinarySearch(now, s); return ok })
}

// CostMicros is a manifest file's cumulative cost (metrics, cents) in
// micro-dollars: what the job spent, as file mode's manifest says it.
func CostMicros(manifestFile []byte) int64 { return readHead(manifestFile).cost() }

// BudgetMicros is a manifest file's budget (cost_threshold, cents) in
// micro-dollars, 0 when it sets none: the budget a call is checked
// against before it starts (Apply).
func BudgetMicros(manifestFile []byte) int64 { return readHead(manifestFile).budget() }

func centsToMicros(c float64) int64 { return manifest.CentsToMicros(c) }

// SubmitCommand is what a submission's idempotency key is bound to: the
// job, its manifest and the files submitted with it, by their hashes (the
// same manifest with other files is another submission).
func SubmitCommand(id string, manifest []byte, files map[string][]byte) string {
	sum := sha256.Sum256(manifest)
	out := "submit " + id + " sha256:" + hex.EncodeToString(sum[:])
	if len(files) == 0 {
		return out
	}
	h := sha256.New()
	for _, p := range slices.Sorted(maps.Keys(files)) {
		fs := sha256.Sum256(files[p])
		fmt.Fprintf(h, "%d:%s %x\n", len(p), p, fs)
	}
	return out + " files sha256:" + hex.EncodeToString(h.Sum(nil))
}

// ValidPointID reports whether id may name a recovery point (it becomes
// a file name when a node restores the job).
func ValidPointID(id string) bool {
	return id != "" && validID(id) == nil && len(id) <= 200
}

// CheckPoint is the rule of a unit's recovery point and objects: a point
// named as a file may be, each object stored under the hash of its
// content (content-addressed: one SHA-256, one content, for every job),
// and each one its files name as a git bundle a git bundle (checkBundles).
func CheckPoint(job string, u *Unit) error { return checkPoint(job, u.Point, u.Files, u.Objects) }

func checkPoint(job string, p *RecoveryPoint, files, objects map[string][]byte) error {
	if p != nil && !ValidPointID(p.ID) {
		return fmt.Errorf("job %s: invalid recovery point id %q", job, p.ID)
	}
	for sum, b := range objects {
		got := sha256.Sum256(b)
		if !ValidSum(sum) || hex.EncodeToString(got[:]) != sum {
			return fmt.Errorf("job %s: object %q does not hold the content of its hash", job, short(sum))
		}
	}
	return checkBundles(job, files, objects)
}

// Steered is the one rule of a steward's change: legal from the status
// the job is in, the epoch bumped (whoever ran the job is fenced out), the
// lease released, the steward's records continuing the history, the
// manifest replaced when the change carries one, the snapshot it keeps
// (Steering.Point) validly named, at one of its records, with each object
// under its content's hash and each bundle it carries a git bundle
// (checkBundles). (That the point's id is new to the job, and
// its objects stored, the store checks against its points: NewPoint.)
func Steered(j Job, st *Steering) (Job, error) {
	if st.Key == "" {
		return j, fmt.Errorf("job %s: a steward's change needs an idempotency key", j.ID)
	}
	if j.Status != st.From {
		return j, fmt.Errorf("job %s is %s, not %s: %w", j.ID, j.Status, st.From, ErrConflict)
	}
	if !st.To.Valid() {
		return j, fmt.Errorf("job %s: unknown status %q", j.ID, st.To)
	}
	if err := CheckFiles(j.ID, st.Files); err != nil {
		return j, err
	}
	if err := checkPoint(j.ID, st.Point, st.Files, st.Objects); err != nil {
		return j, err
	}
	next, last, err := Continue(&j, st.Lines)
	if err != nil {
		return j, err
	}
	if p := st.Point; p != nil && (p.Seq < j.NextSeq || p.Seq >= next) {
		return j, fmt.Errorf("job %s: the change's point %s is at record %d, not one of its own (%d to %d)", j.ID, p.ID, p.Seq, j.NextSeq, next-1)
	}
	j.NextSeq, j.LastHash = next, last
	j.Status = st.To
	if st.Manifest != nil {
		j.Manifest = st.Manifest
	}
	j.Epoch++
	// A steward's change is claimable at once, whatever backoff it ends.
	j.Owner, j.LeaseUntil, j.ClaimAfter = "", time.Time{}, time.Time{}
	return j, nil
}

// NewPoint is the rule of a steering's point against the job's points
// (had, their ids): a change keeps a snapshot beside them, it replaces
// none.
func NewPoint(job string, p *RecoveryPoint, had []string) error {
	if p != nil && slices.Contains(had, p.ID) {
		return fmt.Errorf("job %s has a point %s already; a steward's change replaces none", job, p.ID)
	}
	return nil
}

// SteerCommand is what an idempotency key is bound to when the steering
// names no command of its own.
func SteerCommand(st *Steering) string {
	if st.Command != "" {
		return st.Command
	}
	return st.Job + " " + string(st.From) + "->" + string(st.To)
}

// KeyReuse is the one rule of a key used before: the same command gets
// the first outcome, another one is ErrIdempotency.
func KeyReuse(use *KeyUse, st *Steering) error {
	if use.Command != SteerCommand(st) || use.Job != st.Job {
		return fmt.Errorf("key %q was used for %q: %w", st.Key, use.Command, ErrIdempotency)
	}
	return nil
}

// CheckFiles checks that every file a change or a submission stores is
// inside the job's folder.
func CheckFiles(id string, files map[string][]byte) error {
	for p := range files {
		if !filepath.IsLocal(p) {
			return fmt.Errorf("job %s: file %q is not inside the job's folder", id, p)
		}
	}
	return nil
}
