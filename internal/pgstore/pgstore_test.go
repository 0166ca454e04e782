package pgstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/clusterstore/storetest"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func open(t *testing.T, url string) *Store {
	t.Helper()
	s, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) clusterstore.Store { return open(t, pgtest.DB(t)) })
}

// TestMigrateOnce: nodes starting together apply each migration once; a
// second start changes nothing.
func TestMigrateOnce(t *testing.T) {
	url := pgtest.DB(t)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(context.Background(), url)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, url)
	defer s.Close()
	var n, v int
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*), max(version) FROM logist_schema").Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != Known() || v != Known() {
		t.Fatalf("schema rows %d, version %d; want %d", n, v, Known())
	}
}

// TestRefuseNewerSchema: a database migrated by a newer Logist is refused
// before anything is written.
func TestRefuseNewerSchema(t *testing.T) {
	url := pgtest.DB(t)
	s := open(t, url)
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, "INSERT INTO logist_schema (version, name) VALUES ($1, 'future.sql')", Known()+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(ctx, url)
	if !errors.Is(err, clusterstore.ErrNewerSchema) {
		t.Fatalf("open of a newer schema: %v, want ErrNewerSchema", err)
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM logist_schema").Scan(&n); err != nil || n != Known()+1 {
		t.Fatalf("schema rows %d (%v)", n, err)
	}
}

// TestNotifyOnCommit: a change of a job is noticed on Channel with its id
// once committed; a transaction rolled back (a fenced commit) says
// nothing.
func TestNotifyOnCommit(t *testing.T) {
	s := open(t, pgtest.DB(t))
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 16)
	go func() { _ = s.Notify(ctx, func(id string) { got <- id }) }()
	next := func() string {
		select {
		case id := <-got:
			return id
		case <-time.After(30 * time.Second):
			t.Fatal("no notice within 30s")
			return ""
		}
	}
	if id := next(); id != "" {
		t.Fatalf("first notice %q, want \"\" (catch up)", id)
	}
	if err := s.Submit(ctx, "a", lifecycle.Pending, []byte(`{"job_id":"a"}`), 0); err != nil {
		t.Fatal(err)
	}
	if id := next(); id != "a" {
		t.Fatalf("notice %q after submitting a", id)
	}
	l, err := s.Claim(ctx, "n1", time.Minute)
	if err != nil || l == nil {
		t.Fatalf("claim: %v, %v", l, err)
	}
	stale := *l
	stale.Epoch--
	if err := s.Commit(ctx, &stale, clusterstore.Unit{Status: lifecycle.Canceled}); !errors.Is(err, clusterstore.ErrFenced) {
		t.Fatalf("stale commit: %v, want fenced", err)
	}
	if err := s.Commit(ctx, l, clusterstore.Unit{Release: true}); err != nil {
		t.Fatal(err)
	}
	if id := next(); id != "a" {
		t.Fatalf("notice %q after committing a", id)
	}
	if err := s.Submit(ctx, "b", lifecycle.Pending, []byte(`{"job_id":"b"}`), 0); err != nil {
		t.Fatal(err)
	}
	// Notices come in commit order: the fenced commit, rolled back,
	// would have come before b's.
	if id := next(); id != "b" {
		t.Fatalf("notice %q after submitting b; a rolled-back commit was noticed?", id)
	}
}
