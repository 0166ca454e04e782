package clusterstore

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/signing"
)

// FileStore is the Store of one machine: a folder with a file per job (its
// row, history lines and recovery points), a file per node and per
// idempotency key, each replaced whole and fsync'd (atomicfile) under an
// exclusive flock of the folder, which serialises every transaction like a
// database's row lock. Each commit rewrites the job's file (its cost grows
// with the history): it is the embedded peer that keeps the seam honest
// and the conformance suite's second implementation, not the file mode of
// today's daemon, whose job folders stay as they are.
type FileStore struct {
	dir string
	now func() time.Time
}

// fileJob is a job's file.
type fileJob struct {
	Job    Job               `json:"job"`
	Lines  [][]byte          `json:"lines"`
	Points []RecoveryPoint   `json:"points"`
	Files  map[string][]byte `json:"files,omitempty"`
	// Ticks are a template's fired ticks (RFC 3339, UTC) and their runs.
	Ticks map[string]string `json:"ticks,omitempty"`
}

// OpenFile opens (creating) a file store in dir.
func OpenFile(dir string) (*FileStore, error) {
	for _, sub := range []string{"jobs", "nodes", "keys", "objects"} {
		if err := atomicfile.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, err
		}
	}
	return &FileStore{dir: dir, now: time.Now}, nil
}

