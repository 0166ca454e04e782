// Package verify checks a job's history offline: the hash chain (every
// record names its predecessor's hash; genesis is 64 zeros), the Ed25519
// signatures against the jobs folder's public key, and a replay that
// re-validates every recorded answer and recomputes every transition with
// the current engine rules. It names the first bad record.
//
// What an intact result proves: no record was edited, removed, inserted or
// reordered, and none was appended by anyone without the signing key, since
// the key signed the last record. What it cannot prove: that someone holding
// the private key did not rewrite the whole chain; nor anything about a
// record cut from the end before anything else was appended (the tail of a
// chain has no successor to vouch for it; compare record counts with the
// manifest's agent_calls or an external copy to detect that).
package verify

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/protocol"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/secrets"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/workflow"
)

// Failure classes (seed 003's names where it has one).
const (
	ClassHashMismatch      = "HASH_MISMATCH"
	ClassChainBreak        = "CHAIN_BREAK"
	ClassSequenceGap       = "SEQUENCE_GAP"
	ClassSignatureInvalid  = "SIGNATURE_INVALID"
	ClassSignatureMissing  = "SIGNATURE_MISSING"
	ClassSchemaInvalid     = codes.SchemaInvalid
	ClassIllegalTransition = codes.IllegalTransition
	ClassReplayDivergence  = "REPLAY_DIVERGENCE"
	ClassUnreadable        = "UNREADABLE"
	// ClassTailMissing: the log ends before its signed head (records
	// committed and then lost: a cut or emptied history).
	ClassTailMissing = "TAIL_MISSING"
	// ClassUnrecordedChange: the job's configuration changed between two
	// committed manifests with no steward record that left it (a hand edit
	// of job.json, or a forged history).
	ClassUnrecordedChange = "UNRECORDED_CHANGE"
)

// Problem is one failed check at one record.
type Problem struct {
	Seq    int64  `json:"seq"`
	Class  string `json:"class"`
	Detail string `json:"detail"`
}

func (p Problem) String() string { return fmt.Sprintf("record %d: %s: %s", p.Seq, p.Class, p.Detail) }

// Report is the outcome of verifying one job.
type Report struct {
	JobID       string `json:"job_id"`
	Records     int    `json:"records"`
	Legacy      int    `json:"legacy_records"`
	Responses   int    `json:"responses"`
	Transitions int    `json:"transitions"`
	Encrypted   int    `json:"encrypted_not_revalidated,omitempty"`
	KeyID       string `json:"key_id,omitempty"`
	LastHash    string `json:"last_hash,omitempty"`
	// Protocol is the protocol verifier's status (pass, pass_with_warnings,
	// fail) for a job with protocol events.
	Protocol string    `json:"protocol,omitempty"`
	Problems []Problem `json:"problems"`
	// ReadErr is the first error met reading the history's files (its
	// head, index, archives, log), nil when they were read; an UNREADABLE
	// problem says it too (Unreadable).
	ReadErr error `json:"-"`
}

// Unreadable reports whether the history could not be read at all, as
// against content that fails its checks: a file this user may not read,
// one that is not a regular file (a folder, a FIFO), a failed read, or a
// log that kept rotating under the read (history.ErrBusy). A missing
// archive, a corrupt record or a corrupt head or index is not: the
// history was read, and its content fails (records lost or edited).
func (r *Report) Unreadable() bool {
	if r.ReadErr == nil {
		return false
	}
	var pe *fs.PathError
	return errors.Is(r.ReadErr, history.ErrBusy) || errors.As(r.ReadErr, &pe) && !errors.Is(pe, fs.ErrNotExist)
}

// OK reports an intact, replayable history.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// First is the first problem, by record order.
func (r *Report) First() *Problem {
	if len(r.Problems) == 0 {
		return nil
	}
	return &r.Problems[0]
}

// FirstBad names a failed report's first problem, as every reader of a
// report shows it ("first bad record 3: HASH_MISMATCH: ..."; the
// problem's own text says "record").
func (r *Report) FirstBad() string {
	return "first bad " + r.First().String()
}

