package steward

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/pathguard"
	"github.com/logist/logist/internal/regfile"
)

// PromptFiles are the prompt files (prompts: role → a file relative to
// the job folder) that the manifest file, m, brings with it: each read
// from beside file, where its author keeps it, for logist submit to put
// in the new job's folder before the job can start. A path under the
// workspace comes with the workspace (its git or copy source, or an
// agent) and is not read here. Each file that is missing, not a regular
// file or larger than manifest.MaxPromptBytes is an error naming file and
// the field: logist validate says so too, rather than ok for a job that
// would stop at its first call.
func PromptFiles(file string, m *manifest.Manifest) (map[string][]byte, manifest.Errors) {
	out := map[string][]byte{}
	var es manifest.Errors
	dir := filepath.Dir(file)
	for _, role := range slices.Sorted(maps.Keys(m.Prompts)) {
		rel := m.Prompts[role]
		ptr := "/prompts/" + role
		if err := pathguard.Lexical(rel); err != nil {
			es = append(es, &manifest.Error{File: file, Pointer: ptr, Reason: err.Error()})
			continue
		}
		clean := filepath.Clean(rel)
		if clean == jobstore.WorkspaceDir || strings.HasPrefix(clean, jobstore.WorkspaceDir+string(filepath.Separator)) {
			continue
		}
		p, _, err := pathguard.Resolve(dir, clean)
		if err == nil {
			var b []byte
			if b, err = regfile.ReadLimited(p, manifest.MaxPromptBytes); err == nil && len(b) > manifest.MaxPromptBytes {
				err = fmt.Errorf("larger than the %d bytes a prompt file may hold", manifest.MaxPromptBytes)
			} else if err == nil {
				out[clean] = b
				continue
			}
		}
		es = append(es, &manifest.Error{File: file, Pointer: ptr, Reason: fmt.Sprintf("prompt file %s, beside the manifest: %v (logist submit copies a job's prompt files from the manifest's folder into the job's)", pathguard.Shown(rel), err)})
	}
	return out, es
}
