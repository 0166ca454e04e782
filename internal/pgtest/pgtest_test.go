package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// TestServerRunsUnprivileged: a fresh database answers, and the server does
// not run as root.
func TestServerRunsUnprivileged(t *testing.T) {
	url := DB(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var super bool
	var n int
	if err := c.QueryRow(ctx, "SELECT 1+1, current_setting('is_superuser')::bool").Scan(&n, &super); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("1+1 = %d", n)
	}
	if shared.cmd.SysProcAttr.Credential != nil && shared.cmd.SysProcAttr.Credential.Uid == 0 {
		t.Fatal("server runs as root")
	}
	// Two databases are independent.
	url2 := DB(t)
	if url2 == url {
		t.Fatal("same database twice")
	}
}