// Options for a verification.
type Options struct {
	// Public is the trusted key; nil skips signature checks (and says so).
	Public ed25519.PublicKey
	// Keyring are further trusted keys: a record signed by any of them or
	// by Public verifies (a cluster's history, each node signing with its
	// own key).
	Keyring []ed25519.PublicKey
	// Manifest supplies the workflow and limits for the replay; nil replays
	// with the default workflow.
	Manifest *manifest.Manifest
	// Reveal decrypts a record's encrypted content, if the caller has the
	// key; answers still encrypted are replayed from their recorded action
	// without re-validation (counted in Report.Encrypted).
	Reveal func(*history.Record)
}

// Job verifies the history in jobDir. Problems stop nothing: every check
// runs, so the report lists the first problem of each kind in order.
func Job(jobID, jobDir string, o Options) (*Report, error) {
	// The head first: a live job's log only grows after it.
	head, herr := history.ReadHead(jobDir)
	entries, err := history.ReadEntries(jobDir)
	r := &Report{JobID: jobID, Records: len(entries), Problems: []Problem{}}
	if herr != nil {
		r.ReadErr = herr
		r.add(Problem{Seq: int64(len(entries)), Class: ClassUnreadable, Detail: herr.Error()})
	}
	checkHead(r, jobDir, head, entries, o.Public)
	checkGone(r, jobDir, head, entries, o.Manifest)
	if err != nil {
		if r.ReadErr == nil {
			r.ReadErr = err
		}
		next := int64(len(entries))
		if len(entries) > 0 {
			next = entries[len(entries)-1].Seq + 1
		}
		r.add(Problem{Seq: next, Class: ClassUnreadable, Detail: err.Error()})
	}
	trusted := map[string]ed25519.PublicKey{}
	var ids []string
	for _, k := range append([]ed25519.PublicKey{o.Public}, o.Keyring...) {
		if id := signing.KeyID(k); k != nil && trusted[id] == nil {
			trusted[id] = k
			ids = append(ids, id)
		}
	}
	r.KeyID = strings.Join(ids, ",")
	chain(r, entries, trusted)
	if o.Reveal != nil {
		for i := range entries {
			o.Reveal(&entries[i].Record)
		}
	}
	replay(r, entries, o.Manifest)
	configChanges(r, entries)
	protocolTrace(r, entries, jobDir, o.Manifest)
	sortProblems(r)
	return r, nil
}

func (r *Report) add(p Problem) { r.Problems = append(r.Problems, p) }

// configChanges checks that every change of the job's configuration
// between two committed manifests was a steward's: a steward record since
// the previous commit left exactly the new configuration
// (history.Steward.ConfigSHA256, manifest.ConfigHash). A manifest sealed
// in an encrypted history is not read (no key here): the next readable
// one is compared with the last readable one.
func configChanges(r *Report, es []history.Entry) {
	prev := ""
	recorded := map[string]bool{}
	for i := range es {
		rec := &es[i].Record
		if rec.Type == history.TypeSteward && rec.Steward != nil && rec.Steward.ConfigSHA256 != "" {
			recorded[rec.Steward.ConfigSHA256] = true
		}
		if es[i].Commit == nil {
			continue
		}
		sum, ok := committedConfig(es[i].Commit)
		if !ok {
			continue
		}
		if prev != "" && sum != prev && !recorded[sum] {
			r.add(Problem{rec.Seq, ClassUnrecordedChange, "the job's configuration changed with no steward record (config " + sum[:12] + ", was " + prev[:12] + "): job.json edited by hand, or the history forged"})
		}
		prev, recorded = sum, map[string]bool{}
	}
}

// committedConfig is the configuration hash of a committed manifest; ok is
// false when it cannot be read (sealed, damaged: other checks say so).
func committedConfig(c *history.Commit) (string, bool) {
	stored := []byte(c.Manifest)
	if len(stored) > 0 && stored[0] == '"' {
		var s string
		if json.Unmarshal(stored, &s) != nil || secrets.Sealed(s) {
			return "", false
		}
		b, err := history.UnpackManifest(s, manifest.MaxSize+1)
		if err != nil {
			return "", false
		}
		stored = b
	}
	var m manifest.Manifest
	if json.Unmarshal(stored, &m) != nil {
		return "", false
	}
	sum, err := m.ConfigHash()
	return sum, err == nil
}

