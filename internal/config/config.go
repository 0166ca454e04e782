// Package config gives logistd (and logist's --jobs-dir default) settings
// from, in order of precedence: command-line flags, environment variables
// (LOGISTD_<FLAG>, plus LOGIST_JOBS_DIR), an optional JSON config file
// (--config, else $LOGISTD_CONFIG, else /etc/logist/logistd.json if it
// exists), and the defaults.
package config

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/pflag"
)

// DefaultFile is read when no --config and no $LOGISTD_CONFIG is given.
const DefaultFile = "/etc/logist/logistd.json"

// Source says where a setting's value came from.
type Source struct {
	Value  string `json:"value"`
	Origin string `json:"origin"`
}

// Path is the config file to read: --config's value if set, else
// $LOGISTD_CONFIG, else DefaultFile if it exists; "" for none.
func Path(flagValue string, getenv func(string) string) string {
	if flagValue != "" {
		return flagValue
	}
	if p := getenv("LOGISTD_CONFIG"); p != "" {
		return p
	}
	if _, err := os.Stat(DefaultFile); err == nil {
		return DefaultFile
	}
	return ""
}

// EnvName is the variable for a flag: LOGISTD_MAX_PARALLEL for
// max-parallel; jobs-dir is LOGIST_JOBS_DIR, shared with logist.
func EnvName(flag string) string {
	if flag == "jobs-dir" {
		return "LOGIST_JOBS_DIR"
	}
	return "LOGISTD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Apply fills every flag the command line did not set from the
// environment, then from the config file, and returns where each setting
// came from. skip names flags that are not settings (config, help, ...).
func Apply(fs *pflag.FlagSet, file string, getenv func(string) string, skip ...string) (map[string]Source, error) {
	skipped := map[string]bool{}
	for _, s := range skip {
		skipped[s] = true
	}
	fromFile := map[string]string{}
	if file != "" {
		vals, err := readFile(file, fs, skipped)
		if err != nil {
			return nil, err
		}
		fromFile = vals
	}
	sources := map[string]Source{}
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if skipped[f.Name] {
			return
		}
		origin := "default"
		switch {
		case f.Changed:
			origin = "flag --" + f.Name
		case getenv(EnvName(f.Name)) != "":
			if err := fs.Set(f.Name, getenv(EnvName(f.Name))); err != nil {
				errs = append(errs, fmt.Errorf("%s: %v", EnvName(f.Name), err))
			}
			origin = "env " + EnvName(f.Name)
		case fromFile[f.Name] != "":
			if err := fs.Set(f.Name, fromFile[f.Name]); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %v", file, keyOf(f.Name), err))
			}
			origin = "config " + file
		}
		sources[f.Name] = Source{Value: f.Value.String(), Origin: origin}
	})
	return sources, errors.Join(errs...)
}

func keyOf(flag string) string { return strings.ReplaceAll(flag, "-", "_") }

func readFile(file string, flags *pflag.FlagSet, skipped map[string]bool) (map[string]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	raw, err := decodeObject(b)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", file, err)
	}
	out := map[string]string{}
	var unknown []string
	for k, v := range raw {
		name := strings.ReplaceAll(k, "_", "-")
		if flags.Lookup(name) == nil || skipped[name] {
			unknown = append(unknown, k)
			continue
		}
		s, err := flagText(flags.Lookup(name), v)
		if err != nil {
			return nil, fmt.Errorf("config file %s: %s: %w", file, k, err)
		}
		out[name] = s
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("config file %s: unknown setting(s) %s", file, strings.Join(unknown, ", "))
	}
	return out, nil
}

// flagText is a config file's value as its flag's command-line text: a
// string as it is, a number or a boolean as written, and a list of
// strings (a list flag's: "console_disable": ["rollback", "play"]) as
// its items comma-separated, as the flag and its variable take them.
func flagText(f *pflag.Flag, v json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, nil
	}
	var list []string
	if json.Unmarshal(v, &list) != nil {
		return strings.TrimSpace(string(v)), nil // a number or a boolean
	}
	if _, ok := f.Value.(pflag.SliceValue); !ok {
		return "", fmt.Errorf("a list, but --%s takes one value", f.Name)
	}
	var b strings.Builder
	w := csv.NewWriter(&b) // pflag reads a list flag's value as CSV
	if err := w.Write(list); err != nil {
		return "", err
	}
	w.Flush()
	return strings.TrimSuffix(b.String(), "\n"), w.Error()
}