// locked runs f under the store's exclusive lock.
func (s *FileStore) locked(f func() error) error {
	lf, err := os.OpenFile(filepath.Join(s.dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = lf.Close() }() // also releases the lock
	for {
		err = unix.Flock(int(lf.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", s.dir, err)
	}
	return f()
}

func (s *FileStore) jobPath(id string) string { return filepath.Join(s.dir, "jobs", id+".json") }

func validID(id string) error {
	if id == "" || strings.ContainsAny(id, "/\\\x00") || id[0] == '.' {
		return fmt.Errorf("invalid job id %q", id)
	}
	return nil
}

func (s *FileStore) read(id string) (*fileJob, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(s.jobPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var fj fileJob
	if err := json.Unmarshal(b, &fj); err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	return &fj, nil
}

func (s *FileStore) write(fj *fileJob) error {
	b, err := json.Marshal(fj)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(s.jobPath(fj.Job.ID), b, 0o600)
}

// RegisterNode implements Store.
func (s *FileStore) RegisterNode(_ context.Context, node string, pub ed25519.PublicKey) error {
	return s.register(node, pub, false)
}

// RegisterSteward implements Store.
func (s *FileStore) RegisterSteward(_ context.Context, id string, pub ed25519.PublicKey) error {
	return s.register(id, pub, true)
}

func (s *FileStore) register(node string, pub ed25519.PublicKey, steward bool) error {
	if err := validID(node); err != nil {
		return err
	}
	return s.locked(func() error {
		path := filepath.Join(s.dir, "nodes", node+".json")
		var n Node
		if b, err := os.ReadFile(path); err == nil {
			if err := json.Unmarshal(b, &n); err != nil {
				return err
			}
			if n.KeyID != signing.KeyID(pub) {
				return fmt.Errorf("node %s is registered with key %s, not %s", node, n.KeyID, signing.KeyID(pub))
			}
		}
		n = Node{ID: node, KeyID: signing.KeyID(pub), Public: pub, HeartbeatAt: s.now().UTC(), Steward: steward}
		b, err := json.Marshal(n)
		if err != nil {
			return err
		}
		return atomicfile.WriteFile(path, b, 0o600)
	})
}

// Nodes implements Store.
func (s *FileStore) Nodes(context.Context) ([]Node, error) {
	var out []Node
	err := s.locked(func() error {
		names, err := filepath.Glob(filepath.Join(s.dir, "nodes", "*.json"))
		if err != nil {
			return err
		}
		slices.Sort(names)
		for _, name := range names {
			b, err := os.ReadFile(name)
			if err != nil {
				return err
			}
			var n Node
			if err := json.Unmarshal(b, &n); err != nil {
				return err
			}
			out = append(out, n)
		}
		return nil
	})
	return out, err
}

// Submit implements Store.
func (s *FileStore) Submit(_ context.Context, id string, status lifecycle.Status, m []byte, budget int64) error {
	if err := validID(id); err != nil {
		return err
	}
	return s.locked(func() error {
		if _, err := os.Stat(s.jobPath(id)); err == nil {
			return fmt.Errorf("job %s: %w", id, ErrExists)
		}
		return s.write(&fileJob{Job: Job{ID: id, Status: status, Manifest: m, BudgetMicros: budget, Template: IsTemplate(m)}})
	})
}

// jobs lists every job file's content (under the lock).
func (s *FileStore) all() ([]*fileJob, error) {
	names, err := filepath.Glob(filepath.Join(s.dir, "jobs", "*.json"))
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var out []*fileJob
	for _, name := range names {
		fj, err := s.read(strings.TrimSuffix(filepath.Base(name), ".json"))
		if err != nil {
			return nil, err
		}
		out = append(out, fj)
	}
	return out, nil
}

// Claim implements Store.
func (s *FileStore) Claim(_ context.Context, node string, ttl time.Duration) (*Lease, error) {
	var lease *Lease
	err := s.locked(func() error {
		all, err := s.all()
		if err != nil {
			return err
		}
		now := s.now()
		for _, fj := range all {
			if !Claimable(&fj.Job, now) {
				continue
			}
			j, l := Claimed(fj.Job, node, now, ttl)
			fj.Job = j
			if err := s.write(fj); err != nil {
				return err
			}
			lease = &l
			return nil
		}
		return nil
	})
	return lease, err
}

// Heartbeat implements Store.
func (s *FileStore) Heartbeat(_ context.Context, l *Lease, ttl time.Duration) error {
	return s.locked(func() error {
		fj, err := s.read(l.Job)
		if err != nil {
			return err
		}
		if err := Fence(&fj.Job, l); err != nil {
			return err
		}
		fj.Job.LeaseUntil = s.now().Add(ttl)
		if err := s.write(fj); err != nil {
			return err
		}
		l.Until = fj.Job.LeaseUntil
		return nil
	})
}

// Commit implements Store.
func (s *FileStore) Commit(_ context.Context, l *Lease, u Unit) error {
	return s.locked(func() error {
		fj, err := s.read(l.Job)
		if err != nil {
			return err
		}
		j, err := Apply(fj.Job, l, &u)
		if err != nil {
			return err
		}
		var dropped []string
		if u.Point != nil {
			if err := s.pointObjects(j.ID, u.Point, u.Objects); err != nil {
				return err
			}
			for _, p := range fj.Points {
				if p.ID == u.Point.ID {
					dropped = Dropped(p.Snapshot, u.Point.Snapshot)
				}
			}
		}
		// Objects first: a job's file never names content the store
		// lacks. An object a failed commit leaves is content no point
		// names, as harmless as a copy of it (collected).
		for sum, b := range u.Objects {
			p := filepath.Join(s.dir, "objects", sum)
			if _, err := os.Stat(p); err == nil {
				continue
			}
			if err := atomicfile.WriteFile(p, b, 0o600); err != nil {
				return err
			}
		}
		fj.Job = j
		fj.Lines = append(fj.Lines, u.Lines...)
		fj.addFiles(u.Files)
		if u.Point != nil {
			fj.Points = slices.DeleteFunc(fj.Points, func(p RecoveryPoint) bool { return p.ID == u.Point.ID })
			fj.Points = append(fj.Points, *u.Point)
		}
		if err := s.write(fj); err != nil {
			return err
		}
		if len(dropped) > 0 {
			_, err = s.collect(dropped)
		}
		return err
	})
}

// pointObjects checks that every object p's listing names is in objects
// or stored (ErrMissingObject).
func (s *FileStore) pointObjects(job string, p *RecoveryPoint, objects map[string][]byte) error {
	sums, err := ListingSums(p.Snapshot)
	if err != nil {
		return fmt.Errorf("job %s: point %s: %w", job, p.ID, err)
	}
	for _, sum := range sums {
		if objects[sum] != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(s.dir, "objects", sum)); err != nil {
			return fmt.Errorf("job %s: point %s: object %s: %w", job, p.ID, short(sum), ErrMissingObject)
		}
	}
	return nil
}

// SubmitKeyed implements Store.
func (s *FileStore) SubmitKeyed(_ context.Context, sub Submission) (bool, error) {
	if err := validID(sub.ID); err != nil {
		return false, err
	}
	repeat := false
	err := s.locked(func() error {
		keyPath := filepath.Join(s.dir, "keys", fmt.Sprintf("%x.json", sub.Key))
		if use, err := s.keyUse(keyPath); err != nil {
			return err
		} else if use != nil {
			repeat = true
			return KeyReuse(use, &Steering{Job: sub.ID, Key: sub.Key, Command: sub.Command})
		}
		if _, err := os.Stat(s.jobPath(sub.ID)); err == nil {
			return fmt.Errorf("job %s: %w", sub.ID, ErrExists)
		}
		if err := s.write(&fileJob{Job: Job{ID: sub.ID, Status: sub.Status, Manifest: sub.Manifest, BudgetMicros: sub.BudgetMicros, Template: IsTemplate(sub.Manifest)}}); err != nil {
			return err
		}
		b, err := json.Marshal(KeyUse{Command: sub.Command, Job: sub.ID, Status: sub.Status})
		if err != nil {
			return err
		}
		return atomicfile.WriteFile(keyPath, b, 0o600)
	})
	return repeat && err == nil, err
}

// CollectObjects implements Store: under the store's lock, which every
// commit holds too.
func (s *FileStore) CollectObjects(_ context.Context, sums []string) (int, error) {
	var n int
	err := s.locked(func() (err error) {
		n, err = s.collect(sums)
		return err
	})
	return n, err
}

// collect deletes, of sums (nil: all), the objects no point names (under
// the lock).
func (s *FileStore) collect(sums []string) (int, error) {
	jobs, err := s.all()
	if err != nil {
		return 0, err
	}
	named := map[string]bool{}
	for _, fj := range jobs {
		for _, p := range fj.Points {
			ls, err := ListingSums(p.Snapshot)
			if err != nil {
				return 0, fmt.Errorf("job %s: point %s: %w", fj.Job.ID, p.ID, err)
			}
			for _, sum := range ls {
				named[sum] = true
			}
		}
	}
	if sums == nil {
		ents, err := os.ReadDir(filepath.Join(s.dir, "objects"))
		if err != nil {
			return 0, err
		}
		for _, e := range ents {
			sums = append(sums, e.Name())
		}
	}
	n := 0
	for _, sum := range sums {
		if named[sum] || !ValidSum(sum) {
			continue
		}
		err := os.Remove(filepath.Join(s.dir, "objects", sum))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return n, err
		}
		n++
	}
	if n > 0 {
		return n, atomicfile.SyncDir(filepath.Join(s.dir, "objects"))
	}
	return n, nil
}

// Steer implements Store.
func (s *FileStore) Steer(_ context.Context, st Steering) (*Job, error) {
	var out *Job
	err := s.locked(func() error {
		fj, err := s.read(st.Job)
		if err != nil {
			return err
		}
		keyPath := filepath.Join(s.dir, "keys", fmt.Sprintf("%x.json", st.Key))
		if use, err := s.keyUse(keyPath); err != nil {
			return err
		} else if use != nil {
			if err := KeyReuse(use, &st); err != nil {
				return err
			}
			out = &fj.Job
			return nil
		}
		j, err := Steered(fj.Job, &st)
		if err != nil {
			return err
		}
		fj.Job = j
		fj.Lines = append(fj.Lines, st.Lines...)
		fj.addFiles(st.Files)
		if err := s.write(fj); err != nil {
			return err
		}
		b, err := json.Marshal(KeyUse{Command: SteerCommand(&st), Job: st.Job, Status: j.Status, Epoch: j.Epoch})
		if err != nil {
			return err
		}
		out = &fj.Job
		return atomicfile.WriteFile(keyPath, b, 0o600)
	})
	return out, err
}

func (fj *fileJob) addFiles(files map[string][]byte) {
	for p, b := range files {
		if fj.Files == nil {
			fj.Files = map[string][]byte{}
		}
		fj.Files[p] = b
	}
}

func (s *FileStore) keyUse(path string) (*KeyUse, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var k KeyUse
	return &k, json.Unmarshal(b, &k)
}

// SteerKey implements Store.
func (s *FileStore) SteerKey(_ context.Context, key string) (*KeyUse, error) {
	var out *KeyUse
	err := s.locked(func() (err error) {
		out, err = s.keyUse(filepath.Join(s.dir, "keys", fmt.Sprintf("%x.json", key)))
		return err
	})
	return out, err
}

// Files implements Store.
func (s *FileStore) Files(_ context.Context, id string) (map[string][]byte, error) {
	var out map[string][]byte
	err := s.locked(func() error {
		fj, err := s.read(id)
		if err == nil {
			out = fj.Files
		}
		return err
	})
	return out, err
}

// Fire implements Store.
func (s *FileStore) Fire(_ context.Context, t Tick) (bool, error) {
	fired := false
	err := s.locked(func() error {
		fj, err := s.read(t.Template)
		if err != nil {
			return err
		}
		at := t.At.UTC().Format(time.RFC3339Nano)
		if _, ok := fj.Ticks[at]; ok {
			return nil
		}
		if t.Run != "" {
			if err := validID(t.Run); err != nil {
				return err
			}
			if _, err := os.Stat(s.jobPath(t.Run)); err == nil {
				return fmt.Errorf("run %s: %w", t.Run, ErrExists)
			}
			if err := s.write(&fileJob{Job: Job{ID: t.Run, Status: lifecycle.Pending, Manifest: t.Manifest}}); err != nil {
				return err
			}
		}
		if fj.Ticks == nil {
			fj.Ticks = map[string]string{}
		}
		fj.Ticks[at] = t.Run
		fired = true
		return s.write(fj)
	})
	return fired, err
}

// LastTick implements Store.
func (s *FileStore) LastTick(_ context.Context, template string) (time.Time, error) {
	var last time.Time
	err := s.locked(func() error {
		fj, err := s.read(template)
		if err != nil {
			return err
		}
		for at := range fj.Ticks {
			if t, err := time.Parse(time.RFC3339Nano, at); err == nil && t.After(last) {
				last = t
			}
		}
		return nil
	})
	return last, err
}

// Job implements Store.
func (s *FileStore) Job(_ context.Context, id string) (*Job, error) {
	var out *Job
	err := s.locked(func() error {
		fj, err := s.read(id)
		if err == nil {
			out = &fj.Job
		}
		return err
	})
	return out, err
}

// Jobs implements Store.
func (s *FileStore) Jobs(context.Context) ([]Job, error) {
	var out []Job
	err := s.locked(func() error {
		all, err := s.all()
		for _, fj := range all {
			out = append(out, fj.Job)
		}
		return err
	})
	return out, err
}

// History implements Store.
func (s *FileStore) History(_ context.Context, id string) ([][]byte, error) {
	var out [][]byte
	err := s.locked(func() error {
		fj, err := s.read(id)
		if err == nil {
			out = fj.Lines
		}
		return err
	})
	return out, err
}

// Points implements Store.
func (s *FileStore) Points(_ context.Context, id string) ([]RecoveryPoint, error) {
	var out []RecoveryPoint
	err := s.locked(func() error {
		fj, err := s.read(id)
		if err == nil {
			out = fj.Points
		}
		return err
	})
	return out, err
}

// Objects implements Store.
func (s *FileStore) Objects(_ context.Context, sums []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, sum := range sums {
		if !ValidSum(sum) {
			return nil, fmt.Errorf("object %q: %w", short(sum), ErrNotFound)
		}
		b, err := os.ReadFile(filepath.Join(s.dir, "objects", sum))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("object %s: %w", short(sum), ErrNotFound)
		}
		if err != nil {
			return nil, err
		}
		out[sum] = b
	}
	return out, nil
}

// Close implements Store.
func (s *FileStore) Close() {}
