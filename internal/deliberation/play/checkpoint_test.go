package play_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
	"github.com/logist/logist/internal/verify"
)

// inForce are the messages of job id's ledger file, negotiation/ledger.json.
func (f *fx) ledgerFile(id string) []deliberation.Message {
	f.T.Helper()
	b, err := os.ReadFile(filepath.Join(f.Dir, id, "negotiation", "ledger.json"))
	if err != nil {
		f.T.Fatal(err)
	}
	var l struct {
		Messages []deliberation.Message `json:"messages"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		f.T.Fatal(err)
	}
	return l.Messages
}

// Issue 20 item 10: a game records a recovery point at each of seed 004's
// safe boundaries (the end of a private conversation, of a round, of a
// vote) and logs its transitions with §7.1's fields; a rollback to one of
// them resumes the game from there with the state it had (its messages,
// stances and results so far), the history stays verifiable, and the game
// finishes.
func TestGameCheckpointsAndRollbackMidGame(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	var buf testkit.SyncBuffer
	f.Env.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
	key := f.Sign()
	f.demoNegotiation("j", false)
	if m := f.run(context.Background(), "j"); m.Status != lifecycle.Success {
		t.Fatalf("job %s %s (%s)", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}

	// The checkpoints, in order: one after each step that ends a boundary,
	// named by the last one it ends (conversation 2 and round 2 end in one).
	recs := f.Records("j")
	var cps []string
	at := map[string]int{}
	for i, r := range recs {
		if r.Type == history.TypeRecoveryPoint {
			cps = append(cps, regexp.MustCompile(`^cp-\d{4}-`).ReplaceAllString(r.RecoveryPoint.CheckpointID, ""))
			at[r.RecoveryPoint.CheckpointID] = i
			if r.RecoveryPoint.CheckpointID != "cp-start" && (r.RecoveryPoint.Snapshot == nil || !r.RecoveryPoint.CanResumeFrom || r.RecoveryPoint.ResumePhase != "session") {
				t.Errorf("checkpoint %+v cannot be resumed from", r.RecoveryPoint)
			}
		}
	}
	want := []string{"cp-start", "r1-end", "r2-c1-end", "r2-end", "r3-allocation-result", "r3-end"}
	if !slices.Equal(cps, want) {
		t.Fatalf("checkpoints %v, want %v", cps, want)
	}

	// The game's transitions are logged as seed 004 §7.1 says.
	var events []string
	for _, l := range joblog.Lines([]byte(buf.String())) {
		if l["scope"] != "game" {
			continue
		}
		if err := joblog.Check(l); err != nil {
			t.Errorf("%v: %v", l, err)
		}
		if l["game_id"] != "j" || l["game"] != "negotiation" || l["from"] == l["to"] {
			t.Errorf("game transition line %v", l)
		}
		events = append(events, l["event"].(string))
		if l["event"] == "CONVERSATION_END" && l["to"] == "ROUND_2_CONVO_1_ENDED" && !strings.HasSuffix(l["checkpoint_id"].(string), "-r2-c1-end") {
			t.Errorf("the end of conversation 1 names checkpoint %v", l["checkpoint_id"])
		}
	}
	wantEvents := "ROUND_1_START ROUND_2_START CONVERSATION_START INTERRUPTION CONVERSATION_END CONVERSATION_START INTERRUPTION CONVERSATION_END " +
		"ROUND_3_START ISSUE_INTRO VOTE_START RESULT_ADOPTED ISSUE_INTRO VOTE_START RESULT_FAILED ROUND_4_START REVIEW"
	if got := strings.Join(events, " "); got != wantEvents {
		t.Errorf("game transitions\n %s\nwant\n %s", got, wantEvents)
	}

	// Back to the end of the vote on allocation.
	var cp string
	for id := range at {
		if strings.HasSuffix(id, "-r3-allocation-result") {
			cp = id
		}
	}
	before := f.ledgerFile("j")
	kept := 0 // the messages recorded before the point
	for i, r := range recs {
		if r.Type == history.TypeMessage && i < at[cp] {
			kept++
		}
	}
	if _, _, err := f.st.Rollback("j", cp, steward.RollbackOptions{Reason: "replay the monitoring debate"}); err != nil {
		t.Fatal(err)
	}
	if m := f.run(context.Background(), "j"); m.Status != lifecycle.Success {
		t.Fatalf("after the rollback: job %s %s (%s)", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	// The turns after the point are asked anew: the first message after
	// the rollback answers a turn asked after it (the answer recorded for
	// that same turn before the rollback is not reused).
	asked, rolledBack := 0, false
	for _, r := range f.Records("j") {
		if r.Steward != nil && r.Steward.Command == history.CommandRollback {
			rolledBack = true
		}
		if rolledBack && r.Type == history.TypeResponse {
			asked++
		}
		if rolledBack && r.Type == history.TypeMessage {
			break
		}
	}
	if asked == 0 {
		t.Error("the first turn after the rollback reused an answer recorded before it")
	}
	after := f.ledgerFile("j")
	if len(after) <= kept {
		t.Fatalf("the resumed game has %d messages, %d were kept", len(after), kept)
	}
	for i := 0; i < kept; i++ {
		a, _ := json.Marshal(before[i])
		b, _ := json.Marshal(after[i])
		if string(a) != string(b) {
			t.Fatalf("message %d changed by the rollback:\n%s\n%s", i, a, b)
		}
	}
	// The point follows the chair's announcements of its step: the result
	// on allocation, then monitoring's introduction and first call.
	if got := ledgerTypes(after[kept-3 : kept]); got != "RESULT ISSUE_INTRO SPEAKER_CALL" || after[kept-1].Content["issue"] != "monitoring" {
		t.Errorf("the game resumed after %s", got)
	}
	// Each issue is voted on once in the game in force; allocation's
	// result and the stances it had carry over.
	var results []string
	for _, m := range after {
		if m.Type == "RESULT" {
			results = append(results, m.Content["issue"].(string))
		}
	}
	if strings.Join(results, " ") != "allocation monitoring" {
		t.Errorf("results in force: %v", results)
	}
	var st struct {
		Results []struct {
			Issue   string `json:"issue"`
			Adopted bool   `json:"adopted"`
		} `json:"results"`
		Stances map[string]map[string]struct {
			Firmness float64 `json:"firmness"`
		} `json:"stances"`
		Done bool `json:"done"`
	}
	b, err := os.ReadFile(filepath.Join(f.Dir, "j", "negotiation", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if !st.Done || len(st.Results) != 2 || st.Results[0].Issue != "allocation" || !st.Results[0].Adopted {
		t.Errorf("state after the resumed game: %s", b)
	}
	// Brenn's concession toward a2 in Round 2 and its allocation speech
	// moved its firmness; the rollback kept both.
	if fm := st.Stances["brenn"]["allocation"].Firmness; fm == 0.7 {
		t.Errorf("brenn's allocation firmness %v: the stance updates before the point were lost", fm)
	}

	r, err := verify.Job("j", filepath.Join(f.Dir, "j"), verify.Options{Public: key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Errorf("history after the rollback does not verify: %+v", r.Problems)
	}

	// Back to the very start: the game starts over.
	if _, _, err := f.st.Rollback("j", "cp-start", steward.RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := f.run(context.Background(), "j"); m.Status != lifecycle.Success {
		t.Fatalf("after the rollback to cp-start: job %s %s (%s)", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	if n := strings.Count(f.ledgerTypes("j"), "ROUND_START"); n != 4 {
		t.Errorf("the game in force after a restart has %d round starts", n)
	}
}

func (f *fx) ledgerTypes(id string) string { return ledgerTypes(f.ledgerFile(id)) }

func ledgerTypes(msgs []deliberation.Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Type)
	}
	return strings.Join(out, " ")
}

// Issue 20: a message id is issued once in a job's whole history. After a
// rollback to the middle of a game, the new messages' ids follow every id
// issued before it (the undone ones included), so no id names two
// different messages; the messages in force before the point keep theirs.
func TestMessageIDsAreUniqueAcrossRollbacks(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	f.Sign()
	f.demoNegotiation("j", false)
	if m := f.run(context.Background(), "j"); m.Status != lifecycle.Success {
		t.Fatalf("job %s %s (%s)", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	var cp string
	for _, r := range f.Records("j") {
		if r.Type == history.TypeRecoveryPoint && strings.HasSuffix(r.RecoveryPoint.CheckpointID, "-r2-end") {
			cp = r.RecoveryPoint.CheckpointID
		}
	}
	kept := f.ledgerFile("j")
	for twice := range 2 {
		if _, _, err := f.st.Rollback("j", cp, steward.RollbackOptions{Reason: "again"}); err != nil {
			t.Fatal(err)
		}
		if m := f.run(context.Background(), "j"); m.Status != lifecycle.Success {
			t.Fatalf("after rollback %d: job %s %s (%s)", twice+1, m.Status, m.Run.ErrorCode, m.Run.Reason)
		}
	}
	seen := map[string]string{}
	n := 0
	for _, r := range f.Records("j") {
		if r.Type != history.TypeMessage {
			continue
		}
		n++
		var m deliberation.Message
		if err := json.Unmarshal(r.Message, &m); err != nil {
			t.Fatal(err)
		}
		if prev, dup := seen[m.ID]; dup {
			t.Errorf("id %s names two messages: %s and %s", m.ID, prev, m.Type)
		}
		seen[m.ID] = m.Type
		if want := deliberation.MessageID(n); m.ID != want {
			t.Errorf("message %d of the history has id %s, want %s", n, m.ID, want)
		}
	}
	// The messages in force before the point kept their ids.
	now := f.ledgerFile("j")
	for i, m := range now {
		if m.Type == "ISSUE_INTRO" {
			break
		}
		if m.ID != kept[i].ID || m.Type != kept[i].Type {
			t.Errorf("message %d in force: %s %s, before the rollbacks %s %s", i, m.ID, m.Type, kept[i].ID, kept[i].Type)
		}
	}
}