// decodeObject reads b as one JSON object: a key given twice, anything
// after the object, or invalid JSON (at its line and column) is an error.
func decodeObject(b []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	// read is the index of the last byte the decoder took (a token's).
	read := func() int64 { return dec.InputOffset() - 1 }
	invalid := func(err error) error {
		at := read()
		var se *json.SyntaxError
		if errors.As(err, &se) {
			at = se.Offset // the offending byte, or blanks before it
			for at < int64(len(b)) && strings.ContainsRune(" \t\r\n", rune(b[at])) {
				at++
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			at, err = int64(len(b)), errors.New("unexpected end of the file")
		}
		return fmt.Errorf("invalid JSON at %s: %v", lineCol(b, at), err)
	}
	if tok, err := dec.Token(); err != nil {
		return nil, invalid(err)
	} else if tok != json.Delim('{') {
		return nil, fmt.Errorf("invalid JSON at %s: want an object ({...}), not %v", lineCol(b, read()), tok)
	}
	raw := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalid(err)
		}
		key, _ := tok.(string)
		if _, dup := raw[key]; dup {
			return nil, fmt.Errorf("setting %s given twice (again at %s)", key, lineCol(b, read()-int64(len(key))-1))
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, invalid(err)
		}
		raw[key] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, invalid(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("data after the JSON object at %s: the file holds one object", lineCol(b, read()))
	}
	return raw, nil
}

// lineCol is where byte i of b is: "line 3, column 7", both from 1.
func lineCol(b []byte, i int64) string {
	before := b[:min(max(i, 0), int64(len(b)))]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}

var secretName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(secret|token|password|passwd|api[-_]?key|credential)`)
})

// Redacted returns sources with values of secret-looking settings hidden.
// Logist keeps no secrets in its configuration (agents get API keys by
// variable name), so this guards future settings.
func Redacted(src map[string]Source) map[string]Source {
	out := make(map[string]Source, len(src))
	for k, v := range src {
		if secretName().MatchString(k) && v.Value != "" {
			v.Value = "[REDACTED]"
		}
		// A URL's password (a database URL): the rest stays readable.
		if u, err := url.Parse(v.Value); err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), "REDACTED")
				v.Value = u.String()
			}
		}
		out[k] = v
	}
	return out
}

// DatabaseURL is cluster mode's database for logist: $LOGISTD_DATABASE_URL
// (logistd's own setting), else the config file's database_url, else none.
func DatabaseURL(getenv func(string) string) string {
	if u := getenv("LOGISTD_DATABASE_URL"); u != "" {
		return u
	}
	if p := Path("", getenv); p != "" {
		if b, err := os.ReadFile(p); err == nil {
			var c struct {
				DatabaseURL string `json:"database_url"`
			}
			if json.Unmarshal(b, &c) == nil {
				return c.DatabaseURL
			}
		}
	}
	return ""
}

// PricesFile is logistd's --prices file as logist can know it: $LOGISTD_PRICES
// (logistd's own setting), else the config file's prices, else none. (A
// --prices given on logistd's command line alone is not seen.)
func PricesFile(getenv func(string) string) string {
	if p := getenv(EnvName("prices")); p != "" {
		return p
	}
	if p := Path("", getenv); p != "" {
		if b, err := os.ReadFile(p); err == nil {
			var c struct {
				Prices string `json:"prices"`
			}
			if json.Unmarshal(b, &c) == nil {
				return c.Prices
			}
		}
	}
	return ""
}

// JobsDir is logist's default jobs folder: $LOGIST_JOBS_DIR, else the
// config file's jobs_dir, else ./jobs.
func JobsDir(getenv func(string) string) string {
	if d := getenv("LOGIST_JOBS_DIR"); d != "" {
		return d
	}
	if p := Path("", getenv); p != "" {
		b, err := os.ReadFile(p)
		if err == nil {
			var c struct {
				JobsDir string `json:"jobs_dir"`
			}
			if json.Unmarshal(b, &c) == nil && c.JobsDir != "" {
				return c.JobsDir
			}
		}
	}
	return "./jobs"
}
