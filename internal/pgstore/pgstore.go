// Package pgstore is cluster mode's system of record on PostgreSQL: the
// clusterstore.Store that many logistd nodes share. PostgreSQL does the
// hard part — row locks, transactions, durability, replication — and this
// package keeps to one pattern: a transaction reads the job's row FOR
// UPDATE, applies clusterstore's rule for the change (the same rule the
// file store applies), and writes the row and what the change adds in the
// same transaction. Claims take the first claimable row with FOR UPDATE
// SKIP LOCKED, so nodes never wait on each other's claims. Lease times are
// the database's clock, never a node's. The schema is migrated once, under
// an advisory lock, from migrations/ (embedded). A transaction that
// changes a job also NOTIFYs its id (Channel), delivered on commit only,
// so followers (logs -f, watch, the console) read at once (Notify).
package pgstore

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/signing"
)

// Store is a clusterstore.Store on PostgreSQL.
type Store struct {
	pool   *pgxpool.Pool
	active []string
}

var _ clusterstore.Store = (*Store)(nil)

// Open connects to url and migrates the schema (refusing a newer one).
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	if cfg.MaxConns < 4 {
		cfg.MaxConns = 4
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	s := &Store{pool: pool}
	for _, st := range lifecycle.All {
		if st.Active() {
			s.active = append(s.active, string(st))
		}
	}
	return s, nil
}

// Pool is the store's connection pool (health checks, metrics).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close implements clusterstore.Store.
func (s *Store) Close() { s.pool.Close() }

const jobCols = `id, status, manifest, epoch, coalesce(owner, ''), coalesce(lease_until, 'epoch'::timestamptz),
	next_seq, last_hash, budget_micros, spent_micros, rescues, template`

func scanJob(row pgx.Row) (clusterstore.Job, error) {
	var j clusterstore.Job
	var status string
	err := row.Scan(&j.ID, &status, &j.Manifest, &j.Epoch, &j.Owner, &j.LeaseUntil,
		&j.NextSeq, &j.LastHash, &j.BudgetMicros, &j.SpentMicros, &j.Rescues, &j.Template)
	j.Status = lifecycle.Status(status)
	if j.Owner == "" {
		// An unowned job's lease_until is its backoff (ClaimAfter).
		j.LeaseUntil, j.ClaimAfter = time.Time{}, j.LeaseUntil
		if j.ClaimAfter.Equal(time.Unix(0, 0)) {
			j.ClaimAfter = time.Time{}
		}
	}
	return j, err
}

// lockJob reads a job's row under FOR UPDATE, with the database's clock.
func lockJob(ctx context.Context, tx pgx.Tx, id string) (clusterstore.Job, time.Time, error) {
	var now time.Time
	if err := tx.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		return clusterstore.Job{}, now, err
	}
	j, err := scanJob(tx.QueryRow(ctx, "SELECT "+jobCols+" FROM logist_jobs WHERE id = $1 FOR UPDATE", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return j, now, fmt.Errorf("job %s: %w", id, clusterstore.ErrNotFound)
	}
	return j, now, err
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// leaseTime is the row's lease_until: the lease's end, or for a job no
// node owns its backoff's (Job.ClaimAfter), or NULL.
func leaseTime(j *clusterstore.Job) any {
	if j.Owner == "" {
		if j.ClaimAfter.IsZero() {
			return nil
		}
		return j.ClaimAfter
	}
	return j.LeaseUntil
}

// saveJob writes back the row lockJob read, as the rule left it.
func saveJob(ctx context.Context, tx pgx.Tx, j *clusterstore.Job) error {
	_, err := tx.Exec(ctx, `UPDATE logist_jobs SET status = $2, manifest = $3, epoch = $4, owner = $5,
		lease_until = $6, next_seq = $7, last_hash = $8, spent_micros = $9, rescues = $10, budget_micros = $11,
		updated_at = now() WHERE id = $1`, j.ID, string(j.Status), j.Manifest, j.Epoch, nullable(j.Owner), leaseTime(j),
		j.NextSeq, j.LastHash, j.SpentMicros, j.Rescues, j.BudgetMicros)
	return err
}

func insertLines(ctx context.Context, tx pgx.Tx, id string, first, epoch int64, lines [][]byte) error {
	for i, line := range lines {
		if _, err := tx.Exec(ctx, "INSERT INTO logist_history (job_id, seq, line, epoch) VALUES ($1, $2, $3, $4)",
			id, first+int64(i), line, epoch); err != nil {
			return err
		}
	}
	return nil
}

// RegisterNode implements clusterstore.Store.
func (s *Store) RegisterNode(ctx context.Context, node string, pub ed25519.PublicKey) error {
	return s.register(ctx, node, pub, false)
}

// RegisterSteward implements clusterstore.Store.
func (s *Store) RegisterSteward(ctx context.Context, id string, pub ed25519.PublicKey) error {
	return s.register(ctx, id, pub, true)
}

func (s *Store) register(ctx context.Context, node string, pub ed25519.PublicKey, steward bool) error {
	id := signing.KeyID(pub)
	tag, err := s.pool.Exec(ctx, `INSERT INTO logist_nodes (id, key_id, public_key, steward) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET heartbeat_at = now() WHERE logist_nodes.key_id = excluded.key_id`, node, id, []byte(pub), steward)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("node %s is registered with another key than %s", node, id)
	}
	return nil
}

