package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"testing"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/lifecycle"
)

// TestFilterStatusesAreTheJobs: the statuses a filter takes are every
// status a job is shown with (the lifecycle's, INVALID and UNREADABLE:
// jobview.LoadStatus) and NEEDS_YOU, no other.
func TestFilterStatusesAreTheJobs(t *testing.T) {
	want := []string{"NEEDS_YOU", jobview.StatusInvalid, jobview.StatusUnreadable}
	for _, st := range lifecycle.All {
		want = append(want, string(st))
	}
	got := slices.Clone(statuses)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the filter's statuses %v, the jobs' %v", got, want)
	}
}

// TestOpenAPIStatusesAreTheFilters: the document's statuses (its Status
// schema, which the listing's status parameter and a bulk action's filter
// both use) are the code's, so they cannot drift apart (UNREADABLE was
// missing).
func TestOpenAPIStatusesAreTheFilters(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
			} `json:"parameters"`
		} `json:"paths"`
		Components struct {
			Schemas struct {
				Status struct {
					Enum []string `json:"enum"`
				} `json:"Status"`
				BulkBody struct {
					Properties struct {
						Filter struct {
							Properties struct {
								Status json.RawMessage `json:"status"`
							} `json:"properties"`
						} `json:"filter"`
					} `json:"properties"`
				} `json:"BulkBody"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatal(err)
	}
	got := slices.Clone(doc.Components.Schemas.Status.Enum)
	want := slices.Clone(statuses)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("openapi.json's Status enum %v, the code's statuses %v", got, want)
	}
	compact := func(raw json.RawMessage) string {
		var v any
		_ = json.Unmarshal(raw, &v)
		b, _ := json.Marshal(v)
		return string(b)
	}
	list := compact(json.RawMessage(`{"type": "array", "items": {"$ref": "#/components/schemas/Status"}}`))
	if s := compact(doc.Components.Schemas.BulkBody.Properties.Filter.Properties.Status); s != list {
		t.Errorf("BulkBody's filter.status is %s, not a list of Status", s)
	}
	found := false
	for _, p := range doc.Paths["/api/v1/jobs"]["get"].Parameters {
		if p.Name == "status" {
			found = true
			if s := compact(p.Schema); s != list {
				t.Errorf("GET /api/v1/jobs's status parameter is %s, not a list of Status", s)
			}
		}
	}
	if !found {
		t.Error("GET /api/v1/jobs has no status parameter")
	}
}

// TestFilterTellsUnreadableFromInvalid: a job the daemon may not read is
// UNREADABLE to a filter as to the listing, not INVALID.
func TestFilterTellsUnreadableFromInvalid(t *testing.T) {
	unreadable := jobstore.Entry{ID: "locked", Err: fmt.Errorf("open job.json: %w", fs.ErrPermission)}
	invalid := jobstore.Entry{ID: "broken", Err: errors.New("job.json: not JSON")}
	for _, c := range []struct {
		status string
		en     jobstore.Entry
		want   bool
	}{
		{"UNREADABLE", unreadable, true},
		{"INVALID", unreadable, false},
		{"INVALID", invalid, true},
		{"UNREADABLE", invalid, false},
		{"PENDING", unreadable, false},
	} {
		if got := (Filter{Status: []string{c.status}}).match(c.en); got != c.want {
			t.Errorf("status %s matches %s (%s): %v, want %v", c.status, c.en.ID, jobview.LoadStatus(c.en.Err), got, c.want)
		}
	}
}
