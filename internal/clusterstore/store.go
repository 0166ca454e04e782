// Package clusterstore is the storage seam of cluster mode: what the engine
// needs from a system of record to run one job on one of many nodes —
// intake, a claim that takes a lease and bumps the job's epoch, heartbeats,
// and fenced commits (history records, the status and manifest, a recovery
// point, a budget debit, all in one transaction that is refused when the
// job's epoch moved on). Two implementations pass one conformance suite
// (storetest): internal/pgstore on PostgreSQL, and FolderStore in this
// package, a jobs folder in file mode's format (job.json, history.jsonl)
// written through file mode's own code, which file mode's logistd commits
// every unit through as the folder's owner (own.go). The rules both apply — what a fenced
// commit must satisfy, which jobs are claimable, what a lease may do — are
// the functions in rules.go, so they cannot drift apart.
package clusterstore

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
)

// Errors a Store returns (wrapped: test with errors.Is).
var (
	// ErrFenced: the job's epoch moved on (another node claimed it, or a
	// steward took it back): the caller no longer owns the job and must
	// write nothing more for it.
	ErrFenced = errors.New("fenced: the job's epoch moved on; this node no longer owns it")
	// ErrLeaseEnded (which is also ErrFenced: nothing more may be
	// written under the lease) is the lease's own end, not a fence: the
	// job is still at the lease's epoch and nobody holds it, because the
	// lease's holder committed a status the daemon does not run (the job
	// ended or waits for a human) or released it. No one else took the
	// job; the holder simply has nothing left to do for it.
	ErrLeaseEnded = fmt.Errorf("the lease ended at its own epoch (the job stopped or was released): %w", ErrFenced)
	// ErrBudget: a call would start with the job's budget spent.
	ErrBudget = errors.New("budget exhausted: no call may start once the job's budget is spent")
	// ErrConflict: records that do not continue the job's history (wrong
	// sequence or predecessor hash).
	ErrConflict = errors.New("history conflict: records do not continue the job's history")
	// ErrNotFound: no such job.
	ErrNotFound = errors.New("no such job")
	// ErrExists: a job with this id was already submitted.
	ErrExists = errors.New("job already exists")
	// ErrNewerSchema: the store was written by a newer Logist.
	ErrNewerSchema = errors.New("the store's schema is newer than this logist knows; upgrade logist")
	// ErrIdempotency: a different command was sent with a key already used.
	ErrIdempotency = errors.New("idempotency key already used by a different command")
	// ErrMissingObject: a recovery point's listing or a bundle file
	// (NamedObjects) names an object the store does not hold and the
	// unit does not carry (collected since the node last saw it): send
	// the objects again.
	ErrMissingObject = errors.New("a unit names an object the store does not hold")
)

// Lease is a node's ownership of a job for one epoch. Every write that
// depends on ownership carries it; the store refuses it once the job's
// epoch is no longer Epoch.
type Lease struct {
	Job   string
	Node  string
	Epoch int64
	// Until is when the lease expires unless heartbeated (the store's
	// clock).
	Until time.Time
	// Rescued: the job was claimed from a node whose lease had expired.
	Rescued bool
}

// Job is a job as the store holds it.
type Job struct {
	ID       string
	Status   lifecycle.Status
	Manifest []byte
	Epoch    int64
	// Owner is the node holding the lease ("" when none: waiting,
	// finished, or between claims).
	Owner      string
	LeaseUntil time.Time
	// ClaimAfter, if set, is when a job a node gave back with a backoff
	// (Unit.Backoff; no owner meanwhile) is claimable again.
	ClaimAfter time.Time
	// NextSeq is the number of history records; LastHash the last one's
	// hash (history.GenesisHash when none).
	NextSeq  int64
	LastHash string
	// Budget and Spent in micro-dollars (Budget 0: no budget).
	BudgetMicros int64
	SpentMicros  int64
	Rescues      int64
	// Template: a schedule's template (IsTemplate), which no node claims:
	// its ticks create runs (Fire).
	Template bool
}

// RecoveryPoint is a recovery point's stored snapshot: its checkpoint id,
// the sequence of its history record, and the snapshot's listing
// (internal/snapshot's Listing, JSON; nil for an empty workspace) whose
// files' contents are objects (Unit.Objects, Store.Objects). A point with
// the id of one stored already replaces it.
type RecoveryPoint struct {
	ID       string
	Seq      int64
	Snapshot []byte
}