// Nodes implements clusterstore.Store.
func (s *Store) Nodes(ctx context.Context) ([]clusterstore.Node, error) {
	rows, err := s.pool.Query(ctx, "SELECT id, key_id, public_key, heartbeat_at, steward FROM logist_nodes ORDER BY id")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (clusterstore.Node, error) {
		var n clusterstore.Node
		var pub []byte
		err := r.Scan(&n.ID, &n.KeyID, &pub, &n.HeartbeatAt, &n.Steward)
		n.Public = ed25519.PublicKey(pub)
		return n, err
	})
}

// Submit implements clusterstore.Store.
func (s *Store) Submit(ctx context.Context, id string, status lifecycle.Status, m []byte, budget int64) error {
	// One statement, so the notice goes with the row (Channel).
	_, err := s.pool.Exec(ctx, `WITH ins AS (INSERT INTO logist_jobs (id, status, manifest, budget_micros, template)
		VALUES ($1, $2, $3, $4, $5) RETURNING id) SELECT pg_notify($6, id) FROM ins`,
		id, string(status), m, budget, clusterstore.IsTemplate(m), Channel)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("job %s: %w", id, clusterstore.ErrExists)
	}
	return err
}

// Claim implements clusterstore.Store.
func (s *Store) Claim(ctx context.Context, node string, ttl time.Duration) (*clusterstore.Lease, error) {
	var lease *clusterstore.Lease
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var now time.Time
		if err := tx.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
			return err
		}
		// clusterstore.Claimable, as a query: SKIP LOCKED passes over
		// rows another node is claiming or committing.
		j, err := scanJob(tx.QueryRow(ctx, "SELECT "+jobCols+` FROM logist_jobs
			WHERE status = ANY($1) AND NOT template AND (lease_until IS NULL OR lease_until <= now())
			ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`, s.active))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if !clusterstore.Claimable(&j, now) {
			return fmt.Errorf("job %s: selected as claimable but is not (status %s, owner %q)", j.ID, j.Status, j.Owner)
		}
		j, l := clusterstore.Claimed(j, node, now, ttl)
		if err := saveJob(ctx, tx, &j); err != nil {
			return err
		}
		lease = &l
		return nil
	})
	return lease, err
}

