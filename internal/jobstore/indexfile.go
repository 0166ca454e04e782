package jobstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// The manifest index's file format: fixed-size records sorted by job id,
// then a table of the records' strings, then a trailer:
//
//	record × n   recordSize bytes each (layout below)
//	strings      the records' strings, each an (offset, length) into here
//	trailer      trailerSize bytes: magic, version, n, the strings'
//	             length, the checker, the jobs folder's key, the change
//	             journal's mark, the boot it was written in, the program
//	             that checked its invalid manifests, and a CRC-32C of
//	             everything before it
//
// A reader checks the trailer and the CRC once, then finds a job by a
// binary search over the records and decodes only the records it uses:
// nothing holds 50,000 summaries as a map. A writer streams the records
// out in id order and keeps only the string table in memory. Any file
// that is short, torn, or not this version is no index at all (errIndex):
// a cache, so the caller starts afresh.

const (
	recordSize  = 128
	trailerSize = 8 + 4 + 4 + 4 + 32 + 32 + 8 + 8 + 16 + 16 + 4
	indexMagic  = "LOGISTIX"
	maxStrings  = math.MaxUint32
)

// Record layout (little-endian).
const (
	rIno       = 0
	rSize      = 8
	rMtime     = 16
	rCtime     = 24
	rCost      = 32
	rTime      = 40
	rCalls     = 48
	rCostThr   = 56
	rTimeThr   = 64
	rFlags     = 72
	rStrings   = 76 // six (offset uint32, length uint32) pairs
	nRecString = 6
)

// Which string is which, in a record.
const (
	sID = iota
	sStatus
	sPhase
	sReason // or, for an invalid manifest, why
	sUpdated
	sSandbox
)

// A schedule has no slot of its own, so that a record stays 128 bytes:
// a flag says a record has one, and its JSON follows the record's sandbox
// string in the table, its length first.

const (
	fUnchecked = 1 << iota
	fInvalid
	fEncrypt
	fCostThr
	fTimeThr
	fSchedule
)

// castagnoli is made on first use: its tables cost every program that
// links the package at its start (about 1 % of a logist status, which
// reads no index).
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

var errIndex = errors.New("not a manifest index")

// indexMark is what an index says about the state it was taken from, to
// tell, without a stat per job, whether it is still current
// (docs/performance.md, "The manifest index").
type indexMark struct {
	Checker [32]byte
	// Dir is the jobs folder's key when its listing was complete and
	// stable: while the folder has the same key, its names are the
	// index's. Zero: list the folder.
	Dir statKey
	// Gen and Off: the change journal's generation and the length of it
	// the index has taken in.
	Gen, Off uint64
	// Boot is the boot the index was written in: the journal is not
	// fsync'd, so after a machine crash it is not trusted.
	Boot [16]byte
	// CheckedBy identifies the program that checked the invalid
	// manifests the index names (checkedBy); zero if not one program.
	CheckedBy [16]byte
}

// indexView is a parsed index file: its records stay encoded.
type indexView struct {
	mark indexMark
	recs []byte // n × recordSize
	strs string // the string table, one allocation that summaries share
	n    int
}

