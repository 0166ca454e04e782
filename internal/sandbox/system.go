package sandbox

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// systemPaths are the host's system as a contained program sees it,
// read-only: programs, libraries, configuration (less its secrets) and
// /opt, where agent CLIs are sometimes installed. Nothing else of the
// host's file system is visible (no /home, /root, /var, /srv, /run,
// /mnt, /media, no jobs folder).
var systemPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// devices a contained program may open read-write (under bwrap they are
// the sandbox's own minimal /dev).
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// sysEntry is one existing system path.
type sysEntry struct {
	Path string
	Link string // its target when the path is a symlink (/bin -> usr/bin)
}

// pathGrant is one path a contained program may reach, and whether it is
// a folder (Landlock grants folder rights only on folders).
type pathGrant struct {
	Path string `json:"p"`
	Dir  bool   `json:"d,omitempty"`
}

// hostView is what the host's system looks like to a sandbox: which
// system paths exist, which entries of /etc are secrets (readable by
// their owner only: /etc/shadow, host keys, private TLS keys), and the
// grants that cover /etc without them. The daemon computes it and
// refreshes it every viewTTL, so a call costs no walk of /etc.
type hostView struct {
	System    []sysEntry
	Secrets   []pathGrant // hidden: /dev/null over files, an empty tmpfs over folders
	EtcGrants []pathGrant // /etc less the secrets, for Landlock
	Resolv    string      // /etc/resolv.conf's target outside /etc (bound when the network is shared)
}

const viewTTL = 30 * time.Second

var view struct {
	sync.Mutex
	v    *hostView
	when time.Time
}

// currentView returns the host view, computing it at most every viewTTL.
func currentView() *hostView {
	view.Lock()
	defer view.Unlock()
	if view.v == nil || time.Since(view.when) > viewTTL {
		view.v = computeView("/etc")
		view.when = time.Now()
	}
	return view.v
}

func computeView(etc string) *hostView {
	v := &hostView{}
	for _, p := range systemPaths {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		e := sysEntry{Path: p}
		if fi.Mode()&fs.ModeSymlink != 0 {
			e.Link, _ = os.Readlink(p)
			if _, err := os.Stat(p); err != nil {
				continue // dangling
			}
		}
		v.System = append(v.System, e)
	}
	// A secret is what the world may not read: a file without o+r, a
	// folder without o+rx (its content is then not walked).
	holds := map[string]bool{} // folders with a secret beneath
	// The walk returns only what the callback returns: it skips what it
	// cannot read, so there is no error to check.
	_ = filepath.WalkDir(etc, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		secret := fi.Mode().Perm()&0o004 == 0 || (d.IsDir() && fi.Mode().Perm()&0o001 == 0)
		if !secret {
			return nil
		}
		v.Secrets = append(v.Secrets, pathGrant{Path: p, Dir: d.IsDir()})
		for q := filepath.Dir(p); within(q, etc); q = filepath.Dir(q) {
			holds[q] = true
		}
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
	secret := map[string]bool{}
	for _, s := range v.Secrets {
		secret[s.Path] = true
	}
	var grant func(dir string)
	grant = func(dir string) {
		if !holds[dir] {
			v.EtcGrants = append(v.EtcGrants, pathGrant{Path: dir, Dir: true})
			return
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			if secret[p] {
				continue
			}
			if e.IsDir() && holds[p] {
				grant(p)
				continue
			}
			fi, err := os.Stat(p) // through symlinks: what Landlock will see
			if err != nil {
				continue
			}
			v.EtcGrants = append(v.EtcGrants, pathGrant{Path: p, Dir: fi.IsDir()})
		}
	}
	if _, err := os.Stat(etc); err == nil && !secret[etc] {
		grant(etc)
	}
	sort.Slice(v.Secrets, func(i, j int) bool { return v.Secrets[i].Path < v.Secrets[j].Path })
	if t, err := filepath.EvalSymlinks(filepath.Join(etc, "resolv.conf")); err == nil && !within(t, etc) && !underSystem(t) {
		v.Resolv = t
	}
	return v
}

// underSystem reports whether p is beneath one of the system paths (a
// contained program can read it anyway).
func underSystem(p string) bool {
	for _, s := range systemPaths {
		if within(p, s) {
			return true
		}
	}
	return false
}

// grantOf describes an existing path for Landlock.
func grantOf(p string) (pathGrant, bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return pathGrant{}, false
	}
	return pathGrant{Path: p, Dir: fi.IsDir()}, true
}

// depth orders binds so that a folder is mounted before what lies in it.
func depth(p string) int { return strings.Count(p, "/") }

// System reports whether p lies in the host's system folders, which every
// sandbox shows read-only (a caller need not list them).
func System(p string) bool { return underSystem(p) }
