package history

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"io"
	"strings"
)

// PackedPrefix starts a committed manifest (Commit.Manifest) stored
// compressed: raw deflate, then base64 (internal/jobtx packs it). A job's
// history holds one manifest per change, so they are kept small.
const PackedPrefix = "deflate:"

// UnpackManifest is the compact manifest a packed one holds (s as it is
// when not packed), at most limit bytes of it (a caller checks the size).
func UnpackManifest(s string, limit int64) ([]byte, error) {
	packed, ok := strings.CutPrefix(s, PackedPrefix)
	if !ok {
		return []byte(s), nil
	}
	z, err := base64.StdEncoding.DecodeString(packed)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(z)), limit))
}
