package clusterstore

import (
	"bytes"
	"crypto/sha1" //nolint:gosec // a pack's trailer is SHA-1 by git's format, checked, not trusted
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// bundleHeaderMax bounds the header of a git bundle CheckBundle reads (its
// signature, capabilities, prerequisites and references): a job's
// repository names far fewer refs than that takes.
const bundleHeaderMax = 16 << 20

// CheckBundle is the rule of what an object one of a job's BundleFiles
// names holds: a git bundle (git's gitformat-bundle), checked by its
// structure without running git. Its signature line is "# v2 git bundle"
// or "# v3 git bundle"; a v3 bundle's capabilities follow ("@key" or
// "@key=value"; "@object-format=sha1" or "sha256" sets the object ids'
// length); then its prerequisites ("-" object id, an optional comment)
// and its references (object id, a space, a ref name), at least one; an
// empty line; then a pack: "PACK", version 2 or 3, an object count, and
// the trailing checksum (SHA-1, or SHA-256 for a sha256 bundle) of what
// precedes it. The error says what is wrong, not which object: the
// caller names it.
func CheckBundle(b []byte) error {
	sig, rest, _ := bytes.Cut(b, []byte("\n"))
	v3 := false
	switch string(sig) {
	case "# v2 git bundle":
	case "# v3 git bundle":
		v3 = true
	default:
		if len(sig) > 40 {
			sig = sig[:40]
		}
		return fmt.Errorf("signature line %q, want \"# v2 git bundle\" or \"# v3 git bundle\"", sig)
	}
	oidLen, refs := 40, 0
	for n := 2; ; n++ {
		l, after, ok := bytes.Cut(rest, []byte("\n"))
		if !ok || len(b)-len(after) > bundleHeaderMax {
			return errors.New("its header ends in no empty line")
		}
		rest = after
		if len(l) == 0 {
			break // the header's end: the pack follows
		}
		s := string(l)
		switch {
		case strings.HasPrefix(s, "@"):
			if !v3 || refs > 0 {
				return fmt.Errorf("header line %d: a capability outside a v3 bundle's capabilities", n)
			}
			switch key, value, _ := strings.Cut(s[1:], "="); {
			case key == "":
				return fmt.Errorf("header line %d: a capability without a name", n)
			case key == "object-format" && value == "sha1":
				oidLen = 40
			case key == "object-format" && value == "sha256":
				oidLen = 64
			case key == "object-format":
				return fmt.Errorf("header line %d: object format %q", n, short(value))
			}
		case strings.HasPrefix(s, "-"):
			oid, _, _ := strings.Cut(s[1:], " ")
			if !hexID(oid, oidLen) {
				return fmt.Errorf("header line %d: prerequisite %q is not an object id", n, short(oid))
			}
		default:
			oid, ref, ok := strings.Cut(s, " ")
			if !ok || !hexID(oid, oidLen) || ref == "" {
				return fmt.Errorf("header line %d: not a reference (object id, space, ref name)", n)
			}
			refs++
		}
	}
	if refs == 0 {
		return errors.New("it names no reference")
	}
	pack := rest
	sum := 20
	if oidLen == 64 {
		sum = 32
	}
	if len(pack) < 12+sum || string(pack[:4]) != "PACK" {
		return errors.New("no pack follows its header")
	}
	if v := binary.BigEndian.Uint32(pack[4:8]); v != 2 && v != 3 {
		return fmt.Errorf("pack version %d", v)
	}
	body, trailer := pack[:len(pack)-sum], pack[len(pack)-sum:]
	var got []byte
	if sum == 20 {
		h := sha1.Sum(body) //nolint:gosec // git's pack checksum
		got = h[:]
	} else {
		h := sha256.Sum256(body)
		got = h[:]
	}
	if !bytes.Equal(got, trailer) {
		return errors.New("its pack's checksum does not match (truncated or altered)")
	}
	return nil
}

// hexID says whether s is an object id of n lowercase hex digits.
func hexID(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkBundles is the rule of the bundles a change carries: each object
// one of its BundleFiles names (FileObject) that it carries must be a
// git bundle (CheckBundle). One it names but does not carry is the
// store's already, and not read again.
func checkBundles(job string, files, objects map[string][]byte) error {
	for _, name := range BundleFiles {
		sum, ok := FileObject(name, files[name])
		if !ok || objects[sum] == nil {
			continue
		}
		if err := CheckBundle(objects[sum]); err != nil {
			return fmt.Errorf("job %s: %s names object %s, which is not a git bundle: %v", job, name, sum, err)
		}
	}
	return nil
}