// checkGone finds a history removed whole: no record, no head, and a
// manifest that a transaction saved (run.updated_at is set only by a
// commit, which writes its records first). The head catches a log cut
// or emptied; with the head gone too, only job.json tells that records
// were there.
func checkGone(r *Report, jobDir string, head *history.Head, es []history.Entry, m *manifest.Manifest) {
	if len(es) > 0 || head != nil || r.ReadErr != nil || m == nil || m.Run.UpdatedAt == "" {
		return
	}
	r.add(Problem{0, ClassTailMissing, fmt.Sprintf("no history (no %s, no head), but job.json was saved by a transaction at %s (status %s): its records were removed",
		filepath.Base(history.Path(jobDir)), m.Run.UpdatedAt, m.Status)})
}

// checkHead compares the signed head with the log's last record
// (history.CheckHead) and checks the head's signature.
func checkHead(r *Report, jobDir string, head *history.Head, es []history.Entry, pub ed25519.PublicKey) {
	if head == nil {
		return
	}
	lastSeq, lastHash := int64(-1), ""
	if len(es) > 0 {
		lastSeq, lastHash = es[len(es)-1].Seq, es[len(es)-1].Hash
	}
	if err := history.CheckHead(history.Path(jobDir), head, lastSeq, lastHash); err != nil {
		r.add(Problem{head.Seq, ClassTailMissing, err.Error()})
	}
	if pub != nil && head.Sig != "" {
		if err := history.VerifyHead(head, func(key string, msg, sig []byte) bool {
			return key == signing.KeyID(pub) && ed25519.Verify(pub, msg, sig)
		}); err != nil {
			r.add(Problem{head.Seq, ClassSignatureInvalid, "history head: " + err.Error()})
		}
	}
}

func sortProblems(r *Report) {
	ps := r.Problems
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].Seq < ps[j-1].Seq; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