// TakeBack implements clusterstore.Store: the node's rows are locked and
// claimed again in one transaction.
func (s *Store) TakeBack(ctx context.Context, node string, ttl time.Duration) ([]*clusterstore.Lease, error) {
	var out []*clusterstore.Lease
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = nil
		var now time.Time
		if err := tx.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT "+jobCols+` FROM logist_jobs
			WHERE owner = $1 AND status = ANY($2) AND NOT template ORDER BY created_at, id FOR UPDATE`, node, s.active)
		if err != nil {
			return err
		}
		js, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (clusterstore.Job, error) { return scanJob(r) })
		if err != nil {
			return err
		}
		for _, j := range js {
			if !clusterstore.OwnLease(&j, node) {
				return fmt.Errorf("job %s: selected as %s's but is not (status %s, owner %q)", j.ID, node, j.Status, j.Owner)
			}
			j, l := clusterstore.Claimed(j, node, now, ttl)
			if err := saveJob(ctx, tx, &j); err != nil {
				return err
			}
			out = append(out, &l)
		}
		return nil
	})
	return out, err
}

// Heartbeat implements clusterstore.Store.
func (s *Store) Heartbeat(ctx context.Context, l *clusterstore.Lease, ttl time.Duration) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		j, now, err := lockJob(ctx, tx, l.Job)
		if err != nil {
			return err
		}
		if err := clusterstore.Fence(&j, l); err != nil {
			return err
		}
		j.LeaseUntil = now.Add(ttl)
		if err := saveJob(ctx, tx, &j); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE logist_nodes SET heartbeat_at = now() WHERE id = $1", l.Node); err != nil {
			return err
		}
		l.Until = j.LeaseUntil
		return nil
	})
}

// objectsLock is the advisory lock key that keeps CollectObjects apart
// from the commits of recovery points ("objects" in ASCII).
const objectsLock = 0x6f626a65637473

// Commit implements clusterstore.Store. A unit that replaces a point
// (a restarted run recording it again) may leave objects no point names:
// they are collected after the commit. The caller's copy of the records
// (Unit.Write: a node's folder) is written once the transaction
// committed: the database is never behind the folder.
func (s *Store) Commit(ctx context.Context, l *clusterstore.Lease, u clusterstore.Unit) error {
	dropped, err := s.commit(ctx, l, u)
	if err == nil && len(dropped) > 0 {
		// Best effort: a failure leaves objects no point names, harmless,
		// until a later CollectObjects covers them.
		_, _ = s.CollectObjects(ctx, dropped)
	}
	if err == nil && u.Write != nil {
		err = u.Write()
	}
	return err
}

// commit is Commit's transaction; it returns the objects a replaced
// point named that its replacement does not.
func (s *Store) commit(ctx context.Context, l *clusterstore.Lease, u clusterstore.Unit) ([]string, error) {
	var dropped []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		j, now, err := lockJob(ctx, tx, l.Job)
		if err != nil {
			return err
		}
		first := j.NextSeq
		j, err = clusterstore.Apply(j, l, &u, now)
		if err != nil {
			return err
		}
		if err := insertLines(ctx, tx, j.ID, first, j.Epoch, u.Lines); err != nil {
			return err
		}
		if err := storeFiles(ctx, tx, j.ID, u.Files); err != nil {
			return err
		}
		named, err := clusterstore.NamedObjects(u.Point, u.Files)
		if err != nil {
			return fmt.Errorf("job %s: %w", j.ID, err)
		}
		if u.Point != nil || len(named) > 0 {
			// Shared with other commits, exclusive of CollectObjects: no
			// object this unit names is collected under it.
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock_shared($1)", objectsLock); err != nil {
				return err
			}
		}
		if u.Point != nil {
			var old []byte
			err := tx.QueryRow(ctx, "SELECT snapshot FROM logist_points WHERE job_id = $1 AND id = $2", j.ID, u.Point.ID).Scan(&old)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			dropped = clusterstore.Dropped(old, u.Point.Snapshot)
		}
		// Objects in the same transaction as the fence: a fenced
		// node's snapshot stores nothing.
		if err := insertObjects(ctx, tx, u.Objects); err != nil {
			return err
		}
		if err := heldObjects(ctx, tx, j.ID, named); err != nil {
			return err
		}
		if u.Point != nil {
			if _, err := tx.Exec(ctx, `INSERT INTO logist_points (job_id, id, seq, snapshot, epoch) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (job_id, id) DO UPDATE SET seq = excluded.seq, snapshot = excluded.snapshot, epoch = excluded.epoch`,
				j.ID, u.Point.ID, u.Point.Seq, u.Point.Snapshot, j.Epoch); err != nil {
				return err
			}
		}
		if err := notify(ctx, tx, j.ID); err != nil {
			return err
		}
		return saveJob(ctx, tx, &j)
	})
	return dropped, err
}

// Steer implements clusterstore.Store. The job's row lock serialises
// the steerings of one job; the key's primary key refuses a key two jobs'
// steerings race for (the loser's transaction is rolled back whole).
func (s *Store) Steer(ctx context.Context, st clusterstore.Steering) (*clusterstore.Job, error) {
	var out *clusterstore.Job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		j, _, err := lockJob(ctx, tx, st.Job)
		if err != nil {
			return err
		}
		if use, err := keyUse(ctx, tx, st.Key); err != nil {
			return err
		} else if use != nil {
			if err := clusterstore.KeyReuse(use, &st); err != nil {
				return err
			}
			out = &j
			return nil
		}
		first := j.NextSeq
		if j, err = clusterstore.Steered(j, &st); err != nil {
			return err
		}
		if err := insertLines(ctx, tx, j.ID, first, j.Epoch, st.Lines); err != nil {
			return err
		}
		if err := storeFiles(ctx, tx, j.ID, st.Files); err != nil {
			return err
		}
		if err := steerPoint(ctx, tx, j, &st); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO logist_idempotency (key, command, job_id, epoch, status) VALUES ($1, $2, $3, $4, $5)",
			st.Key, clusterstore.SteerCommand(&st), j.ID, j.Epoch, string(j.Status)); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "23505" {
				return fmt.Errorf("key %q is being used by another command: %w", st.Key, clusterstore.ErrIdempotency)
			}
			return err
		}
		out = &j
		if err := notify(ctx, tx, j.ID); err != nil {
			return err
		}
		return saveJob(ctx, tx, &j)
	})
	return out, err
}

// steerPoint stores the snapshot steering st keeps (its point, its
// objects) in the steering's transaction, as commit stores a unit's: a
// point of a new id (clusterstore.NewPoint), never collected under it;
// every object the steering names (its point's, its bundle files') held.
func steerPoint(ctx context.Context, tx pgx.Tx, j clusterstore.Job, st *clusterstore.Steering) error {
	named, err := clusterstore.NamedObjects(st.Point, st.Files)
	if err != nil {
		return fmt.Errorf("job %s: %w", j.ID, err)
	}
	if st.Point != nil || len(named) > 0 {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock_shared($1)", objectsLock); err != nil {
			return err
		}
	}
	if st.Point != nil {
		var had []string
		rows, err := tx.Query(ctx, "SELECT id FROM logist_points WHERE job_id = $1", j.ID)
		if err != nil {
			return err
		}
		if had, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		if err := clusterstore.NewPoint(j.ID, st.Point, had); err != nil {
			return err
		}
	}
	if err := insertObjects(ctx, tx, st.Objects); err != nil {
		return err
	}
	if err := heldObjects(ctx, tx, j.ID, named); err != nil {
		return err
	}
	if st.Point == nil {
		return nil
	}
	_, err = tx.Exec(ctx, "INSERT INTO logist_points (job_id, id, seq, snapshot, epoch) VALUES ($1, $2, $3, $4, $5)",
		j.ID, st.Point.ID, st.Point.Seq, st.Point.Snapshot, j.Epoch)
	return err
}

// insertObjects stores objects, content-addressed: one already stored
// is kept.
func insertObjects(ctx context.Context, tx pgx.Tx, objects map[string][]byte) error {
	for sum, b := range objects {
		if _, err := tx.Exec(ctx, "INSERT INTO logist_objects (sha256, content, size) VALUES ($1, $2, $3) ON CONFLICT (sha256) DO NOTHING",
			sum, b, len(b)); err != nil {
			return err
		}
	}
	return nil
}

// heldObjects checks, after the change's objects are inserted, that
// every object it names (clusterstore.NamedObjects: sums) is stored
// (clusterstore.ErrMissingObject).
func heldObjects(ctx context.Context, tx pgx.Tx, job string, sums []string) error {
	if len(sums) == 0 {
		return nil
	}
	var have int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM logist_objects WHERE sha256 = ANY($1)", sums).Scan(&have); err != nil {
		return err
	}
	if have != len(sums) {
		return fmt.Errorf("job %s: %d of the %d objects it names: %w", job, have, len(sums), clusterstore.ErrMissingObject)
	}
	return nil
}

// CollectObjects implements clusterstore.Store: a mark and sweep under
// the exclusive advisory lock every commit of a point shares, so it never
// runs beside one; an object is named when a point's listing (JSON) has
// an entry with its sum, or one of a job's bundle files (clusterstore.FileObject)
// holds its sum.
func (s *Store) CollectObjects(ctx context.Context, sums []string) (int, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", objectsLock); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM logist_objects o WHERE ($1::text[] IS NULL OR o.sha256 = ANY($1))
			AND NOT EXISTS (SELECT 1 FROM logist_points p WHERE p.snapshot IS NOT NULL
				AND convert_from(p.snapshot, 'UTF8')::jsonb -> 'entries' @> jsonb_build_array(jsonb_build_object('sha256', o.sha256)))
			AND NOT EXISTS (SELECT 1 FROM logist_files f WHERE f.path = ANY($2)
				AND btrim(convert_from(f.content, 'UTF8'), E' \t\r\n') = o.sha256)`, sums, clusterstore.BundleFiles)
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}