func parseIndex(b []byte) (*indexView, error) {
	if len(b) < trailerSize {
		return nil, errIndex
	}
	body, tr := b[:len(b)-trailerSize], b[len(b)-trailerSize:]
	if crc32.Checksum(b[:len(b)-4], castagnoli()) != binary.LittleEndian.Uint32(tr[trailerSize-4:]) {
		return nil, errIndex // torn by a crash, or not ours
	}
	if string(tr[:8]) != indexMagic || binary.LittleEndian.Uint32(tr[8:]) != indexVersion {
		return nil, errIndex
	}
	n, sl := uint64(binary.LittleEndian.Uint32(tr[12:])), uint64(binary.LittleEndian.Uint32(tr[16:]))
	if n*recordSize+sl != uint64(len(body)) {
		return nil, errIndex
	}
	// The table's strings share its bytes, which nothing writes to again
	// (b is the caller's, read for this parse alone): no copy of it.
	var strs string
	if sl > 0 {
		strs = unsafe.String(&body[n*recordSize], int(sl))
	}
	v := &indexView{n: int(n), recs: body[:n*recordSize], strs: strs}
	p := 20
	copy(v.mark.Checker[:], tr[p:p+32])
	p += 32
	v.mark.Dir = statKey{Ino: int64(le64(tr[p:])), Size: int64(le64(tr[p+8:])), Mtime: int64(le64(tr[p+16:])), Ctime: int64(le64(tr[p+24:]))}
	p += 32
	v.mark.Gen, v.mark.Off = le64(tr[p:]), le64(tr[p+8:])
	p += 16
	copy(v.mark.Boot[:], tr[p:p+16])
	copy(v.mark.CheckedBy[:], tr[p+16:p+32])
	// Records are not checked one by one here (50,000 of them): a string
	// out of range reads as "" and a schedule that does not decode leaves
	// its entry unusable, and an id out of order is at worst not found
	// (the job is then read from its folder). Only a file that passed the
	// CRC gets this far.
	return v, nil
}

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

func (v *indexView) rec(i int) []byte { return v.recs[i*recordSize : (i+1)*recordSize] }

func (v *indexView) str(i, k int) string {
	r := v.rec(i)
	off, l := uint64(le32(r[rStrings+8*k:])), uint64(le32(r[rStrings+8*k+4:]))
	if off+l > uint64(len(v.strs)) {
		return ""
	}
	return v.strs[off : off+l]
}

// tail reads the length-prefixed string at off (a schedule's JSON).
func (v *indexView) tail(off uint64) (string, bool) {
	if off+4 > uint64(len(v.strs)) {
		return "", false
	}
	l := uint64(le32([]byte(v.strs[off : off+4])))
	if off+4+l > uint64(len(v.strs)) {
		return "", false
	}
	return v.strs[off+4 : off+4+l], true
}

// find returns the record of job id, or -1.
func (v *indexView) find(id string) int {
	if v == nil {
		return -1
	}
	i := sort.Search(v.n, func(i int) bool { return v.str(i, sID) >= id })
	if i < v.n && v.str(i, sID) == id {
		return i
	}
	return -1
}

// entry decodes record i. Its strings share the view's table, but for
// the few values a field repeats, which are interned: what a caller keeps
// of a summary does not hold the whole table.
func (v *indexView) entry(i int) indexEntry { return v.decode(i, intern) }

// shared is entry for a caller that holds the view anyway (a display
// renders from its records): every string shares the table, and no
// interning (a lock and a map look-up per field of 50,000 rows).
func (v *indexView) shared(i int) indexEntry {
	return v.decode(i, func(s string) string { return s })
}

func (v *indexView) decode(i int, own func(string) string) indexEntry {
	e, r := v.keyOf(i), v.rec(i)
	f := r[rFlags]
	if f&fInvalid != 0 {
		return e
	}
	e.Sum.Status = lifecycle.Status(own(v.str(i, sStatus)))
	e.Sum.Phase = own(v.str(i, sPhase))
	e.Sum.Reason = v.str(i, sReason)
	e.Sum.UpdatedAt = v.str(i, sUpdated)
	e.Sum.Sandbox = own(v.str(i, sSandbox))
	e.Sum.EncryptHistory = f&fEncrypt != 0
	e.Sum.Metrics = manifest.Metrics{CumulativeCost: f64(r[rCost:]), CumulativeTimeSeconds: f64(r[rTime:]), AgentCalls: int(int64(le64(r[rCalls:])))}
	if f&fCostThr != 0 {
		c := f64(r[rCostThr:])
		e.Sum.CostThreshold = &c
	}
	if f&fTimeThr != 0 {
		t := f64(r[rTimeThr:])
		e.Sum.TimeThresholdMinutes = &t
	}
	if f&fSchedule != 0 {
		off, l := uint64(le32(r[rStrings+8*sSandbox:])), uint64(le32(r[rStrings+8*sSandbox+4:]))
		js, ok := v.tail(off + l)
		var sch manifest.Schedule
		if ok && json.Unmarshal([]byte(js), &sch) == nil {
			e.Sum.Schedule = &sch
		} else {
			// Checked by the CRC, so not expected: an entry that does
			// not decode is not trusted.
			e.Key = statKey{}
		}
	}
	return e
}