// chain checks hashes, links, sequence and signatures.
func chain(r *Report, es []history.Entry, trusted map[string]ed25519.PublicKey) {
	prev := history.GenesisHash
	chained := false
	var lastSeq int64 = -1
	for i := range es {
		e := &es[i]
		if e.Seq != lastSeq+1 {
			r.add(Problem{e.Seq, ClassSequenceGap, fmt.Sprintf("follows record %d (records missing or reordered)", lastSeq)})
		}
		lastSeq = e.Seq
		if e.Legacy {
			r.Legacy++
			if chained {
				r.add(Problem{e.Seq, ClassChainBreak, "an unprotected version 1 record after chained records"})
			}
			continue
		}
		chained = true
		sum := sha256.Sum256(e.Body)
		if hex.EncodeToString(sum[:]) != e.Hash {
			r.add(Problem{e.Seq, ClassHashMismatch, "content does not match its hash (edited)"})
		}
		if e.PrevHash != prev {
			r.add(Problem{e.Seq, ClassChainBreak, "does not name its predecessor's hash (a record before it was removed, inserted or reordered)"})
		}
		prev = e.Hash
		r.LastHash = e.Hash
		if len(trusted) == 0 {
			continue
		}
		if e.Sig == "" {
			r.add(Problem{e.Seq, ClassSignatureMissing, "not signed"})
			continue
		}
		pub := trusted[e.Key]
		if pub == nil {
			r.add(Problem{e.Seq, ClassSignatureInvalid, fmt.Sprintf("signed by key %s, not the trusted key %s", e.Key, r.KeyID)})
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(e.Sig)
		hb, herr := hex.DecodeString(e.Hash)
		if err != nil || herr != nil || !ed25519.Verify(pub, hb, sig) {
			r.add(Problem{e.Seq, ClassSignatureInvalid, "signature does not verify"})
		}
	}
}

// replay re-validates recorded answers and recomputes transitions.
func replay(r *Report, es []history.Entry, m *manifest.Manifest) {
	wf, _ := workflow.Builtin(manifest.DefaultWorkflow)
	maxRetries := manifest.DefaultMaxRetries
	if m != nil {
		if w, err := m.ResolveWorkflow(); err == nil {
			wf = w
		}
		maxRetries = m.MaxRetries()
	}
	// A steward's logist set may have changed the retry limit on the way:
	// the replay starts from the limit before the first change (its old
	// value) and follows each.
	for i := len(es) - 1; i >= 0; i-- {
		if n, ok := retryLimitSet(&es[i].Record, true); ok {
			maxRetries = n
		}
	}
	var cur lifecycle.Status
	retries := 0
	// expect is what the current engine says the next transition must be,
	// set by a response and checked against the next transition record.
	var expect *expectation
	// turns: interaction -> the turn's answer schema, for the calls of a
	// turn step (deliberations), whose answers are held to it alone.
	turns := map[int]string{}
	for i := range es {
		rec := &es[i].Record
		switch rec.Type {
		case history.TypeIntent:
			if rec.Request != nil && rec.Interaction != nil {
				if k, _ := rec.Request.Metadata[history.MetaTurnKey].(string); k != "" {
					s, _ := rec.Request.Metadata[history.MetaAnswerSchema].(string)
					turns[*rec.Interaction] = s
				}
			}
		case history.TypeResponse:
			if rec.Response == nil {
				r.add(Problem{rec.Seq, ClassSchemaInvalid, "response record without a response"})
				continue
			}
			r.Responses++
			expect = nil
			resp := rec.Response
			if rec.Interaction != nil {
				if schema, ok := turns[*rec.Interaction]; ok {
					// A turn's answer: valid against its schema if recorded
					// as a success; it implies no transition of its own.
					if resp.Status == history.StatusSuccess && !secrets.Sealed(resp.RawResponse) {
						if v := response.Judge([]byte(resp.RawResponse), response.Contract{Turn: true, Schema: schema}); v.Err != nil {
							r.add(Problem{rec.Seq, ClassSchemaInvalid, "recorded as valid, but the turn's answer fails " + schema + " now: " + v.Err.Error()})
						}
					}
					continue
				}
			}
			refusal := resp.Status != history.StatusSuccess && slices.Contains(response.Codes, resp.ErrorCode)
			action := resp.Action
			if secrets.Sealed(resp.RawResponse) {
				// Replayed from the recorded action and code, which stay in
				// clear.
				r.Encrypted++
			} else {
				// Judged as the engine judged it: with its phase's schema,
				// and the workspace as the engine found it (the record says).
				v := response.Judge([]byte(resp.RawResponse), response.Contract{Schema: wf.Phases[rec.Phase].Schema, Workspace: response.Recorded(resp.Violations)})
				switch {
				case resp.Status == history.StatusSuccess && v.Err != nil:
					detail := "recorded as valid, but the answer fails validation now: " + v.Err.Error()
					if v.Err.Schema != "" {
						detail = "recorded as valid, but the answer fails " + v.Err.Schema + " now: " + v.Err.Reason
					}
					r.add(Problem{rec.Seq, ClassSchemaInvalid, detail})
					continue
				case resp.Status == history.StatusSuccess && v.Answer.Action != resp.Action:
					r.add(Problem{rec.Seq, ClassReplayDivergence, fmt.Sprintf("recorded action %s, the answer says %s", resp.Action, v.Answer.Action)})
					continue
				case refusal:
					if d := refusedAgain(resp, v); d != "" {
						r.add(Problem{rec.Seq, ClassReplayDivergence, d})
					}
				case resp.Status == history.StatusSuccess:
					action = v.Answer.Action
				}
			}
			c := workflow.Case{Phase: rec.Phase, Retries: retries, MaxRetries: maxRetries}
			switch {
			case refusal:
				c.Fault, c.Code = workflow.FaultInvalid, resp.ErrorCode
			case resp.Status != history.StatusSuccess:
				continue // agent errors: the transition table check covers them
			case resp.Outcome == workflow.OutcomeFailed:
				// The phase's effect stopped the workflow; its own verifier
				// re-checks the events behind that.
				expect = &expectation{rec.Seq, lifecycle.EvWorkflowFailed, lifecycle.InterventionRequired, ""}
				continue
			default:
				// The phase's effect may have decided an outcome other than
				// the action (protocol workflows); its own verifier re-checks
				// the events behind the decision.
				c.Action, c.Outcome, c.SentBack = action, resp.Outcome, resp.SentBack
			}
			// The engine's decision (workflow.Decide), replayed.
			d, err := workflow.Decide(wf, c)
			if err != nil {
				expect = &expectation{rec.Seq, lifecycle.Event("undecidable: " + err.Error()), "", ""}
				continue
			}
			retries = d.Retries
			expect = &expectation{rec.Seq, d.Event, d.To, d.Phase}
		case history.TypeSteward:
			if rec.Steward != nil && workflow.ResetsRetries(rec.Steward.Command) {
				retries = 0
			}
			if n, ok := retryLimitSet(rec, false); ok {
				maxRetries = n
			}
		case history.TypeTransition:
			t := rec.Transition
			if t == nil {
				r.add(Problem{rec.Seq, ClassSchemaInvalid, "transition record without a transition"})
				continue
			}
			r.Transitions++
			from, to, ev := lifecycle.Status(t.From), lifecycle.Status(t.To), lifecycle.Event(t.Event)
			if err := lifecycle.Check(from, ev, to); err != nil {
				r.add(Problem{rec.Seq, ClassIllegalTransition, err.Error()})
			}
			if cur != "" && from != cur {
				r.add(Problem{rec.Seq, ClassReplayDivergence, fmt.Sprintf("leaves %s, but the job was %s", from, cur)})
			}
			cur = to
			if expect != nil {
				if ev != expect.event || to != expect.to || (expect.phase != "" && t.ToPhase != expect.phase) {
					r.add(Problem{rec.Seq, ClassReplayDivergence, fmt.Sprintf("recorded %s -> %s (phase %s) after record %d; the current engine gives %s -> %s (phase %s)",
						t.Event, t.To, t.ToPhase, expect.seq, expect.event, expect.to, orDash(expect.phase))})
				}
				expect = nil
			}
		}
	}
}

// retryLimitSet is the retry limit (limits.max_retries) a steward record
// changed, before the change (old) or after it.
func retryLimitSet(rec *history.Record, old bool) (int, bool) {
	if rec.Type != history.TypeSteward || rec.Steward == nil {
		return 0, false
	}
	o, n, ok := rec.Steward.Change("limits.max_retries")
	if !ok {
		return 0, false
	}
	v := n
	if old {
		v = o
	}
	switch x := v.(type) {
	case nil:
		return manifest.DefaultMaxRetries, true
	case float64:
		return int(x), true
	case json.Number:
		i, err := x.Int64()
		return int(i), err == nil
	}
	return 0, false
}

type expectation struct {
	seq   int64
	event lifecycle.Event
	to    lifecycle.Status
	phase string
}

// refusedAgain checks a recorded refusal against today's verdict v: the
// answer must still be refused, for the same code. It returns what
// diverges ("" = nothing). Records written before responses listed their
// violations (resp.Violations nil) are judged with what they can tell: a
// PROTOCOL_VIOLATION the workspace decided then (a symlink out) is not
// recorded as such and is taken as recorded, and their code was the first
// layer that failed, where an evidence path out of the workspace now comes
// first, so their code need only be among today's violations.
func refusedAgain(resp *history.Response, v response.Verdict) string {
	legacy := resp.Violations == nil
	switch {
	case v.Err == nil && legacy && resp.ErrorCode == codes.ProtocolViolation:
		return ""
	case v.Err == nil:
		return fmt.Sprintf("recorded as %s, but the answer is valid now", resp.ErrorCode)
	case v.Err.Code == resp.ErrorCode:
		return ""
	case legacy && slices.ContainsFunc(v.Violations, func(e *response.Error) bool { return e.Code == resp.ErrorCode }):
		return ""
	}
	return fmt.Sprintf("recorded as %s, validation now says %s", resp.ErrorCode, v.Err.Code)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// protocolTrace runs the protocol verifier (seed 003's mandatory checks)
// over a job whose history holds protocol events, and reports its failures
// in the seed's classes.
func protocolTrace(r *Report, es []history.Entry, jobDir string, m *manifest.Manifest) {
	recs := make([]history.Record, 0, len(es))
	events := false
	for i := range es {
		recs = append(recs, es[i].Record)
		events = events || es[i].Type == history.TypeEvent
	}
	if !events {
		return
	}
	var raw []byte
	complete := false
	if m != nil {
		raw = m.Protocol
		complete = m.Status == lifecycle.Success
	}
	pol, err := protocol.DecodePolicy(raw)
	if err != nil {
		r.add(Problem{0, ClassSchemaInvalid, err.Error()})
		return
	}
	rep := protocol.Verify(recs, protocol.NewStore(jobDir), pol, protocol.VerifyOptions{Complete: complete})
	r.Protocol = rep.Status
	for _, f := range rep.Failures() {
		r.add(Problem{f.Seq, strings.ToUpper(f.Class), "protocol " + f.EventType + " " + f.Subject + ": " + f.Detail})
	}
}
