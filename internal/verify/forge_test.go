package verify

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"

	"github.com/logist/logist/internal/history"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// encodeFor builds a stored line for body, signed by key if given.
func encodeFor(body []byte, key history.Signer) ([]byte, string) {
	h := sha(body)
	line := `{"hash":"` + h + `"`
	if key != nil {
		hb, _ := hex.DecodeString(h)
		line += `,"key":"` + key.ID() + `","sig":"` + base64.StdEncoding.EncodeToString(key.Sign(hb)) + `"`
	}
	return []byte(line + `,"rec":` + string(body) + "}\n"), h
}
