// Package snapshot keeps restorable copies of a job's workspace at its
// recovery points. Files are stored once by content (SHA-256) under
// <job>/snapshots/objects, so unchanged files cost nothing at later
// checkpoints; each checkpoint has a small listing. Files are copied, never
// hard-linked: an agent editing a file in place must not change a snapshot.
// Git metadata (.git) is neither snapshotted nor touched by a restore: a
// user's repository is theirs.
package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/regfile"
)

// Dir is the snapshot folder inside a job folder.
const Dir = "snapshots"

// MaxBytes bounds one snapshot's new content by default (a job sets its
// own with limits.max_snapshot_bytes); past it the snapshot fails rather
// than fill the disk.
const MaxBytes = 1 << 30

// Options tune a snapshot.
type Options struct {
	// MaxBytes bounds the snapshot's new content, counted by the files'
	// sizes before anything is copied; 0 means MaxBytes.
	MaxBytes int64
}

// ErrTooLarge is a snapshot refused at its cap.
var ErrTooLarge = errors.New("snapshot over its size cap")

// Entry is one workspace path in a snapshot.
type Entry struct {
	Path   string      `json:"path"`
	Mode   fs.FileMode `json:"mode"`
	SHA256 string      `json:"sha256,omitempty"`
	Size   int64       `json:"size,omitempty"`
	Link   string      `json:"link,omitempty"` // symlink target, stored as is
}

// entryJSON is Entry as a listing stores it. A path (or a symlink's target)
// that is not valid UTF-8 is no JSON string as it is: encoding/json stores
// U+FFFD for each bad byte, and a rollback brought the file back under
// another name. Such a name is stored whole in path_bytes (link_bytes),
// base64 of its bytes, next to the readable path that older readers take.
type entryJSON struct {
	Path      string      `json:"path"`
	PathBytes []byte      `json:"path_bytes,omitempty"`
	Mode      fs.FileMode `json:"mode"`
	SHA256    string      `json:"sha256,omitempty"`
	Size      int64       `json:"size,omitempty"`
	Link      string      `json:"link,omitempty"`
	LinkBytes []byte      `json:"link_bytes,omitempty"`
}

