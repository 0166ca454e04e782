package secrets

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const dot = ".logist"

// sealWith seals a probe with c; opening it with another cipher tells
// whether the two hold the same key.
func sameKey(t *testing.T, a, b *Cipher) bool {
	t.Helper()
	pt, err := b.Open(a.Seal("probe", "job"), "job")
	return err == nil && pt == "probe"
}

// The content key is created 0600 in a 0700 folder, once: loading again
// gives the same key, and what one sealed the other opens.
func TestContentKeyCreatedOncePrivate(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	c1, err := LoadOrCreateCipher(KeyPath(jobs, dot, nil))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(jobs, dot)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("folder: %v, %v", fi.Mode(), err)
	}
	kf := filepath.Join(jobs, dot, KeyFile)
	if fi, err := os.Stat(kf); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi.Mode(), err)
	}
	c2, err := LoadOrCreateCipher(KeyPath(jobs, dot, nil))
	if err != nil {
		t.Fatal(err)
	}
	c3, err := LoadCipher(kf)
	if err != nil {
		t.Fatal(err)
	}
	if !sameKey(t, c1, c2) || !sameKey(t, c1, c3) {
		t.Fatal("a second load has another key")
	}
	if ents, _ := os.ReadDir(filepath.Join(jobs, dot)); len(ents) != 1 {
		t.Errorf("%d files in the folder, want only the key (no temporaries)", len(ents))
	}
}

// Goroutines racing to create the key (the daemon's jobs, a steward
// command) all use the one the file holds.
func TestContentKeyRacersAgree(t *testing.T) {
	t.Parallel()
	for round := range 30 {
		jobs := t.TempDir()
		const n = 8
		cs := make([]*Cipher, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				cs[i], errs[i] = LoadOrCreateCipher(KeyPath(jobs, dot, nil))
			}()
		}
		close(start)
		wg.Wait()
		stored, err := LoadCipher(filepath.Join(jobs, dot, KeyFile))
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d: racer %d: %v", round, i, errs[i])
			}
			if !sameKey(t, cs[i], stored) {
				t.Fatalf("round %d: racer %d uses another key than the file's", round, i)
			}
		}
	}
}