// SubmitKeyed implements clusterstore.Store: the key's row and the job's
// are inserted in one transaction (the key's primary key refuses a race).
func (s *Store) SubmitKeyed(ctx context.Context, sub clusterstore.Submission) (bool, error) {
	if err := clusterstore.CheckFiles(sub.ID, sub.Files); err != nil {
		return false, err
	}
	repeat := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if sub.Key != "" { // without a key, a job of the id is ErrExists below
			if use, err := keyUse(ctx, tx, sub.Key); err != nil {
				return err
			} else if use != nil {
				repeat = true
				return clusterstore.KeyReuse(use, &clusterstore.Steering{Job: sub.ID, Key: sub.Key, Command: sub.Command})
			}
		}
		if _, err := tx.Exec(ctx, "INSERT INTO logist_jobs (id, status, manifest, budget_micros, template) VALUES ($1, $2, $3, $4, $5)",
			sub.ID, string(sub.Status), sub.Manifest, sub.BudgetMicros, clusterstore.IsTemplate(sub.Manifest)); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "23505" {
				return fmt.Errorf("job %s: %w", sub.ID, clusterstore.ErrExists)
			}
			return err
		}
		if err := storeFiles(ctx, tx, sub.ID, sub.Files); err != nil {
			return err
		}
		if err := notify(ctx, tx, sub.ID); err != nil {
			return err
		}
		if sub.Key == "" {
			return nil
		}
		_, err := tx.Exec(ctx, "INSERT INTO logist_idempotency (key, command, job_id, epoch, status) VALUES ($1, $2, $3, 0, $4)",
			sub.Key, sub.Command, sub.ID, string(sub.Status))
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return fmt.Errorf("key %q is being used by another command: %w", sub.Key, clusterstore.ErrIdempotency)
		}
		return err
	})
	if errors.Is(err, clusterstore.ErrExists) && sub.Key != "" {
		// The same submission may have raced this one in: its key says.
		if use, kerr := s.SteerKey(ctx, sub.Key); kerr == nil && use != nil {
			return true, clusterstore.KeyReuse(use, &clusterstore.Steering{Job: sub.ID, Key: sub.Key, Command: sub.Command})
		}
	}
	return repeat && err == nil, err
}