// Unit is one fenced commit: everything in it happens, in one
// transaction, or nothing does. Zero fields change nothing.
type Unit struct {
	// Lines are history envelopes (history.Seal's output), continuing
	// the job's history: the first has sequence NextSeq and names
	// LastHash as its predecessor.
	Lines [][]byte
	// Links, if not nil, are Lines' links as the process that sealed
	// them handed them over with them (history.Unit.Links: Links[i] is
	// Lines[i]'s), which the store checks in place of parsing each line
	// again; nil for lines from anywhere else.
	Links []history.Link
	// Status, if set, is the job's new status (a legal one: lifecycle);
	// a status the daemon does not run releases the lease (a job waiting
	// for a human holds none).
	Status lifecycle.Status
	// Manifest, if set, replaces the stored manifest.
	Manifest []byte
	// Said, if set with Manifest, is what Manifest says of the job's
	// status, budget and spending as the process that encoded it held
	// them (history.Commit.Said): the owner's store takes them from here
	// in place of decoding Manifest (FolderStore.Own).
	Said *history.Said
	// DebitMicros is what the unit's calls cost: added to what the job
	// spent, whatever the budget (the money is spent in the world; the
	// budget is checked when a call starts: BudgetMicros).
	DebitMicros int64
	// BudgetMicros, if not nil, is the job's new budget (0: none), set
	// before the unit's calls are checked against it: the manifest the
	// unit commits says it (cost_threshold).
	BudgetMicros *int64
	// Point, if set, is stored as a recovery point.
	Point *RecoveryPoint
	// Objects are snapshot contents by their SHA-256 (lowercase hex),
	// stored once whoever sends them again (content-addressed, shared by
	// every job): those of Point's listing the store may not hold yet.
	Objects map[string][]byte
	// Release gives up the lease after the commit.
	Release bool
	// Backoff, with Release, keeps any node from claiming the job for
	// this long (Job.ClaimAfter): its node could not start it (the store
	// could not hand it out whole, such as a recovery point naming an
	// object the store lacks), and it is not claimed again in a loop.
	Backoff time.Duration
	// Files are files of the job's folder the records refer to (the
	// protocol's artifacts), by path relative to the folder, stored with
	// them (Store.Files).
	Files map[string][]byte
	// Write, if set, is the engine's own write of Lines into the history
	// of the job's folder it runs in (history.Unit.Write: one write, one
	// fsync), which the store calls once the unit is stored — or, for
	// the folder's owner (FolderStore.Own: the engine's folder is the
	// store's), as the store's write of the lines itself. A unit the
	// store refuses is never written. Nil: the store's record only.
	Write func() error
}

// Submission is a job submitted under an idempotency key
// (Store.SubmitKeyed): Command is what the key is bound to (the manifest
// and files, by their hash: SubmitCommand).
type Submission struct {
	Key, Command string
	ID           string
	Status       lifecycle.Status
	Manifest     []byte
	BudgetMicros int64
	// Files are the job folder's files submitted with the manifest (a
	// game's scenario, prompts), by path relative to the folder, stored
	// with the job (Store.Files) in the same transaction.
	Files map[string][]byte
}

// Node is a registered node and its signing key.
type Node struct {
	ID          string
	KeyID       string
	Public      ed25519.PublicKey
	HeartbeatAt time.Time
	// Steward: a steward's key (logist's, signing steward records), not a
	// node that runs jobs and heartbeats.
	Steward bool
}

// Steering is a steward's change of a job, made outside any lease (the
// steward's command computed on the job as read: NextSeq, LastHash).
type Steering struct {
	Job string
	// Key is the idempotency key; Command what it is bound to (the
	// steward's request, in words).
	Key, Command string
	// From is the status the change was computed from; To the status
	// after (the same for a change of configuration).
	From, To lifecycle.Status
	// Lines are the steward's signed records, continuing the history as
	// it was read: if it moved on meanwhile the change is ErrConflict
	// (read the job again and recompute).
	Lines [][]byte
	// Manifest, if set, replaces the stored manifest.
	Manifest []byte
	// Files are files of the job's folder the change writes (a reply),
	// by path relative to the folder; every node writes them with the
	// folder (Store.Files).
	Files map[string][]byte
	// Point, if set, is a snapshot the change keeps, stored as a point of
	// the job beside its recovery points: a rollback's discarded work
	// (steward.keepDiscarded, whose record names it). Its id is new to
	// the job (a change replaces no point) and its Seq is one of Lines'
	// records (the one naming it).
	Point *RecoveryPoint
	// Objects are Point's objects the store may not hold yet, as a
	// unit's (Unit.Objects).
	Objects map[string][]byte
}

// KeyUse is what an idempotency key was used for: the command and its
// outcome (the job's status and epoch right after it).
type KeyUse struct {
	Command, Job string
	Status       lifecycle.Status
	Epoch        int64
}

// Tick is one tick of a schedule's template, fired once cluster-wide.
type Tick struct {
	Template string
	At       time.Time
	// Node fires it; Run is the run it creates (Manifest its manifest,
	// PENDING, and Files its folder's files: the template's), or "" when
	// the tick creates none (skipped: Forbid).
	Node, Run string
	Manifest  []byte
	Files     map[string][]byte
}