// TestHelperContentKeyProcess is one racer of TestContentKeyProcessesAgree.
func TestHelperContentKeyProcess(t *testing.T) {
	jobs := os.Getenv("SECRETS_RACE_JOBS")
	if jobs == "" {
		t.Skip("a helper process of TestContentKeyProcessesAgree")
	}
	for {
		if _, err := os.Stat(filepath.Join(jobs, "go")); err == nil {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	c, err := LoadOrCreateCipher(KeyPath(jobs, dot, nil))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Printf("SEALED=%s\n", c.Seal("probe", "job"))
}

// Two processes creating the key at once end with one key that both use:
// what each sealed opens with the stored key.
func TestContentKeyProcessesAgree(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	jobs := t.TempDir()
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range 2 {
		c := exec.Command(os.Args[0], "-test.run=^TestHelperContentKeyProcess$", "-test.count=1")
		c.Env = append(os.Environ(), "SECRETS_RACE_JOBS="+jobs)
		out := &bytes.Buffer{}
		c.Stdout, c.Stderr = out, out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, c), append(outs, out)
	}
	if err := os.WriteFile(filepath.Join(jobs, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var sealed []string
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("racer %d: %v\n%s", i, err, outs[i])
		}
		_, s, ok := strings.Cut(outs[i].String(), "SEALED=")
		if !ok {
			t.Fatalf("racer %d said %q", i, outs[i])
		}
		s, _, _ = strings.Cut(s, "\n")
		sealed = append(sealed, s)
	}
	stored, err := LoadCipher(filepath.Join(jobs, dot, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range sealed {
		if pt, err := stored.Open(s, "job"); err != nil || pt != "probe" {
			t.Fatalf("racer %d sealed with another key than the stored one: %v", i, err)
		}
	}
}

// What a crash while creating the key can leave. The key used to be
// created in place: a crash before its write left an empty file, which no
// start could load. Now an empty file is a creation cut short and is
// replaced; a temporary file is ignored; a damaged key is refused, never
// replaced (what it encrypted would be lost).
func TestContentKeyAfterCrash(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T, name string, body []byte) string {
		jobs := t.TempDir()
		if err := os.MkdirAll(filepath.Join(jobs, dot), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(jobs, dot, name), body, 0o600); err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	t.Run("empty key file", func(t *testing.T) {
		jobs := setup(t, KeyFile, nil)
		c, err := LoadOrCreateCipher(KeyPath(jobs, dot, nil))
		if err != nil {
			t.Fatal(err)
		}
		stored, err := LoadCipher(filepath.Join(jobs, dot, KeyFile))
		if err != nil || !sameKey(t, c, stored) {
			t.Fatalf("the replaced key is not the one used: %v", err)
		}
	})
	t.Run("temporary file", func(t *testing.T) {
		jobs := setup(t, "."+KeyFile+".tmp-42", []byte("half"))
		if _, err := LoadOrCreateCipher(KeyPath(jobs, dot, nil)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("damaged key", func(t *testing.T) {
		jobs := setup(t, KeyFile, []byte("AAAA\n"))
		if _, err := LoadOrCreateCipher(KeyPath(jobs, dot, nil)); err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Fatalf("err = %v, want malformed", err)
		}
		if b, _ := os.ReadFile(filepath.Join(jobs, dot, KeyFile)); string(b) != "AAAA\n" {
			t.Fatalf("the damaged key was replaced: %q", b)
		}
	})
}

// The name rule: words that say "credential", not substrings, so the
// variables every agent gets and look-alikes are not taken for keys.
func TestLooksSecret(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"OPENAI_API_KEY", "ANTHROPIC_AUTH_TOKEN", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD",
		"GH_TOKEN", "GITHUBTOKEN", "DB_PASSWD", "GOOGLE_APPLICATION_CREDENTIALS", "openai_api_key", "OPENAI_APIKEY",
		"MY_CREDS", "SSH_KEY_PASSPHRASE", "BASIC_AUTH", "CLIENT_SECRETS", "HF_TOKENS"} {
		if !LooksSecret(n) {
			t.Errorf("%s: not taken for a secret", n)
		}
	}
	for _, n := range []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER", "PWD", "TOKENIZERS_PARALLELISM",
		"KEYBOARD_LAYOUT", "MONKEY", "GIT_AUTHOR_NAME", "AUTHOR", "OPENAI_BASE_URL", "LOGIST_JOB_ID", "MY_AGENT_MODE", ""} {
		if LooksSecret(n) {
			t.Errorf("%s: taken for a secret", n)
		}
	}
}

// Redactable draws the line at MinRedactLen bytes.
func TestRedactable(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"": false, "1": false, "true": false, "1234567": false, "12345678": true, "sk-real-xyz-0123": true} {
		if got := Redactable(v); got != want {
			t.Errorf("Redactable(%q) = %v, want %v", v, got, want)
		}
	}
}

// A job's redactor replaces secret_env values and the values of secret-
// looking env_allow names alike; a guessed name's short value (a flag) and
// a name that does not look secret are kept.
func TestJobRedactor(t *testing.T) {
	t.Parallel()
	env := map[string]string{"LISTED": "listed-value", "OPENAI_API_KEY": "sk-real-xyz-0123",
		"USE_AUTH": "1", "PIN_SECRET": "short", "SHORT_LISTED": "abc", "MY_LABEL": "plain-label-value"}
	r := JobRedactor([]string{"LISTED", "SHORT_LISTED"}, []string{"OPENAI_API_KEY", "USE_AUTH", "PIN_SECRET", "MY_LABEL", "LISTED"}, nil,
		func(k string) string { return env[k] })
	got := r.Redact("listed-value sk-real-xyz-0123 1 short abc plain-label-value")
	want := "[REDACTED:LISTED] [REDACTED:OPENAI_API_KEY] 1 short [REDACTED:SHORT_LISTED] plain-label-value"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if JobRedactor(nil, []string{"PATH", "HOME"}, nil, func(k string) string { return "/usr/bin:/bin" }) != nil {
		t.Fatal("PATH and HOME made a redactor")
	}
}