// MarshalJSON stores e with its names whole (entryJSON).
func (e Entry) MarshalJSON() ([]byte, error) {
	j := entryJSON{Path: e.Path, Mode: e.Mode, SHA256: e.SHA256, Size: e.Size, Link: e.Link}
	if !utf8.ValidString(e.Path) {
		j.PathBytes = []byte(e.Path)
	}
	if !utf8.ValidString(e.Link) {
		j.LinkBytes = []byte(e.Link)
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads an entry as MarshalJSON stored it.
func (e *Entry) UnmarshalJSON(b []byte) error {
	var j entryJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = Entry{Path: j.Path, Mode: j.Mode, SHA256: j.SHA256, Size: j.Size, Link: j.Link}
	if j.PathBytes != nil {
		e.Path = string(j.PathBytes)
	}
	if j.LinkBytes != nil {
		e.Link = string(j.LinkBytes)
	}
	return nil
}

// Listing is one checkpoint's snapshot.
type Listing struct {
	CheckpointID string  `json:"checkpoint_id"`
	Entries      []Entry `json:"entries"`
}

// Info summarises a snapshot for the recovery point record.
type Info struct {
	Listing string `json:"listing"`
	Files   int    `json:"files"`
	Bytes   int64  `json:"bytes"`
	New     int64  `json:"new_bytes"`
	// Entries are the snapshot's entries (the listing's), to compare
	// with another checkpoint's (Diff).
	Entries []Entry `json:"-"`
	// Stats are the workspace's paths as the snapshot's walk lstat'ed
	// them: what Scan would have said then (nil past MaxScanEntries), so
	// that a caller who knows nothing changed the workspace since need
	// not walk it again.
	Stats Stats `json:"-"`
}

func skip(rel string) bool {
	return rel == ".git" || strings.HasPrefix(rel, ".git"+string(filepath.Separator))
}

// walk visits every path below workspace except .git, with its path
// relative to workspace.
func walk(workspace string, fn func(p, rel string, d fs.DirEntry) error) error {
	return filepath.WalkDir(workspace, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(workspace, p)
		if rel == "." {
			return nil
		}
		if skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return fn(p, rel, d)
	})
}

func listingPath(jobDir, cp string) string { return filepath.Join(jobDir, Dir, cp+".json") }

// ListingPath is where checkpoint cp's listing lives in job folder jobDir
// (cluster mode moves listings and objects between a node's job folder and
// the cluster's store).
func ListingPath(jobDir, cp string) string { return listingPath(jobDir, cp) }

// ObjectDir is the object store of job folder jobDir: each object a file
// named by the SHA-256 of its content.
func ObjectDir(jobDir string) string { return filepath.Join(jobDir, Dir, "objects") }

// Take snapshots workspace for checkpoint cp. The objects and the listing
// are durable when it returns; the snapshots folder's own entry in jobDir,
// if Take created it, is left to the caller's next durable write in jobDir
// (the recovery point's history record, which fsyncs the folder first), so
// that the job's new entries share one folder fsync.
//
// An empty workspace gets no listing file (Info.Listing is ""): the
// recovery point's record, with its 0 files, says all there is to restore
// (RestoreRef), and two fsyncs per recovery point are saved.
func Take(workspace, jobDir, cp string) (*Info, error) {
	return TakeWith(workspace, jobDir, cp, Options{})
}

// TakeWith is Take with options. A file whose size passes the cap's
// remainder is refused before any of it is copied (unless its content is
// stored already); on any failure the objects this snapshot stored are
// removed. Runs of zero bytes are stored as holes: a sparse file stays
// sparse.
func TakeWith(workspace, jobDir, cp string, o Options) (*Info, error) {
	limit := o.MaxBytes
	if limit <= 0 {
		limit = MaxBytes
	}
	objDir := ObjectDir(jobDir)
	objMade := false
	l := Listing{CheckpointID: cp, Entries: []Entry{}}
	info := &Info{Stats: Stats{}}
	var fresh []string // objects this snapshot stored: removed if it fails
	info, err := takeInto(workspace, objDir, limit, &objMade, &l, info, &fresh)
	if err != nil {
		for _, sum := range fresh {
			_ = os.Remove(filepath.Join(objDir, sum)) // content no listing names
		}
		return nil, fmt.Errorf("snapshot %s: %w", cp, err)
	}
	return finish(jobDir, objDir, cp, objMade, l, info)
}

func takeInto(workspace, objDir string, limit int64, objMade *bool, l *Listing, info *Info, stored *[]string) (*Info, error) {
	err := walk(workspace, func(p, rel string, d fs.DirEntry) error {
		fi, err := d.Info()
		if err != nil {
			return err
		}
		e := Entry{Path: filepath.ToSlash(rel), Mode: fi.Mode()}
		if len(info.Stats) >= MaxScanEntries {
			info.Stats = nil // as Scan: too many to compare call by call
		} else if info.Stats != nil {
			info.Stats[e.Path] = statOf(fi)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			e.Link = t
		case fi.IsDir():
		case fi.Mode().IsRegular():
			if !*objMade {
				if err := atomicfile.MkdirDeferred(objDir, 0o700); err != nil {
					return err
				}
				*objMade = true
			}
			left := limit - info.New
			if fi.Size() > left {
				// Too big to copy: only content stored already passes,
				// and it is read (hashed) only if an object of its size
				// is stored.
				sum := ""
				if storedSize(objDir, fi.Size()) {
					if sum, err = fileSum(p); err != nil {
						return err
					}
				}
				if _, err := os.Stat(filepath.Join(objDir, sum)); sum == "" || err != nil {
					return fmt.Errorf("%w: %s is %d bytes, more than the %d left of the cap of %d bytes of new content (limits.max_snapshot_bytes)",
						ErrTooLarge, filepath.ToSlash(rel), fi.Size(), left, limit)
				}
				e.SHA256, e.Size = sum, fi.Size()
				info.Files++
				info.Bytes += fi.Size()
				break
			}
			sum, n, fresh, err := store(objDir, p, left)
			if err != nil {
				return err
			}
			e.SHA256, e.Size = sum, n
			info.Files++
			info.Bytes += n
			if fresh {
				*stored = append(*stored, sum)
				info.New += n
			}
		default:
			return nil // sockets, devices, fifos: not workspace content
		}
		l.Entries = append(l.Entries, e)
		return nil
	})
	return info, err
}

// finish makes the new objects durable and writes the listing.
func finish(jobDir, objDir, cp string, objMade bool, l Listing, info *Info) (*Info, error) {
	info.Entries = l.Entries
	if len(l.Entries) == 0 {
		return info, nil
	}
	// One folder fsync for all new objects, before the listing names them;
	// the listing's own folder fsync covers the objects folder's entry.
	if objMade {
		if err := atomicfile.SyncDirIfDirty(objDir); err != nil {
			return nil, err
		}
	} else if err := atomicfile.MkdirDeferred(filepath.Join(jobDir, Dir), 0o700); err != nil {
		return nil, err
	}
	info.Listing = filepath.Join(Dir, cp+".json")
	b, _ := json.MarshalIndent(l, "", " ")
	if err := atomicfile.WriteFile(listingPath(jobDir, cp), b, 0o600); err != nil {
		return nil, err
	}
	return info, nil
}

// Prune removes from the job folder jobDir's object store what no
// checkpoint's listing names: objects a crash left between their copy and
// their listing, and copies a crash cut short (".obj-*"). Every listed
// object stays (a rollback may return to any recovery point). It returns
// how many files and bytes it removed. Call it with no snapshot in
// progress (the runner: when a run of the job starts).
func Prune(jobDir string) (files int, bytes int64, err error) {
	objDir := ObjectDir(jobDir)
	objs, err := os.ReadDir(objDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, 0, nil
		}
		return 0, 0, err
	}
	listings, err := os.ReadDir(filepath.Join(jobDir, Dir))
	if err != nil {
		return 0, 0, err
	}
	named := map[string]bool{}
	for _, e := range listings {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		l, err := Load(jobDir, strings.TrimSuffix(e.Name(), ".json"))
		if err != nil {
			// A listing that cannot be read may name anything: keep all.
			return 0, 0, fmt.Errorf("prune snapshots: %w", err)
		}
		for _, en := range l.Entries {
			if en.SHA256 != "" {
				named[en.SHA256] = true
			}
		}
	}
	for _, o := range objs {
		if named[o.Name()] || o.IsDir() {
			continue
		}
		fi, err := o.Info()
		if err != nil {
			continue
		}
		if err := os.Remove(filepath.Join(objDir, o.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return files, bytes, err
		}
		files++
		bytes += fi.Size()
	}
	return files, bytes, nil
}

// storedSize reports whether the object store holds an object of size n.
func storedSize(objDir string, n int64) bool {
	ents, err := os.ReadDir(objDir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && fi.Size() == n && !strings.HasPrefix(e.Name(), ".") {
			return true
		}
	}
	return false
}

// store copies file into the object store unless its content is there.
// More than limit bytes (the file grew since it was looked at) is
// ErrTooLarge, and nothing is kept.
func store(objDir, file string, limit int64) (sum string, n int64, fresh bool, err error) {
	f, err := regfile.OpenRegular(file)
	if err != nil {
		return "", 0, false, err
	}
	defer f.Close() //nolint:errcheck // read-only
	tmp, err := os.CreateTemp(objDir, ".obj-*")
	if err != nil {
		return "", 0, false, err
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone already once renamed; else a failure's leftover
	h := sha256.New()
	n, err = copySparse(tmp, io.LimitReader(f, limit+1), h)
	if err == nil && n > limit {
		err = fmt.Errorf("%w: %s grew past the %d bytes left of the cap while it was copied", ErrTooLarge, file, limit)
	}
	if err == nil {
		err = tmp.Sync()
		atomicfile.FileSyncs.Add(1)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, false, err
	}
	sum = hex.EncodeToString(h.Sum(nil))
	dst := filepath.Join(objDir, sum)
	if _, err := os.Stat(dst); err == nil {
		return sum, n, false, nil
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", 0, false, err
	}
	atomicfile.MarkDirty(objDir) // Take fsyncs it once for all objects
	return sum, n, true, nil
}

// Load reads checkpoint cp's listing.
func Load(jobDir, cp string) (*Listing, error) {
	b, err := os.ReadFile(listingPath(jobDir, cp))
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", cp, err)
	}
	var l Listing
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("snapshot of %s is corrupt: %w", cp, err)
	}
	return &l, nil
}