// head decodes what entry does of record i but the summary's fields
// beyond the job id: its key, its flags and an invalid manifest's reason.
// A display decodes the rest when it renders the job (Entry.summary). A
// schedule's record is decoded in full, as only that says whether it is
// usable (entry).
func (v *indexView) head(i int) indexEntry {
	if v.rec(i)[rFlags]&(fInvalid|fSchedule) == fSchedule {
		return v.entry(i)
	}
	return v.keyOf(i)
}

// keyOf is head without the exception for schedules.
func (v *indexView) keyOf(i int) indexEntry {
	r := v.rec(i)
	f := r[rFlags]
	e := indexEntry{Key: statKey{Ino: int64(le64(r[rIno:])), Size: int64(le64(r[rSize:])), Mtime: int64(le64(r[rMtime:])), Ctime: int64(le64(r[rCtime:]))},
		Unchecked: f&fUnchecked != 0}
	e.Sum.JobID = v.str(i, sID)
	if f&fInvalid != 0 {
		e.Err = v.str(i, sReason)
	}
	return e
}

func f64(b []byte) float64 { return math.Float64frombits(le64(b)) }

// intern returns s as a short string of its own when it is one of the few
// values a field repeats (a status, a phase, a sandbox), so that what a
// caller keeps of a summary does not hold the whole table.
func intern(s string) string {
	if len(s) > 32 {
		return s
	}
	return internTable.get(s)
}

// internTable holds the short strings intern has seen, up to a bound (a
// folder of odd phase names just shares less).
var internTable = &interner{m: map[string]string{}}

type interner struct {
	mu sync.Mutex
	m  map[string]string
}

func (t *interner) get(s string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.m[s]; ok {
		return v
	}
	v := strings.Clone(s)
	if len(t.m) < 256 {
		t.m[v] = v
	}
	return v
}

// indexWriter streams an index out: records in id order to w, strings
// kept until Close.
type indexWriter struct {
	w    *bufio.Writer
	crc  hash.Hash32
	strs bytes.Buffer
	n    int
	last string
	// short remembers where a string that may repeat already is.
	short map[string]uint32
	err   error
}

func newIndexWriter(w io.Writer) *indexWriter {
	c := crc32.New(castagnoli())
	return &indexWriter{w: bufio.NewWriterSize(io.MultiWriter(w, c), 64<<10), crc: c, short: map[string]uint32{}}
}

// maxShared bounds how many distinct strings a writer remembers to share.
const maxShared = 4096

func (x *indexWriter) addString(r []byte, k int, s string, share bool) {
	off, ok := uint32(0), false
	if share {
		off, ok = x.short[s]
	}
	if !ok {
		if x.strs.Len()+len(s) > maxStrings {
			x.err = errIndex
			return
		}
		off = uint32(x.strs.Len())
		x.strs.WriteString(s)
		if share && len(x.short) < maxShared {
			x.short[s] = off
		}
	}
	binary.LittleEndian.PutUint32(r[rStrings+8*k:], off)
	binary.LittleEndian.PutUint32(r[rStrings+8*k+4:], uint32(len(s)))
}

