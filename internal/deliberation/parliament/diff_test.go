package parliament

import (
	"errors"
	"testing"
)

func TestApplyDiff(t *testing.T) {
	src := "a\nb\nc\nd\ne\n"
	for _, c := range []struct {
		name, in, diff, want string
		err                  error
	}{
		{"replace", src, "--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n", "a\nb\nC\nd\ne\n", nil},
		{"offset", src, "@@ -1,3 +1,3 @@\n b\n-c\n+C\n d\n", "a\nb\nC\nd\ne\n", nil},
		{"two hunks", src, "@@ -1,1 +1,1 @@\n-a\n+A\n@@ -5 +5,2 @@\n e\n+f\n", "A\nb\nc\nd\ne\nf\n", nil},
		{"insert after", src, "@@ -2,0 +3 @@\n+x\n", "a\nb\nx\nc\nd\ne\n", nil},
		{"delete the end", src, "@@ -4,2 +3,0 @@\n-d\n-e\n", "a\nb\nc\n", nil},
		{"into empty", "", "@@ -0,0 +1,2 @@\n+one\n+two\n", "one\ntwo\n", nil},
		{"drop final newline", "a\nb\n", "@@ -2 +2 @@\n-b\n+b\n\\ No newline at end of file\n", "a\nb", nil},
		{"add final newline", "a\nb", "@@ -2 +2 @@\n-b\n\\ No newline at end of file\n+b\n", "a\nb\n", nil},
		{"context mismatch", src, "@@ -2,2 +2,2 @@\n x\n-c\n+C\n", "", errConflict},
		{"remove missing", src, "@@ -1 +1 @@\n-z\n+y\n", "", errConflict},
		{"no hunk", src, "just text\n", "", errMalformed},
		{"bad header", src, "@@ -x +1 @@\n a\n", "", errMalformed},
		{"count mismatch", src, "@@ -1,2 +1,2 @@\n a\n", "", errMalformed},
		{"bad line", src, "@@ -1 +1 @@\n*a\n", "", errMalformed},
		{"marker first", src, "@@ -1 +1 @@\n\\ No newline at end of file\n", "", errMalformed},
	} {
		got, err := applyDiff(c.in, c.diff)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("%s: err %v, want %v", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

func FuzzApplyDiff(f *testing.F) {
	f.Add("a\nb\n", "@@ -1 +1 @@\n-a\n+A\n")
	f.Add("", "@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n")
	f.Fuzz(func(t *testing.T, content, diff string) {
		out, err := applyDiff(content, diff)
		if err == nil && len(out) > len(content)+len(diff)+1 {
			t.Fatalf("output longer than its inputs: %q", out)
		}
	})
}
