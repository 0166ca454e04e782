package console

import (
	"fmt"
	"maps"
	"net/http"
	"sync"

	"github.com/logist/logist/internal/clusterstore"
)

// A steward action's idempotency key: the caller's Idempotency-Key
// header (the API's callers), or the idempotency_key field of a page's
// form (the console's own pages put a new one in each form they show, so
// a double submit or a browser's retry of one action sends one key). The
// same command with the same key is done once: its repeat answers 200
// with the job and "repeat": true, changing nothing; another command
// with the key is 409 (clusterstore.ErrIdempotency). In cluster mode the
// key goes with the command into the database (cluster.Steer: the
// records, the status change and the key are one transaction); in file
// mode the console remembers its last keys in memory (keyBook), which a
// restart of the daemon forgets.

// keyHeader is the request header of a caller's key; keyField the form
// field of a page's.
const (
	keyHeader = "Idempotency-Key"
	keyField  = "idempotency_key"
	// maxKeyLen bounds a key's length.
	maxKeyLen = 200
)

// requestKey is the request's idempotency key ("" for none). A form's
// field is read from the form readForm parsed.
func requestKey(r *http.Request) (string, error) {
	k := r.Header.Get(keyHeader)
	if k == "" && r.PostForm != nil {
		k = r.PostForm.Get(keyField)
	}
	if len(k) > maxKeyLen {
		return "", usagef("%s: at most %d characters", keyHeader, maxKeyLen)
	}
	for _, c := range k {
		if c < 0x21 || c > 0x7e {
			return "", usagef("%s: only printable ASCII characters, no spaces", keyHeader)
		}
	}
	return k, nil
}

// jobKey is the key of one job's command in a bulk action under key.
func jobKey(key, id string) string {
	if key == "" {
		return ""
	}
	return key + "/" + id
}

// keyBook is file mode's memory of the keys used by commands that
// succeeded (a refused command does not use its key up), at most
// keyBookSize of them, the oldest forgotten first.
type keyBook struct {
	mu    sync.Mutex
	used  map[string]keyUse
	order []string
}

const keyBookSize = 4096

type keyUse struct {
	command string
	msg     string
	data    map[string]any
}

// once runs do, the command named command, unless key was used before:
// by the same command its first answer is given again (marked as a
// repeat), by another one it is ErrIdempotency. Commands with a key run
// one at a time.
func (k *keyBook) once(key, command string, do func() (string, map[string]any, error)) (string, map[string]any, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if use, ok := k.used[key]; ok {
		if use.command != command {
			return "", nil, fmt.Errorf("key %q was used for %q: %w", key, use.command, clusterstore.ErrIdempotency)
		}
		data := maps.Clone(use.data)
		if data == nil {
			data = map[string]any{}
		}
		data["repeat"] = true
		return use.msg, data, nil
	}
	msg, data, err := do()
	if err != nil {
		return msg, data, err
	}
	if k.used == nil {
		k.used = map[string]keyUse{}
	}
	if len(k.order) >= keyBookSize {
		delete(k.used, k.order[0])
		k.order = k.order[1:]
	}
	k.used[key] = keyUse{command: command, msg: msg, data: maps.Clone(data)}
	k.order = append(k.order, key)
	return msg, data, nil
}