// add writes e's record. Ids must come in ascending order.
func (x *indexWriter) add(e *indexEntry) {
	if x.err != nil {
		return
	}
	id := e.Sum.JobID
	if x.n > 0 && id <= x.last {
		x.err = errors.New("manifest index: ids out of order")
		return
	}
	var r [recordSize]byte
	le := binary.LittleEndian
	le.PutUint64(r[rIno:], uint64(e.Key.Ino))
	le.PutUint64(r[rSize:], uint64(e.Key.Size))
	le.PutUint64(r[rMtime:], uint64(e.Key.Mtime))
	le.PutUint64(r[rCtime:], uint64(e.Key.Ctime))
	var f byte
	if e.Unchecked {
		f |= fUnchecked
	}
	x.addString(r[:], sID, id, false)
	if e.Err != "" {
		f |= fInvalid
		x.addString(r[:], sReason, e.Err, false)
	} else {
		s := &e.Sum
		le.PutUint64(r[rCost:], math.Float64bits(s.Metrics.CumulativeCost))
		le.PutUint64(r[rTime:], math.Float64bits(s.Metrics.CumulativeTimeSeconds))
		le.PutUint64(r[rCalls:], uint64(int64(s.Metrics.AgentCalls)))
		if s.CostThreshold != nil {
			f |= fCostThr
			le.PutUint64(r[rCostThr:], math.Float64bits(*s.CostThreshold))
		}
		if s.TimeThresholdMinutes != nil {
			f |= fTimeThr
			le.PutUint64(r[rTimeThr:], math.Float64bits(*s.TimeThresholdMinutes))
		}
		if s.EncryptHistory {
			f |= fEncrypt
		}
		x.addString(r[:], sStatus, string(s.Status), true)
		x.addString(r[:], sPhase, s.Phase, true)
		// Reasons repeat (the runs of one schedule, jobs made from one
		// template): shared, up to maxShared of them.
		x.addString(r[:], sReason, s.Reason, true)
		x.addString(r[:], sUpdated, s.UpdatedAt, false)
		if s.Schedule != nil {
			// The schedule's JSON follows the sandbox string, length first.
			f |= fSchedule
			js, err := json.Marshal(s.Schedule)
			if err != nil {
				x.err = err
				return
			}
			x.addString(r[:], sSandbox, s.Sandbox, false)
			var l [4]byte
			le.PutUint32(l[:], uint32(len(js)))
			x.strs.Write(l[:])
			x.strs.Write(js)
		} else {
			x.addString(r[:], sSandbox, s.Sandbox, true)
		}
	}
	r[rFlags] = f
	if x.err != nil {
		return
	}
	_, x.err = x.w.Write(r[:])
	x.n, x.last = x.n+1, id
}

// close writes the strings and the trailer.
func (x *indexWriter) close(m indexMark) error {
	if x.err != nil {
		return x.err
	}
	if uint64(x.n)*recordSize+uint64(x.strs.Len()) > math.MaxInt32 {
		return errIndex
	}
	if _, err := x.w.Write(x.strs.Bytes()); err != nil {
		return err
	}
	tr := make([]byte, 0, trailerSize)
	le := binary.LittleEndian
	tr = append(tr, indexMagic...)
	tr = le.AppendUint32(tr, indexVersion)
	tr = le.AppendUint32(tr, uint32(x.n))
	tr = le.AppendUint32(tr, uint32(x.strs.Len()))
	tr = append(tr, m.Checker[:]...)
	for _, v := range []int64{m.Dir.Ino, m.Dir.Size, m.Dir.Mtime, m.Dir.Ctime} {
		tr = le.AppendUint64(tr, uint64(v))
	}
	tr = le.AppendUint64(tr, m.Gen)
	tr = le.AppendUint64(tr, m.Off)
	tr = append(tr, m.Boot[:]...)
	tr = append(tr, m.CheckedBy[:]...)
	if _, err := x.w.Write(tr); err != nil {
		return err
	}
	if err := x.w.Flush(); err != nil {
		return err
	}
	var sum [4]byte
	le.PutUint32(sum[:], x.crc.Sum32())
	_, err := x.w.Write(sum[:])
	if err == nil {
		err = x.w.Flush()
	}
	return err
}