// Restore makes workspace look as it did at checkpoint cp: files from the
// snapshot are written back (each atomically), paths that did not exist then
// are removed. .git is left alone. Every object is checked before anything
// changes, so a damaged snapshot fails without touching the workspace.
func Restore(workspace, jobDir, cp string) error {
	l, err := Load(jobDir, cp)
	if err != nil {
		return err
	}
	return restore(workspace, jobDir, cp, l)
}

// RestoreRef is Restore for a recovery point whose record names listing
// (history.SnapshotRef.Listing): "" is Take's empty workspace, restored by
// emptying the workspace.
func RestoreRef(workspace, jobDir, cp, listing string) error {
	c, err := Check(jobDir, cp, listing)
	if err != nil {
		return err
	}
	return c.Restore(workspace)
}

// entryPath is the listing path p of snapshot cp as a path relative to
// the workspace, or an error if it names a path outside it or one a
// snapshot never holds (.git): a listing is read back as untrusted.
func entryPath(cp, p string) (string, error) {
	clean := filepath.Clean(filepath.FromSlash(p))
	if filepath.IsAbs(clean) || clean == "." || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) || skip(clean) {
		return "", fmt.Errorf("snapshot of %s names %q, outside the workspace", cp, p)
	}
	return clean, nil
}

