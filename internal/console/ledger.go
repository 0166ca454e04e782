package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/logist/logist/internal/history"
)

// A ledger page shows a workflow's record as the document it is: the
// parliament's order paper and the negotiation's rounds (the committed
// ledger messages, round by round), the protocol's signed events. Agent
// text in them stays text: the template escapes it.

// ledgerItem is one message or event: who, what kind, its main text and
// the rest of its fields.
type ledgerItem struct {
	Seq      int64
	ID       string
	Kind     string
	From     string
	Subject  string
	Text     string
	Fields   []ledgerField
	Audience string
	Signed   string
}

type ledgerField struct {
	Key   string
	Value string
	Long  bool // shown folded (a diff, a file, a tool's output)
}

type ledgerRound struct {
	Round int
	Items []ledgerItem
}

// mainTextKeys are the content fields that say what a message says, in
// the order tried.
var mainTextKeys = []string{"text", "ruling", "speech", "answer", "question", "summary", "reasoning", "objective", "reason", "description", "rationale"}

func ledgerFields(content map[string]any, skip string) []ledgerField {
	keys := make([]string, 0, len(content))
	for k := range content {
		if k != skip {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]ledgerField, 0, len(keys))
	for _, k := range keys {
		v := content[k]
		s, isString := v.(string)
		if !isString {
			b, _ := json.MarshalIndent(v, "", "  ")
			s = string(b)
		}
		out = append(out, ledgerField{Key: k, Value: s, Long: len(s) > 120 || strings.Contains(s, "\n")})
	}
	return out
}

func mainText(content map[string]any) (string, string) {
	for _, k := range mainTextKeys {
		if s, ok := content[k].(string); ok && s != "" {
			return k, s
		}
	}
	return "", ""
}

// ledgerRounds are a history's deliberation messages by round.
func ledgerRounds(recs []history.Record) []ledgerRound {
	var rounds []ledgerRound
	for _, r := range recs {
		if r.Type != history.TypeMessage || len(r.Message) == 0 {
			continue
		}
		var m struct {
			ID       string         `json:"id"`
			Type     string         `json:"type"`
			Round    int            `json:"round"`
			From     string         `json:"from"`
			Content  map[string]any `json:"content"`
			Audience []string       `json:"audience"`
		}
		if json.Unmarshal(r.Message, &m) != nil {
			continue
		}
		key, text := mainText(m.Content)
		it := ledgerItem{Seq: r.Seq, ID: m.ID, Kind: m.Type, From: m.From, Text: text, Fields: ledgerFields(m.Content, key)}
		if len(m.Audience) > 0 {
			it.Audience = strings.Join(m.Audience, ", ")
		}
		if n := len(rounds); n == 0 || rounds[n-1].Round != m.Round {
			rounds = append(rounds, ledgerRound{Round: m.Round})
		}
		rounds[len(rounds)-1].Items = append(rounds[len(rounds)-1].Items, it)
	}
	return rounds
}

// protocolEvents are a history's protocol events (seed 003).
func protocolEvents(entries []history.Entry) []ledgerItem {
	var out []ledgerItem
	for _, e := range entries {
		ev := e.Event
		if ev == nil {
			continue
		}
		key, text := mainText(ev.Body)
		it := ledgerItem{Seq: e.Seq, Kind: ev.Type, From: ev.Role, Subject: ev.Subject, Text: text, Fields: ledgerFields(ev.Body, key)}
		if e.Sig != "" {
			it.Signed = e.Key
		}
		out = append(out, it)
	}
	return out
}

// ledgerTitle is what the page is called for a workflow.
func ledgerTitle(workflow string) string {
	switch workflow {
	case "parliament":
		return "Order paper"
	case "negotiation":
		return "Rounds"
	case "protocol":
		return "Protocol ledger"
	}
	return "Ledger"
}

// hasLedger says whether a workflow's job page links a ledger page.
func hasLedger(workflow string) bool {
	return slices.Contains([]string{"parliament", "negotiation", "protocol"}, workflow)
}

func (c *Console) pageLedger(w http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	m, err := c.o.Store.Load(id)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	entries, err := history.ReadEntries(c.o.Store.JobDir(id))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	recs := make([]history.Record, len(entries))
	for i, e := range entries {
		recs[i] = e.Record
	}
	c.opener().Records(id, recs)
	wf := workflowName(m)
	rounds, events := ledgerRounds(recs), protocolEvents(entries)
	c.render(w, r, "ledger", map[string]any{"ID": id, "Workflow": wf, "Title": ledgerTitle(wf), "Rounds": rounds, "Events": events,
		"Task": m.TaskDescription, "Empty": len(rounds) == 0 && len(events) == 0, "Count": fmt.Sprint(len(events))})
}
