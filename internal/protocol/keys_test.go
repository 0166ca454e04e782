package protocol

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestKeysCreatedOnceAndPrivate: keys are created 0600 in a 0700 folder,
// loaded again unchanged, and signatures carry the role's key id.
func TestKeysCreatedOnceAndPrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k1, err := LoadOrCreateKeys(dir, Roles)
	if err != nil {
		t.Fatal(err)
	}
	kd := filepath.Join(dir, KeysDir)
	if fi, err := os.Stat(kd); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("keys dir: %v %v", fi.Mode(), err)
	}
	for _, r := range Roles {
		fi, err := os.Stat(filepath.Join(kd, r+".key"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s key: %v %v", r, fi, err)
		}
	}
	ents, _ := os.ReadDir(kd)
	if len(ents) != len(Roles) {
		t.Errorf("%d files in the keys folder, want %d (no temporaries left)", len(ents), len(Roles))
	}
	k2, err := LoadOrCreateKeys(dir, Roles)
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := k1.Public(), k2.Public()
	for _, r := range Roles {
		if p1[r] == "" || p1[r] != p2[r] {
			t.Errorf("%s: %q then %q", r, p1[r], p2[r])
		}
		if !regexp.MustCompile(`^ed25519:[A-Za-z0-9+/]{43}=$`).MatchString(p1[r]) {
			t.Errorf("public key form %q", p1[r])
		}
	}
	id, sig, err := k1.Sign(Critic, "abc")
	if err != nil || !regexp.MustCompile(`^critic:[0-9a-f]{16}$`).MatchString(id) || sig == "" {
		t.Errorf("Sign: %q %q %v", id, sig, err)
	}
	pub, err := DecodePublicKey(p1[Critic])
	if err != nil || KeyID(Critic, pub) != id {
		t.Errorf("key id %s, from the public key %s (%v)", id, KeyID(Critic, pub), err)
	}
	if _, _, err := k1.Sign("nobody", "abc"); err == nil {
		t.Error("signed with a role that has no key")
	}
	if got := strings.Join(k1.RoleNames(), ","); got != "auditor,critic,executor,planner" {
		t.Errorf("RoleNames %s", got)
	}
}

// TestKeysConcurrentCreateAgree: processes racing to create a job's keys
// end up with the same ones.
func TestKeysConcurrentCreateAgree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var wg sync.WaitGroup
	pubs := make([]map[string]string, 8)
	for i := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := LoadOrCreateKeys(dir, Roles)
			if err != nil {
				t.Error(err)
				return
			}
			pubs[i] = k.Public()
		}()
	}
	wg.Wait()
	for i := range pubs {
		for _, r := range Roles {
			if pubs[i][r] != pubs[0][r] {
				t.Fatalf("racer %d has another %s key", i, r)
			}
		}
	}
}

func TestKeysRefuseBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := LoadOrCreateKeys(dir, []string{"../x"}); err == nil {
		t.Error("role name with a path accepted")
	}
	if err := os.MkdirAll(filepath.Join(dir, KeysDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, KeysDir, "planner.key"), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKeys(dir, Roles); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("malformed key file: %v", err)
	}
	// An empty key file is a creation a crash cut short (keys were once
	// created in place): replaced, not refused. The damaged one above is
	// kept and refused.
	if err := os.WriteFile(filepath.Join(dir, KeysDir, "planner.key"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := LoadOrCreateKeys(dir, Roles)
	if err != nil {
		t.Fatalf("empty key file: %v", err)
	}
	if again, err := LoadOrCreateKeys(dir, Roles); err != nil || again.Public()[Planner] != k.Public()[Planner] {
		t.Fatalf("the replaced key is not the stored one: %v", err)
	}
	for _, s := range []string{"", "ed25519:", "rsa:AAAA", "ed25519:AAAA"} {
		if _, err := DecodePublicKey(s); err == nil {
			t.Errorf("DecodePublicKey(%q) succeeded", s)
		}
	}
}
