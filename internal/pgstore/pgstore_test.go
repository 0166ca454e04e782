package pgstore

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/clusterstore/storetest"
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