// Checked is a checkpoint's snapshot whose listing names only paths inside
// the workspace and whose every object was found intact (Check): what a
// restore writes back. A caller that records a restore before it makes
// it (a rollback) checks first, so that a damaged snapshot is refused
// before anything is recorded.
type Checked struct {
	jobDir, cp string
	want       map[string]Entry
}

// Check reads checkpoint cp's snapshot (listing as RestoreRef takes it)
// and checks every object against its hash; the error names the path and
// the object of the first that does not match or cannot be read.
func Check(jobDir, cp, listing string) (*Checked, error) {
	l := &Listing{CheckpointID: cp}
	if listing != "" {
		var err error
		if l, err = Load(jobDir, cp); err != nil {
			return nil, err
		}
	}
	return check(jobDir, cp, l)
}

func check(jobDir, cp string, l *Listing) (*Checked, error) {
	objDir := ObjectDir(jobDir)
	want := map[string]Entry{}
	for _, e := range l.Entries {
		clean, err := entryPath(cp, e.Path)
		if err != nil {
			return nil, err
		}
		if e.SHA256 != "" {
			obj := filepath.Join(objDir, e.SHA256)
			if err := checkObject(obj, e.SHA256); err != nil {
				return nil, objectError(cp, e, err)
			}
		}
		want[clean] = e
	}
	return &Checked{jobDir: jobDir, cp: cp, want: want}, nil
}

// objectError says that the object of entry e of snapshot cp failed its
// check (err), naming the path and the object's file in the job folder.
func objectError(cp string, e Entry, err error) error {
	return fmt.Errorf("snapshot of %s: %q, object %s: %w", cp, e.Path, filepath.Join(Dir, "objects", e.SHA256), err)
}

