package clusterstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
)

// The folder's owner: file mode's logistd runs the engine on its own jobs
// folder, whose lock (.logistd.lock, jobstore.LockDaemon) makes it the one
// process that runs any job there. Its store is a FolderStore opened with
// OwnFolder, and every unit its engine, steward and scheduler append goes
// through Store.Commit under the owner's standing lease (Own), the unit's
// write being the engine's own (Unit.Write: history.Log's one write and
// one fsync of the unit). The rule is the one rule (Apply: the fence, a
// known status, the history continued, the budget where a call starts);
// what the owner does not do is what the folder makes needless:
//
//   - no lease is taken or written: the folder lock stands for it, so a
//     pickup costs no write, and the owner is never fenced;
//   - no row is written per unit: the job's status, budget and spending
//     are kept in memory, read from its manifest when the store first
//     meets the job and whenever its history moved on since the store
//     wrote it (a steward's change through jobtx: the CLI's, under the
//     job's lock), and taken from each unit's commit record (the
//     manifest it commits: its status, budget, and cost as spending);
//   - the job's lock is the caller's: the engine's transaction (jobtx)
//     holds it while it appends, and the store takes no lock of its own,
//     so the units of different jobs are written side by side;
//   - job.json is written by the transaction after the unit, as in file
//     mode (jobtx: the commit record is the durable copy, restored from
//     the history after a crash).
//
// A unit of the owner carries records and a manifest only: its recovery
// points are its folder's snapshots, its files are in its folder.

// OwnerNode is the node name of the owner's lease.
const OwnerNode = "logistd"

// owner is the owner's view of its jobs.
type owner struct {
	mu   sync.Mutex
	jobs map[string]*ownJob
}

// ownJob is a job as the owner's store last wrote it.
type ownJob struct {
	mu  sync.Mutex
	job Job
	// size is the history's size after the store's last write (-1: not
	// known): another size means someone else wrote it since.
	size int64
}

// OwnFolder opens the store of the jobs folder jobs for its owner (the
// process holding its daemon lock), reading the folder through jobs. The
// store's own folder (clusterDir) is made only when a method other than
// the owner's commits needs it.
func OwnFolder(jobs *jobstore.Store) *FolderStore {
	s := newFolder(jobs.Dir) // makes nothing
	s.jobs = jobs
	s.own = &owner{jobs: map[string]*ownJob{}}
	return s
}

// Own is the owner's lease of job id: epoch 0, which no claim makes
// (Claimed bumps an epoch from 0), so it is never a claimed lease.
func (s *FolderStore) Own(id string) *Lease { return &Lease{Job: id, Node: OwnerNode} }

// owns says whether u is the owner's unit under its lease.
func (s *FolderStore) owns(l *Lease, u *Unit) bool {
	return s.own != nil && u.Write != nil && l.Node == OwnerNode && l.Epoch == 0
}

func (o *owner) job(id string) *ownJob {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.jobs[id]
	if e == nil {
		e = &ownJob{size: -1}
		o.jobs[id] = e
	}
	return e
}

// forget drops job id's view (a job the daemon does not run: met again,
// it is read again).
func (o *owner) forget(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.jobs, id)
}

// commitOwn commits the owner's unit u of job l.Job: Apply on the job as
// the store knows it, then the unit's write, which is the store's.
func (s *FolderStore) commitOwn(l *Lease, u Unit) error {
	if u.Point != nil || len(u.Objects) > 0 || len(u.Files) > 0 || u.Release || u.Backoff != 0 {
		return fmt.Errorf("job %s: the folder's owner commits records and manifests only", l.Job)
	}
	if len(u.Lines) == 0 {
		return fmt.Errorf("job %s: the owner's unit has no records", l.Job)
	}
	if err := validID(l.Job); err != nil {
		return err
	}
	e := s.own.job(l.Job)
	e.mu.Lock()
	defer e.mu.Unlock()
	size, err := historySize(s.jobs.JobDir(l.Job))
	if err != nil {
		return err
	}
	if size != e.size {
		// Met first, or written by someone else since (a steward's
		// change, under the job's lock the caller holds now): its
		// status, budget and spending as its manifest says, its end as
		// the caller read it under that lock (where its unit starts).
		m, err := s.jobs.ReadManifest(l.Job)
		if err != nil {
			return fmt.Errorf("job %s: %w", l.Job, err)
		}
		var first history.Link
		if len(u.Links) == len(u.Lines) {
			first = u.Links[0]
		} else if first, err = lineLink(u.Lines[0]); err != nil {
			return fmt.Errorf("job %s: record: %v: %w", l.Job, err, ErrConflict)
		}
		e.job = fileModeJob(l.Job, m)
		e.job.NextSeq, e.job.LastHash = first.Seq, first.PrevHash
	}
	j := e.job
	j.Epoch, j.Owner = l.Epoch, l.Node
	if u.Manifest != nil {
		// The manifest the unit commits says the job's status, budget
		// and spending (its cost: the sum of its recorded responses'),
		// whatever the unit says besides.
		h := unitHead(&u)
		budget := h.budget()
		u.Status, u.BudgetMicros = h.Status, &budget
		u.DebitMicros = max(0, h.cost()-j.SpentMicros)
	}
	j, err = Apply(j, l, &u, s.now())
	if err != nil {
		e.size = -1 // read the job again next time, whatever misled this unit
		return err
	}
	if err := u.Write(); err != nil {
		e.size = -1 // what reached the file is the history's to say
		return err
	}
	if !j.Status.Active() || j.Template {
		s.own.forget(l.Job)
		return nil
	}
	n := int64(0)
	for _, line := range u.Lines {
		n += int64(len(line))
	}
	// A rotation (a new, shorter file) reads the job again next time.
	j.Manifest = nil
	e.job, e.size = j, size+n
	return nil
}

// historySize is the size of the history in the job folder dir (0: none).
func historySize(dir string) (int64, error) {
	fi, err := os.Stat(history.Path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
