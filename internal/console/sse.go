package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/textsafe"
)

// sse is a Server-Sent Events stream. Its events and pings are written
// one at a time (mu): a history's stream pings from keepAlive while it
// sends records, and a ResponseWriter is not safe for concurrent use.
type sse struct {
	mu sync.Mutex
	w  http.ResponseWriter
	f  http.Flusher
}

func startSSE(w http.ResponseWriter) (*sse, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &sse{w: w, f: f}, true
}

// send writes one event whose data is v as JSON on one line (agent text
// escaped as the API's JSON is).
func (s *sse) send(event, id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != "" {
		if _, err := fmt.Fprintf(s.w, "id: %s\n", id); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, textsafe.EscapeJSON(b)); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

func (s *sse) ping() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := fmt.Fprint(s.w, ": ping\n\n"); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// followHistory streams a job's records after seq `after` as they are
// committed (history.Follower), event "record", id the record's seq; a
// browser reconnecting sends Last-Event-ID and goes on from there.
func (c *Console) followHistory(w http.ResponseWriter, r *http.Request, id, dir string, after int64) {
	// A reconnecting browser's Last-Event-ID is a record's seq (the ids
	// sent); one that is none leaves the query's after as it is.
	if seq, err := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64); err == nil {
		after = seq
	}
	s, ok := startSSE(w)
	if !ok {
		c.fail(w, r, http.StatusInternalServerError, "error", "streaming unsupported")
		return
	}
	f := history.NewFollower(dir)
	if after >= 0 {
		f = history.NewFollowerAfter(dir, after)
	}
	ctx, cancel := context.WithCancel(r.Context())
	pinged := make(chan struct{})
	go func() {
		defer close(pinged)
		keepAlive(ctx, s, cancel, c.keepAlive)
	}()
	// The pings end before the handler does: net/http finishes the
	// response when it returns.
	defer func() { cancel(); <-pinged }()
	reveal := c.opener().Reveal(id)
	_ = f.Follow(ctx, func(e history.Entry) error {
		if reveal != nil {
			reveal(&e.Record)
		}
		return s.send("record", fmt.Sprint(e.Seq), e.Record)
	}, history.FollowOptions{})
}

// keepAlive pings every period (15 s, Console.keepAlive), so proxies keep
// the stream open and a gone client is noticed (cancel).
func keepAlive(ctx context.Context, s *sse, cancel func(), period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s.ping() != nil {
				cancel()
				return
			}
		}
	}
}

// jobState is what the event stream compares to tell a job changed.
type jobState struct {
	Status    string `json:"status"`
	Phase     string `json:"current_phase"`
	UpdatedAt string `json:"updated_at"`
}

// apiEvents streams the jobs' transitions (SSE event "job": the job's
// listing item with its previous status), from the folder itself, so
// changes by the CLI, the daemon, the console or another node all show.
// It looks every Poll (1 s) through the manifest index, which costs a
// stat per job.
func (c *Console) apiEvents(w http.ResponseWriter, r *http.Request) {
	s, ok := startSSE(w)
	if !ok {
		c.fail(w, r, http.StatusInternalServerError, "error", "streaming unsupported")
		return
	}
	ctx := r.Context()
	seen := map[string]jobState{}
	first := true
	t := time.NewTicker(c.o.Poll)
	defer t.Stop()
	idle := 0
	for {
		ens, err := c.o.Store.ListSummaries(true)
		if err == nil {
			sent := false
			for _, en := range ens {
				if en.Err != nil {
					continue
				}
				m := en.View() // a Partial entry holds only its Summary
				now := jobState{Status: string(m.Status), Phase: m.Phase(), UpdatedAt: m.Run.UpdatedAt}
				before, known := seen[en.ID]
				seen[en.ID] = now
				if first || (known && before == now) {
					continue
				}
				it := c.item(en)
				it["previous_status"] = before.Status
				if s.send("job", "", it) != nil {
					return
				}
				sent = true
			}
			if first {
				if s.send("ready", "", map[string]any{"jobs": len(ens)}) != nil {
					return
				}
			}
			first = false
			if sent {
				idle = 0
			}
		}
		if idle++; idle%15 == 0 && s.ping() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
