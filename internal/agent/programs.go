package agent

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/logist/logist/internal/egress"
	"github.com/logist/logist/internal/manifest"
)

// ProgramCheck finds the program each command agent of a manifest would
// start (its argv[0]) the way the call will: a name is looked up on PATH,
// a path with a '/' is taken as it is, relative to the workspace the agent
// runs in. Whose PATH counts matters: the daemon's when it runs the job
// (the runner checks at intake, before any call), the shell's when logist
// validate, submit or set check a manifest ahead of that (Where says
// which, in every message).
//
// Not checked: programs named through a placeholder ("{workspace}/run"),
// and preset programs (a missing one is reported as NOT_INSTALLED by the
// call).
type ProgramCheck struct {
	// LookPath finds a program name on PATH (exec.LookPath if nil).
	LookPath func(string) (string, error)
	// Where names the PATH searched, for messages ("logistd's PATH").
	Where string
	// Workspace is the job's workspace, where relative paths start; ""
	// leaves relative paths unchecked (a manifest not yet in a job folder).
	Workspace string
	// Metered: the calls go through the metering proxy (logistd's, which
	// a steward's command checks for), so a model it would refuse is a
	// problem too (CheckPrices).
	Metered bool
}

// Check returns one problem per command agent whose program cannot be
// started, each naming file, the field (/agents/ROLE/command/argv/0) and
// why, and those of the network allowlist (CheckNetworkAllow) and, when
// Metered, of models the metering proxy would refuse (CheckPrices); nil if
// there is none.
func (c ProgramCheck) Check(file string, m *manifest.Manifest) manifest.Errors {
	es := CheckNetworkAllow(file, m)
	if c.Metered {
		es = append(es, CheckPrices(file, m)...)
	}
	for _, role := range slices.Sorted(maps.Keys(m.Agents)) {
		a := m.Agents[role]
		if a.Provider != "command" || a.Command == nil || a.Command.Preset != "" || len(a.Command.Argv) == 0 {
			continue
		}
		if reason := c.program(a.Command.Argv[0]); reason != "" {
			es = append(es, &manifest.Error{File: file, Pointer: "/agents/" + role + "/command/argv/0", Reason: reason})
		}
	}
	return es
}

// PresetWarnings are warnings, one per command agent that runs a preset
// whose program (command.program, else the preset's) is not found where
// c looks: not errors, since logistd looks on its own PATH when it runs
// the job, where the call reports NOT_INSTALLED. Each names file, the
// field and what to install.
func (c ProgramCheck) PresetWarnings(file string, m *manifest.Manifest) []string {
	look := c.LookPath
	if look == nil {
		look = exec.LookPath
	}
	var out []string
	for _, role := range slices.Sorted(maps.Keys(m.Agents)) {
		a := m.Agents[role]
		if a.Provider != "command" || a.Command == nil || a.Command.Preset == "" {
			continue
		}
		p, ok := LookupPreset(a.Command.Preset)
		if !ok {
			continue // the manifest's check refuses an unknown preset
		}
		prog, field := p.Program, "/agents/"+role+"/command/preset"
		if a.Command.Program != "" {
			prog, field = a.Command.Program, "/agents/"+role+"/command/program"
		}
		if strings.Contains(prog, "{") {
			continue // a placeholder: known only at the call
		}
		if _, err := look(prog); err != nil {
			out = append(out, fmt.Sprintf("%s: %s: preset %s's program %q is not found on %s (install %s, or set command.program); the call would stop with NOT_INSTALLED",
				file, field, p.Name, prog, c.Where, p.Package))
		}
	}
	return out
}

// program says why prog cannot be started ("" if it can, or if it
// cannot be told here).
func (c ProgramCheck) program(prog string) string {
	switch {
	case strings.TrimSpace(prog) == "":
		return "the program to run is empty"
	case strings.Contains(prog, "{"):
		return "" // a placeholder: known only at the call
	case !strings.ContainsRune(prog, '/'):
		look := c.LookPath
		if look == nil {
			look = exec.LookPath
		}
		if _, err := look(prog); err != nil {
			return fmt.Sprintf("program %q not found on %s; name a program installed there, or give its absolute path", prog, c.Where)
		}
		return ""
	}
	p := prog
	if !filepath.IsAbs(p) {
		if c.Workspace == "" {
			return ""
		}
		p = filepath.Join(c.Workspace, p)
	}
	fi, err := os.Stat(p)
	switch {
	case err != nil && os.IsNotExist(err):
		if p != prog {
			return fmt.Sprintf("program %q does not exist (%s, relative to the job's workspace)", prog, p)
		}
		return fmt.Sprintf("program %q does not exist", prog)
	case err != nil:
		return fmt.Sprintf("program %q cannot be read: %v", prog, err)
	case fi.IsDir():
		return fmt.Sprintf("program %q is a folder", prog)
	case fi.Mode()&fs.ModePerm&0o111 == 0:
		return fmt.Sprintf("program %q is not executable: make it so (chmod +x) or run it through its interpreter (argv [\"sh\", %q, ...])", prog, prog)
	}
	return ""
}

