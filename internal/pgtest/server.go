// Package pgtest starts throwaway PostgreSQL servers for the cluster tests
// and the chaos harness: a fresh data folder in a temporary folder, a
// random loopback port, trust authentication, no Unix socket, fsync off
// (the server is thrown away; what is under test is Logist's use of it),
// or on for the benchmarks (Options.Durable).
// PostgreSQL refuses to run as root, so a root process runs it as the
// unprivileged user logist-test (scripts/postgres.sh creates it) or, failing
// that, nobody. The server dies with the process that started it.
//
// Only tests and test programs import it. Every cluster test runs against a
// real server from here, never a mock of the database.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrMissing says PostgreSQL's programs are not installed.
var ErrMissing = errors.New("postgresql is not installed (initdb, postgres): run scripts/postgres.sh or apt-get install postgresql")

// Server is a running throwaway PostgreSQL.
type Server struct {
	Port int
	dir  string
	cmd  *exec.Cmd
	done chan error
}

// Bin finds the folder holding initdb and postgres: PATH first, then
// Debian's /usr/lib/postgresql/N/bin (newest first).
func Bin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "postgres")); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", ErrMissing
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// credential is who runs the server: nil (this user) unless this is root.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"logist-test", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root and neither user logist-test nor nobody exists (scripts/postgres.sh creates logist-test)")
}

// Options tune a server.
type Options struct {
	// Durable keeps PostgreSQL's fsyncs and synchronous commits (the
	// benchmarks' server: its figures must include what a real one pays);
	// tests run without them.
	Durable bool
}

// Start initialises a data folder and starts a server on a free loopback
// port. Stop it when done; it also dies with this process.
func Start(ctx context.Context) (*Server, error) { return StartWith(ctx, Options{}) }

// StartWith is Start with options.
func StartWith(ctx context.Context, o Options) (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	// Not t.TempDir: its parent is private to this user, and the server
	// may run as another.
	dir, err := os.MkdirTemp("", "logist-pg-")
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--no-locale", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	var last error
	for range 5 {
		s, err := start(ctx, bin, dir, data, cred, o)
		if err == nil {
			return s, nil
		}
		last = err
	}
	_ = os.RemoveAll(dir)
	return nil, last
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func start(ctx context.Context, bin, dir, data string, cred *syscall.Credential, o Options) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }() // the child has its own descriptor
	args := []string{"-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB"}
	if !o.Durable {
		args = append(args, "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off")
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s := &Server{Port: port, dir: dir, cmd: cmd, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			_ = c.Close(ctx)
			return s, nil
		}
		select {
		case werr := <-s.done:
			out, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return nil, fmt.Errorf("postgres exited (%v): %s", werr, strings.TrimSpace(string(out)))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = cmd.Process.Kill()
			_ = s.wait()
			return nil, fmt.Errorf("postgres did not accept connections on port %d: %v", port, err)
		}
	}
}

// wait waits for the server's process to end and returns how it ended.
func (s *Server) wait() error { return <-s.done }

// URL is the connection URL of database db.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// NewDatabase creates an empty database with a fresh name and returns its
// URL.
func (s *Server) NewDatabase(ctx context.Context, name string) (string, error) {
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close(ctx) }()
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	return s.URL(name), nil
}

// Stop shuts the server down (fast shutdown) and removes its folder.
func (s *Server) Stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-s.done:
		_ = err // stopped by the signal: its exit status says so
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		_ = s.wait()
	}
	return os.RemoveAll(s.dir)
}