func restore(workspace, jobDir, cp string, l *Listing) error {
	c, err := check(jobDir, cp, l)
	if err != nil {
		return err
	}
	return c.Restore(workspace)
}

// Restore makes workspace look as c's checkpoint had it (see Restore).
func (c *Checked) Restore(workspace string) error {
	objDir, cp, want := ObjectDir(c.jobDir), c.cp, c.want
	if err := atomicfile.MkdirAll(workspace, 0o700); err != nil {
		return err
	}
	// Remove what the checkpoint did not have, deepest first.
	var extra []string
	err := walk(workspace, func(p, rel string, d fs.DirEntry) error {
		e, ok := want[rel]
		if !ok || (d.IsDir() && e.Mode&fs.ModeDir == 0) || (!d.IsDir() && e.Mode&fs.ModeDir != 0) ||
			(d.Type()&fs.ModeSymlink != 0) != (e.Link != "") {
			extra = append(extra, p)
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("restore %s: %w", cp, err)
	}
	for _, p := range extra {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("restore %s: %w", cp, err)
		}
	}
	paths := make([]string, 0, len(want))
	for p := range want {
		paths = append(paths, p)
	}
	sort.Strings(paths) // parents before children
	for _, rel := range paths {
		e := want[rel]
		dst := filepath.Join(workspace, rel)
		switch {
		case e.Mode&fs.ModeDir != 0:
			if err := os.MkdirAll(dst, e.Mode.Perm()|0o700); err != nil {
				return err
			}
		case e.Link != "":
			_ = os.Remove(dst) // whatever is there: Symlink fails if it stayed
			if err := os.Symlink(e.Link, dst); err != nil {
				return err
			}
		default:
			if cur, err := fileSum(dst); err == nil && cur == e.SHA256 {
				continue
			}
			if err := restoreFile(filepath.Join(objDir, e.SHA256), dst, e.Mode.Perm()); err != nil {
				return err
			}
		}
	}
	return atomicfile.SyncDir(workspace)
}

// restoreFile puts the object obj back at dst as atomicfile.WriteFile
// would, streamed (atomicfile.WriteFrom): an object is as large as its
// agent made the file, up to the snapshot's cap.
func restoreFile(obj, dst string, perm fs.FileMode) error {
	in, err := regfile.OpenRegular(obj)
	if err != nil {
		return err
	}
	defer in.Close() //nolint:errcheck // read-only
	if err := atomicfile.WriteFrom(dst, in, perm); err != nil {
		return fmt.Errorf("restore %s: %w", dst, err)
	}
	return nil
}

func checkObject(p, sum string) error {
	got, err := fileSum(p)
	if err != nil {
		return err
	}
	if got != sum {
		return errors.New("stored content does not match its hash")
	}
	return nil
}

// copySparse copies src to dst (a new, empty file) and into h, leaving
// holes where whole blocks of zero bytes are: a sparse file stays sparse.
func copySparse(dst *os.File, src io.Reader, h io.Writer) (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	hole := false
	for {
		k, rerr := io.ReadFull(src, buf)
		if k > 0 {
			chunk := buf[:k]
			_, _ = h.Write(chunk) // a hash never fails
			if allZero(chunk) {
				if _, err := dst.Seek(int64(k), io.SeekCurrent); err != nil {
					return n, err
				}
				hole = true
			} else {
				if _, err := dst.Write(chunk); err != nil {
					return n, err
				}
				hole = false
			}
			n += int64(k)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return n, rerr
		}
	}
	if hole {
		// A trailing hole: the size comes from a truncate, not a write.
		if err := dst.Truncate(n); err != nil {
			return n, err
		}
	}
	return n, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func fileSum(p string) (string, error) {
	f, err := regfile.OpenRegular(p)
	if err != nil {
		return "", err
	}
	defer f.Close() //nolint:errcheck // read-only
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