// Store is the system of record of cluster mode.
type Store interface {
	// RegisterNode records a node's signing key (and refreshes its
	// heartbeat); the same node may register again with the same key.
	RegisterNode(ctx context.Context, node string, pub ed25519.PublicKey) error
	// Nodes lists the registered nodes.
	Nodes(ctx context.Context) ([]Node, error)
	// Submit inserts a job with its first status (ErrExists when present).
	Submit(ctx context.Context, id string, status lifecycle.Status, manifest []byte, budgetMicros int64) error
	// SubmitKeyed is Submit under an idempotency key, with the job's
	// files, in one transaction: a key used before by the same submission
	// inserts nothing and reports a repeat; by another one it is
	// ErrIdempotency (KeyReuse). A job of that id submitted without the
	// key is ErrExists. An empty Key records none (a job of that id
	// submitted before is ErrExists).
	SubmitKeyed(ctx context.Context, sub Submission) (repeat bool, err error)
	// Claim takes one claimable job for node: one the daemon runs with no
	// owner or an expired lease. The epoch is bumped; nil, nil when none.
	Claim(ctx context.Context, node string, ttl time.Duration) (*Lease, error)
	// TakeBack claims again, at once, every job whose lease names node
	// (OwnLease), expired or not: each bumped to a new epoch (the previous
	// holder's writes are fenced) with a new lease of ttl (Claimed). Only
	// a node whose previous process is provably gone may call it.
	TakeBack(ctx context.Context, node string, ttl time.Duration) ([]*Lease, error)
	// Heartbeat extends the lease (ErrFenced when the epoch moved on).
	Heartbeat(ctx context.Context, l *Lease, ttl time.Duration) error
	// Commit applies u under the fence of l.
	Commit(ctx context.Context, l *Lease, u Unit) error
	// RegisterSteward records a steward's signing key (Node.Steward).
	RegisterSteward(ctx context.Context, id string, pub ed25519.PublicKey) error
	// Steer applies a steward's change, outside any lease: it bumps the
	// epoch (fencing out whoever ran the job) and releases the lease,
	// appending the steward's records and storing the snapshot it keeps,
	// in one transaction (Steered). A repeated key returns
	// the job as it is, changing nothing; a different command with it is
	// ErrIdempotency.
	Steer(ctx context.Context, st Steering) (*Job, error)
	// SteerKey says what key was used for (nil when unused).
	SteerKey(ctx context.Context, key string) (*KeyUse, error)
	// Files returns the files of job id's folder the store holds: those
	// submitted with it, and those its units and steward changes wrote.
	Files(ctx context.Context, id string) (map[string][]byte, error)
	// Fire records tick t of its template and inserts its run, in one
	// transaction, unless the tick was fired already (by any node): true
	// when this call fired it.
	Fire(ctx context.Context, t Tick) (bool, error)
	// LastTick is the template's last fired tick (zero when none).
	LastTick(ctx context.Context, template string) (time.Time, error)
	// Job reads a job; Jobs lists them all, by id.
	Job(ctx context.Context, id string) (*Job, error)
	Jobs(ctx context.Context) ([]Job, error)
	// History returns a job's records as stored (envelope lines).
	History(ctx context.Context, id string) ([][]byte, error)
	// Points returns a job's recovery points in order.
	Points(ctx context.Context, id string) ([]RecoveryPoint, error)
	// Objects returns the stored contents of sums (ErrNotFound naming the
	// first one missing).
	Objects(ctx context.Context, sums []string) (map[string][]byte, error)
	// CollectObjects deletes, of sums (nil: every stored object), the
	// objects no point's listing (a recovery point's, a stop's, a
	// steering's) and no job's BundleFiles name (FileObject), and says
	// how many it deleted. It never runs while a unit or a steering
	// naming an object (NamedObjects) commits, so an object such a unit
	// names is never collected under it; a unit naming an object
	// collected before it is ErrMissingObject.
	CollectObjects(ctx context.Context, sums []string) (int, error)
	Close()
}

// Notifier is a store that tells its readers when jobs change, so that a
// follower (logs -f, watch, the console) reads what is new at once rather
// than polling. Notices are hints, never the record: a follower reads the
// store on each, and still polls now and then (a notice can be lost with
// its connection).
type Notifier interface {
	// Notify calls changed with the id of a job whose history, status or
	// manifest a committed transaction changed, and with "" whenever
	// notices may have been missed (on first listening and after each
	// reconnection): the caller then reads every job it follows. It
	// returns when ctx ends, reconnecting meanwhile whatever fails.
	// changed is called from one goroutine and must not block long.
	Notify(ctx context.Context, changed func(id string)) error
}
