package cluster

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/pgstore"
	"github.com/logist/logist/internal/signing"
)

type testKey struct {
	priv ed25519.PrivateKey
	id   string
}

func (k *testKey) ID() string             { return k.id }
func (k *testKey) Sign(msg []byte) []byte { return ed25519.Sign(k.priv, msg) }

// appendRecord commits one record to job id from store w, under a lease
// it claims and releases.
func appendRecord(t *testing.T, w clusterstore.Store, id, msg string) {
	t.Helper()
	ctx := context.Background()
	l, err := w.Claim(ctx, "writer", time.Minute)
	if err != nil || l == nil || l.Job != id {
		t.Fatalf("claim %s: %+v, %v", id, l, err)
	}
	j, err := w.Job(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	rec := &history.Record{Type: history.TypeError, Error: &history.ErrorInfo{Code: "TEST", Message: msg}}
	lines, _, err := history.Seal([]*history.Record{rec}, j.NextSeq, j.LastHash, time.Now(), &testKey{priv, signing.KeyID(pub)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx, l, clusterstore.Unit{Lines: lines, Release: true}); err != nil {
		t.Fatal(err)
	}
}

// waitMirrored waits until the mirror's history of id holds msg (with
// msg "", until the mirror holds the job).
func waitMirrored(t *testing.T, dir, id, msg string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, err := os.ReadFile(history.Path(filepath.Join(dir, id)))
		if msg == "" {
			_, err = os.Stat(filepath.Join(dir, id, jobstore.ManifestFile))
		}
		if err == nil && bytes.Contains(b, []byte(msg)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower's history of %s lacks %q after %s:\n%s", id, msg, within, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFollowNotified: a follower reads a record another connection
// committed on the database's notice, not on its poll (ten minutes here),
// and after its listening connection is terminated it connects again and
// catches up.
func TestFollowNotified(t *testing.T) {
	s, url := openStore(t)
	w, err := pgstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Submit(ctx, w, scripted("followed", 10)); err != nil {
		t.Fatal(err)
	}
	// A mirror of every job (as the console's) learns of a new job and
	// of records of any job.
	allDir := t.TempDir()
	all := &Mirror{Store: s, Dir: allDir}
	allCtx, stopAll := context.WithCancel(ctx)
	allDone := make(chan error, 1)
	go func() { allDone <- all.Follow(allCtx, 10*time.Minute) }()
	waitListening(t, w, 1)
	// Submitted after "followed": Claim takes "followed" first.
	if _, err := Submit(ctx, w, scripted("second", 10)); err != nil {
		t.Fatal(err)
	}
	waitMirrored(t, allDir, "second", "", 30*time.Second)
	appendRecord(t, w, "followed", "seen-by-all")
	waitMirrored(t, allDir, "followed", "seen-by-all", 30*time.Second)
	stopAll()
	if err := <-allDone; err != nil {
		t.Fatalf("follow all: %v", err)
	}

	dir := t.TempDir()
	m := &Mirror{Store: s, Dir: dir, Jobs: []string{"followed"}}
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Follow(ctx, 10*time.Minute) }()
	waitListening(t, w, 1)
	for i := range 3 {
		msg := fmt.Sprintf("notified-%d", i)
		appendRecord(t, w, "followed", msg)
		waitMirrored(t, dir, "followed", msg, 30*time.Second)
	}

	// Cut the listening connection; what is committed while the
	// follower is away reaches it when it listens again.
	var cut int
	if err := w.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = 'logist-listen' AND datname = current_database()`).Scan(&cut); err != nil {
		t.Fatal(err)
	}
	if cut != 1 {
		t.Fatalf("terminated %d listening connections, want 1", cut)
	}
	appendRecord(t, w, "followed", "while-away")
	waitMirrored(t, dir, "followed", "while-away", 30*time.Second)
	waitListening(t, w, 1)
	appendRecord(t, w, "followed", "after-reconnect")
	waitMirrored(t, dir, "followed", "after-reconnect", 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("follow: %v", err)
	}
}

// waitListening waits until n connections of this database listen.
func waitListening(t *testing.T, s *pgstore.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got int
		if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'logist-listen' AND datname = current_database() AND query ILIKE 'LISTEN%'`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d listening connections, want %d", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
