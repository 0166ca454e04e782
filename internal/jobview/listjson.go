package jobview

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
)

// AppendListItem appends ListItem(dir, *en) to dst as
// json.MarshalIndent(item, prefix, "  ") encodes it (keys in order, HTML
// characters escaped), without a map per job: `logist list --format json`
// of 50,000 jobs spent most of its CPU building and encoding those maps.
// view is a manifest the caller reuses from item to item (Entry.ViewInto).
// It reports false, having appended nothing, for a value it leaves to
// encoding/json as a whole (a number that is not finite, which fails the
// encoding as it always did). FuzzAppendListItem holds it to ListItem.
func AppendListItem(dst []byte, dir string, en *jobstore.Entry, view *manifest.Manifest, prefix string) ([]byte, bool) {
	start := len(dst)
	in := prefix + "  "
	key := func(k string) {
		dst = append(append(append(append(dst, '\n'), in...), k...), ": "...)
	}
	dst = append(dst, '{')
	if en.Err != nil {
		key(`"error"`)
		dst = appendJSONString(dst, InvalidNote(dir, *en))
		dst = append(dst, ',')
		key(`"job_id"`)
		dst = appendJSONString(dst, en.ID)
		dst = append(dst, ',')
		key(`"status"`)
		dst = appendJSONString(dst, LoadStatus(en.Err))
		return append(append(append(dst, '\n'), prefix...), '}'), true
	}
	m := en.ViewInto(view)
	ok := true
	number := func(f float64) {
		var good bool
		dst, good = appendJSONFloat(dst, f)
		ok = ok && good
	}
	key(`"cost_threshold"`)
	if m.CostThreshold == nil {
		dst = append(dst, "null"...)
	} else {
		number(*m.CostThreshold)
	}
	dst = append(dst, ',')
	key(`"current_phase"`)
	if m.CurrentPhase == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, *m.CurrentPhase)
	}
	dst = append(dst, ',')
	key(`"job_id"`)
	dst = appendJSONString(dst, en.ID)
	dst = append(dst, ',')
	key(`"metrics"`)
	dst = append(append(append(dst, "{\n"...), in...), `  "cumulative_cost": `...)
	number(m.Metrics.CumulativeCost)
	dst = append(append(append(dst, ",\n"...), in...), `  "cumulative_time_seconds": `...)
	number(m.Metrics.CumulativeTimeSeconds)
	if m.Metrics.AgentCalls != 0 {
		dst = append(append(append(dst, ",\n"...), in...), `  "agent_calls": `...)
		dst = strconv.AppendInt(dst, int64(m.Metrics.AgentCalls), 10)
	}
	dst = append(append(append(append(dst, '\n'), in...), '}'), ',')
	key(`"reason"`)
	dst = appendJSONString(dst, m.Run.Reason)
	dst = append(dst, ',')
	key(`"sandbox"`)
	dst = appendJSONString(dst, m.Run.Sandbox)
	dst = append(dst, ',')
	if m.Schedule != nil {
		key(`"schedule"`)
		b, err := json.MarshalIndent(m.Schedule, in, "  ")
		ok = ok && err == nil
		dst = append(append(dst, b...), ',')
	}
	key(`"status"`)
	dst = appendJSONString(dst, string(m.Status))
	dst = append(dst, ',')
	key(`"time_threshold_minutes"`)
	if m.TimeThresholdMinutes == nil {
		dst = append(dst, "null"...)
	} else {
		number(*m.TimeThresholdMinutes)
	}
	dst = append(append(append(dst, '\n'), prefix...), '}')
	if !ok {
		return dst[:start], false
	}
	return dst, true
}

// appendJSONString appends s as encoding/json encodes a string: quoted,
// HTML characters, controls, U+2028, U+2029 and invalid UTF-8 escaped
// (the rare string that has any goes through encoding/json itself).
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	return append(append(append(dst, '"'), s...), '"')
}

// appendJSONFloat appends f as encoding/json encodes a float64, or
// reports false if it cannot (NaN, ±Inf).
func appendJSONFloat(dst []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, false
	}
	abs, format := math.Abs(f), byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 as e-9, as encoding/json writes it.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, true
}
