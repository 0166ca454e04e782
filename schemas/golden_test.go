package schemas

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/validate-golden.txt from the validator as it is")

// The validator (third_party/jsonschema) is patched for speed; what it
// finds must not change. Every seed document (testdata/validate-seeds.jsonl:
// the demo jobs' manifests, the benchmarks' manifests, answers) and some
// thousands of variants of it (each member removed, each value replaced by
// one of every JSON type, a member added to each object, arrays shortened
// and lengthened) are checked against their schema. What the library
// reports (every node of its error tree: keyword, schema and document
// locations, message) and what Validate makes of it are compared, by hash,
// case by case in order, with testdata/validate-golden.txt, written by the
// unpatched library
// (go test ./schemas -run TestValidationUnchanged -update).
func TestValidationUnchanged(t *testing.T) {
	seeds := readSeeds(t)
	var got, names []string
	outputs := map[string]string{}
	for i, sd := range seeds {
		for _, m := range mutations(t, sd.Doc) {
			name := fmt.Sprintf("%d %s %s", i, sd.Schema, strings.ReplaceAll(m, "\t", " = "))
			out := validationOutput(t, sd.Schema, mutate(t, sd.Doc, m))
			sum := sha256.Sum256([]byte(out))
			got = append(got, hex.EncodeToString(sum[:8]))
			names = append(names, name)
			outputs[name] = out
		}
	}
	path := "testdata/validate-golden.txt"
	if *updateGolden {
		if err := os.WriteFile(path, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(want) != len(got) {
		t.Fatalf("%d cases, the golden file has %d", len(got), len(want))
	}
	bad := 0
	for i := range want {
		if want[i] != got[i] {
			name := names[i]
			t.Errorf("case %s: the validator reports otherwise than before:\n%s", name, outputs[name])
			if bad++; bad > 5 {
				t.FailNow()
			}
		}
	}
	if len(got) < 2000 {
		t.Fatalf("only %d cases", len(got))
	}
}

type seed struct {
	Schema string          `json:"schema"`
	From   string          `json:"from"`
	Doc    json.RawMessage `json:"doc"`
}

func readSeeds(t *testing.T) []seed {
	t.Helper()
	f, err := os.Open("testdata/validate-seeds.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []seed
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s seed
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func decodeDoc(t *testing.T, b []byte) any {
	t.Helper()
	var doc any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// replacements are the values put in each member's or item's place.
var replacements = []string{`null`, `true`, `1.5`, `-1`, `""`, `{}`, `["x"]`}

// mutations lists the variants of doc: "-" (doc as it is), "del P",
// "set P V", "add P" (a member "zz_extra" in the object at P), "drop P"
// (the array at P without its first item), "dup P" (its last item twice).
func mutations(t *testing.T, raw []byte) []string {
	out := []string{"-"}
	var walk func(p string, v any)
	walk = func(p string, v any) {
		if p != "" {
			for _, r := range replacements {
				out = append(out, "set "+p+"\t"+r)
			}
		}
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			out = append(out, "add "+p)
			for _, k := range keys {
				out = append(out, "del "+p+"/"+k)
				walk(p+"/"+k, v[k])
			}
		case []any:
			if len(v) > 0 {
				out = append(out, "drop "+p, "dup "+p)
			}
			for i, e := range v {
				walk(p+"/"+strconv.Itoa(i), e)
			}
		}
	}
	walk("", decodeDoc(t, raw))
	return out
}

// mutate applies one mutation to a fresh decode of raw (no key of a seed
// holds a "/").
func mutate(t *testing.T, raw []byte, m string) any {
	doc := decodeDoc(t, raw)
	if m == "-" {
		return doc
	}
	op, rest, _ := strings.Cut(m, " ")
	p, val, _ := strings.Cut(rest, "\t")
	var parent any
	var last string
	node := doc
	if p != "" {
		toks := strings.Split(p[1:], "/")
		for _, tok := range toks {
			parent, last = node, tok
			switch n := node.(type) {
			case map[string]any:
				node = n[tok]
			case []any:
				i, _ := strconv.Atoi(tok)
				node = n[i]
			}
		}
	}
	put := func(v any) {
		switch pa := parent.(type) {
		case map[string]any:
			pa[last] = v
		case []any:
			i, _ := strconv.Atoi(last)
			pa[i] = v
		case nil:
			doc = v
		}
	}
	switch op {
	case "set":
		put(decodeDoc(t, []byte(val)))
	case "del":
		switch pa := parent.(type) {
		case map[string]any:
			delete(pa, last)
		}
	case "add":
		node.(map[string]any)["zz_extra"] = json.Number("1")
	case "drop":
		put(node.([]any)[1:])
	case "dup":
		a := node.([]any)
		put(append(a[:len(a):len(a)], a[len(a)-1]))
	}
	return doc
}

// validationOutput is what the library and Validate report for doc, in an
// order that does not depend on the iteration of maps.
func validationOutput(t *testing.T, name string, doc any) string {
	s, err := schema(name)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	if err := s.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return "error: " + err.Error()
		}
		var walk func(e *jsonschema.ValidationError, depth int)
		walk = func(e *jsonschema.ValidationError, depth int) {
			lines = append(lines, fmt.Sprintf("%d|%s|%s|%s|%s", depth, e.KeywordLocation, e.AbsoluteKeywordLocation, e.InstanceLocation, sortedNames(e.Message)))
			for _, c := range e.Causes {
				walk(c, depth+1)
			}
		}
		walk(ve, 0)
	}
	sort.Strings(lines)
	if err := Validate(name, doc); err != nil {
		var se *Error
		if !errors.As(err, &se) {
			t.Fatal(err)
		}
		vs := make([]string, len(se.Violations))
		for i, v := range se.Violations {
			vs[i] = "V " + v.Pointer + "|" + sortedNames(v.Reason)
		}
		sort.Strings(vs)
		lines = append(lines, vs...)
	}
	return strings.Join(lines, "\n")
}

// sortedNames puts the names of an "additionalProperties 'a', 'b' not
// allowed" message in order (the library lists them as a map yields them).
func sortedNames(msg string) string {
	const pre, suf = "additionalProperties ", " not allowed"
	i := strings.Index(msg, pre)
	j := strings.LastIndex(msg, suf)
	if i < 0 || j < i+len(pre) {
		return msg
	}
	names := strings.Split(msg[i+len(pre):j], ", ")
	sort.Strings(names)
	return msg[:i+len(pre)] + strings.Join(names, ", ") + msg[j:]
}