func storeFiles(ctx context.Context, tx pgx.Tx, id string, files map[string][]byte) error {
	for p, b := range files {
		if _, err := tx.Exec(ctx, `INSERT INTO logist_files (job_id, path, content) VALUES ($1, $2, $3)
			ON CONFLICT (job_id, path) DO UPDATE SET content = excluded.content`, id, p, b); err != nil {
			return err
		}
	}
	return nil
}

func keyUse(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, key string) (*clusterstore.KeyUse, error) {
	var u clusterstore.KeyUse
	var status string
	err := q.QueryRow(ctx, "SELECT command, job_id, status, epoch FROM logist_idempotency WHERE key = $1", key).
		Scan(&u.Command, &u.Job, &status, &u.Epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	u.Status = lifecycle.Status(status)
	return &u, err
}

// SteerKey implements clusterstore.Store.
func (s *Store) SteerKey(ctx context.Context, key string) (*clusterstore.KeyUse, error) {
	return keyUse(ctx, s.pool, key)
}

// Files implements clusterstore.Store.
func (s *Store) Files(ctx context.Context, id string) (map[string][]byte, error) {
	rows, err := s.pool.Query(ctx, "SELECT path, content FROM logist_files WHERE job_id = $1", id)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	var p string
	var b []byte
	_, err = pgx.ForEachRow(rows, []any{&p, &b}, func() error {
		out[p] = append([]byte(nil), b...)
		return nil
	})
	return out, err
}

// Fire implements clusterstore.Store: the tick's row and its run are
// inserted in one transaction; a tick fired already (its primary key)
// inserts nothing.
func (s *Store) Fire(ctx context.Context, t clusterstore.Tick) (bool, error) {
	if err := clusterstore.CheckFiles(t.Run, t.Files); err != nil {
		return false, err
	}
	fired := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO logist_ticks (template, tick, node, run_id) VALUES ($1, $2, $3, $4)
			ON CONFLICT (template, tick) DO NOTHING`, t.Template, t.At.UTC(), t.Node, nullable(t.Run))
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		if t.Run != "" {
			_, err := tx.Exec(ctx, "INSERT INTO logist_jobs (id, status, manifest) VALUES ($1, $2, $3)", t.Run, string(lifecycle.Pending), t.Manifest)
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "23505" {
				return fmt.Errorf("run %s: %w", t.Run, clusterstore.ErrExists)
			}
			if err != nil {
				return err
			}
			if err := storeFiles(ctx, tx, t.Run, t.Files); err != nil {
				return err
			}
			if err := notify(ctx, tx, t.Run); err != nil {
				return err
			}
		}
		fired = true
		return notify(ctx, tx, t.Template)
	})
	return fired, err
}

// LastTick implements clusterstore.Store.
func (s *Store) LastTick(ctx context.Context, template string) (time.Time, error) {
	var last *time.Time
	err := s.pool.QueryRow(ctx, "SELECT max(tick) FROM logist_ticks WHERE template = $1", template).Scan(&last)
	if err != nil || last == nil {
		return time.Time{}, err
	}
	return *last, nil
}

// Job implements clusterstore.Store.
func (s *Store) Job(ctx context.Context, id string) (*clusterstore.Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, "SELECT "+jobCols+" FROM logist_jobs WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("job %s: %w", id, clusterstore.ErrNotFound)
	}
	return &j, err
}

// Jobs implements clusterstore.Store.
func (s *Store) Jobs(ctx context.Context) ([]clusterstore.Job, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+jobCols+" FROM logist_jobs ORDER BY id")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (clusterstore.Job, error) { return scanJob(r) })
}

// History implements clusterstore.Store.
func (s *Store) History(ctx context.Context, id string) ([][]byte, error) {
	if _, err := s.Job(ctx, id); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT line FROM logist_history WHERE job_id = $1 ORDER BY seq", id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[[]byte])
}

// Points implements clusterstore.Store.
func (s *Store) Points(ctx context.Context, id string) ([]clusterstore.RecoveryPoint, error) {
	rows, err := s.pool.Query(ctx, "SELECT id, seq, snapshot FROM logist_points WHERE job_id = $1 ORDER BY seq, id", id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (clusterstore.RecoveryPoint, error) {
		var p clusterstore.RecoveryPoint
		err := r.Scan(&p.ID, &p.Seq, &p.Snapshot)
		return p, err
	})
}

// Objects implements clusterstore.Store.
func (s *Store) Objects(ctx context.Context, sums []string) (map[string][]byte, error) {
	rows, err := s.pool.Query(ctx, "SELECT sha256, content FROM logist_objects WHERE sha256 = ANY($1)", sums)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	var sum string
	var b []byte
	if _, err := pgx.ForEachRow(rows, []any{&sum, &b}, func() error {
		out[sum] = b
		return nil
	}); err != nil {
		return nil, err
	}
	for _, want := range sums {
		if _, ok := out[want]; !ok {
			return nil, fmt.Errorf("object %s: %w", want, clusterstore.ErrNotFound)
		}
	}
	return out, nil
}
