package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Channel is the LISTEN/NOTIFY channel on which every transaction that
// changes a job's history, status or manifest names the job (its
// payload), with pg_notify inside the transaction: PostgreSQL delivers it
// only when the transaction commits, and never for one rolled back.
const Channel = "logist_jobs"

// notify names job id on Channel, in the transaction of tx.
func notify(ctx context.Context, tx pgx.Tx, id string) error {
	_, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", Channel, id)
	return err
}

// listenApp is the application_name of a follower's listening
// connection (pg_stat_activity shows who listens).
const listenApp = "logist-listen"

// Notify implements clusterstore.Notifier: it LISTENs on a connection of
// its own (not the pool's: a listening connection is held for as long as
// the follower runs), and when that connection fails it connects again,
// backing off up to retryMax, and says "" so the caller catches up on
// what it missed meanwhile.
func (s *Store) Notify(ctx context.Context, changed func(id string)) error {
	wait := retryMin
	for {
		err := s.listen(ctx, changed, func() { wait = retryMin })
		if ctx.Err() != nil {
			return nil
		}
		_ = err // the connection failed or was cut: connect again
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, retryMax)
	}
}

const (
	retryMin = 50 * time.Millisecond
	retryMax = 5 * time.Second
)

// listen holds one listening connection until it fails or ctx ends.
func (s *Store) listen(ctx context.Context, changed func(string), connected func()) error {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = listenApp
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{Channel}.Sanitize()); err != nil {
		return err
	}
	connected()
	changed("") // listening from now on: catch up on what came before
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		changed(n.Payload)
	}
}