// UncopiedFiles are the files the command agents of manifest file name
// in their argv relative to the job's workspace (where the agent runs:
// ProcSpec.Dir), that are not there: submitting a manifest copies the
// manifest alone, so a script beside it (["sh", "../agent.sh"],
// ["./agent.sh"]) is not beside the job. One problem per argument, naming
// file, the field (/agents/ROLE/command/argv/N), where the path leads and
// what to do; for a steward's warning, not a refusal: the file may still
// be put there before the job runs. The one rule:
//
//   - an absolute path, a placeholder ({request_file}, ...), a flag and a
//     program name without '/' (argv[0], found on PATH: ProgramCheck) are
//     not files relative to the workspace;
//   - any other argument with a '/' is such a file, and a name without
//     one is when besideManifest finds it (what its author meant) — a word
//     like "hello" is not;
//   - it is there when it exists where it leads, or when it leads inside a
//     workspace the job fills from a source (workspace.git or
//     workspace.copy), which may hold it.
func UncopiedFiles(file string, m *manifest.Manifest, workspace string) manifest.Errors {
	var es manifest.Errors
	beside := filepath.Dir(file)
	for _, role := range slices.Sorted(maps.Keys(m.Agents)) {
		a := m.Agents[role]
		if a.Provider != "command" || a.Command == nil || a.Command.Preset != "" {
			continue
		}
		for i, arg := range a.Command.Argv {
			if arg == "" || strings.HasPrefix(arg, "-") || strings.Contains(arg, "{") || filepath.IsAbs(arg) {
				continue
			}
			local := besideManifest(beside, filepath.Base(workspace), arg)
			if !strings.ContainsRune(arg, '/') && (i == 0 || local == "") {
				continue
			}
			p := filepath.Join(workspace, arg)
			if _, err := os.Stat(p); err == nil {
				continue
			}
			if m.Workspace != nil && (p == workspace || strings.HasPrefix(p, workspace+string(filepath.Separator))) {
				continue // the workspace's source may hold it
			}
			why := fmt.Sprintf("%q is relative to the job's workspace, where the agent runs: it leads to %s, where nothing is", arg, p)
			if local != "" {
				why += fmt.Sprintf(" (%s, beside the manifest, is not copied: submit copies the manifest alone)", local)
			}
			es = append(es, &manifest.Error{File: file, Pointer: fmt.Sprintf("/agents/%s/command/argv/%d", role, i),
				Reason: why + "; copy the file there before the job runs, or give its absolute path"})
		}
	}
	return es
}

// CheckNetworkAllow returns one problem per sandbox_network_allow entry a
// call could not use, naming file, the field (/sandbox_network_allow/N) and
// why: one egress.ParseAllow refuses, and a loopback destination. Inside
// the sandbox the loopback is the call's own, where only the metering
// proxy listens, and HTTP clients send a request for a loopback address
// straight to it rather than through the egress proxy (the calls get
// NO_PROXY=127.0.0.1 so that they reach the metering proxy directly; Go's
// client never proxies loopback at all), so such an entry would validate
// and then fail every request with a refused connection.
func CheckNetworkAllow(file string, m *manifest.Manifest) manifest.Errors {
	var es manifest.Errors
	for i, a := range m.SandboxNetworkAllow {
		ptr := fmt.Sprintf("/sandbox_network_allow/%d", i)
		e, err := egress.ParseAllow([]string{a})
		switch {
		case err != nil:
			es = append(es, &manifest.Error{File: file, Pointer: ptr, Reason: err.Error()})
		case e[0].Loopback():
			es = append(es, &manifest.Error{File: file, Pointer: ptr, Reason: fmt.Sprintf("%q is a loopback destination, "+
				"which a sandboxed call cannot reach: in the sandbox 127.0.0.1 is the call's own loopback, and HTTP clients "+
				"connect to it directly instead of through the egress proxy (NO_PROXY=127.0.0.1, the metering proxy). "+
				"Reach a model server on this machine through the metering proxy (an http agent, or a CLI preset's "+
				"command.base_url), or list an address it listens on that is not loopback (IP:port)", a)})
		}
	}
	return es
}

// besideManifest is the regular file arg names from the folder of the
// manifest (beside), "" if none: read as from a job folder's workspace
// (named ws) if the manifest's folder were the job's folder, as the
// author of a job.json with its script beside it wrote it, else from the
// manifest's folder itself.
func besideManifest(beside, ws, arg string) string {
	for _, p := range []string{filepath.Join(beside, ws, arg), filepath.Join(beside, arg)} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}
