package steward

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/manifest"
)

// Change is one configuration field a steward command changed, as its
// history record holds it (history.Steward.Changes, keyed by the field's
// dotted path): the value before and after; nil is absent.
type Change struct {
	Old any `json:"old"`
	New any `json:"new"`
}

// configDiff lists the configuration fields that differ between before
// and after, by dotted path down to the leaves: objects are followed, any
// other value (arrays included) is compared whole. A command records the
// change it made this way, whatever form the steward wrote it in.
func configDiff(before, after *manifest.Manifest) (map[string]Change, error) {
	a, err := configDoc(before)
	if err != nil {
		return nil, err
	}
	b, err := configDoc(after)
	if err != nil {
		return nil, err
	}
	out := map[string]Change{}
	diffValues("", a, b, out)
	return out, nil
}

// configDoc is m's configuration as generic JSON (numbers kept exact).
func configDoc(m *manifest.Manifest) (map[string]any, error) {
	return toDoc(m.Config())
}

func toDoc(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	return doc, nil
}

func diffValues(path string, a, b any, out map[string]Change) {
	ao, aObj := a.(map[string]any)
	bo, bObj := b.(map[string]any)
	if aObj && bObj {
		keys := slices.Sorted(maps.Keys(ao))
		for k := range bo {
			if _, ok := ao[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			diffValues(joinPath(path, k), ao[k], bo[k], out)
		}
		return
	}
	if aObj && b == nil {
		for k, v := range ao {
			diffValues(joinPath(path, k), v, nil, out)
		}
		return
	}
	if bObj && a == nil {
		for k, v := range bo {
			diffValues(joinPath(path, k), nil, v, out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		out[path] = Change{Old: a, New: b}
	}
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// changesRecord is changes as a steward record holds them.
func changesRecord(changes map[string]Change) map[string]any {
	out := make(map[string]any, len(changes))
	for k, c := range changes {
		out[k] = map[string]any{"old": c.Old, "new": c.New}
	}
	return out
}

// recordChange records a steward command that changed the job's
// configuration: with the changes and the hash of the configuration it
// leaves (manifest.ConfigHash), so that an audit can match every change
// of configuration in the history to the command that made it. tx.M must
// already hold the new configuration.
func (s *Steward) recordChange(tx *jobtx.Tx, cmd, guidance, reason string, changes map[string]any) error {
	sum, err := tx.M.ConfigHash()
	if err != nil {
		return err
	}
	return s.append(tx, &history.Steward{Command: cmd, Guidance: guidance, Reason: reason, Changes: changes, ConfigSHA256: sum})
}

// fieldPath splits a field path as a steward writes it: dotted
// (agents.worker.command.argv, argv.0 for an array element) or a JSON
// pointer as validation errors print it (/agents/worker/command/argv/0).
func fieldPath(p string) []string {
	if rest, ok := strings.CutPrefix(p, "/"); ok {
		segs := strings.Split(rest, "/")
		for i, s := range segs {
			segs[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
		}
		return segs
	}
	return strings.Split(p, ".")
}

// index parses an array index segment.
func index(seg string, n int) (int, bool) {
	i, err := strconv.Atoi(seg)
	return i, err == nil && i >= 0 && i < n && strconv.Itoa(i) == seg
}
