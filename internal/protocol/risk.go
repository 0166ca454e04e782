package protocol

import (
	"path"
	"strings"
)

// Risk classes of a tool intent, lowest first.
const (
	RiskLow    = "low"
	RiskMedium = "medium"
	RiskHigh   = "high"
)

var riskRank = map[string]int{RiskLow: 0, RiskMedium: 1, RiskHigh: 2}

// Classify is Logist's own risk class of a tool run, from the tool and its
// input alone: the action guard never trusts the class an Executor
// declares (a declared class may only raise it, EffectiveRisk).
//
//   - write_file is low when it writes a plain relative path (no "..", no
//     hidden component such as .git), high otherwise;
//   - shell is low only for one simple read-only command (cat, ls, grep,
//     ...) with no shell syntax (no ; & | < > ` $ ( ) { } \ or newline)
//     and no argument that reaches outside the workspace (an absolute
//     path, "..", "~"); every other command is high;
//   - any other tool is high.
func Classify(tool string, input map[string]any) string {
	switch tool {
	case ToolWriteFile:
		p, _ := input["path"].(string)
		if plainRelative(p) {
			return RiskLow
		}
	case ToolShell:
		cmd, _ := input["command"].(string)
		if readOnlyCommand(cmd) {
			return RiskLow
		}
	}
	return RiskHigh
}

// EffectiveRisk is the higher of the declared class and Logist's own; an
// unknown declared class counts as high.
func EffectiveRisk(declared, classified string) string {
	d, ok := riskRank[declared]
	if !ok {
		return RiskHigh
	}
	if riskRank[classified] > d {
		return classified
	}
	return declared
}

// riskBelow reports whether declared is lower than Logist's class.
func riskBelow(declared, classified string) bool {
	d, ok := riskRank[declared]
	return !ok || d < riskRank[classified]
}

func plainRelative(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") || strings.ContainsAny(p, "\\\x00") {
		return false
	}
	for _, c := range strings.Split(path.Clean(p), "/") {
		if c == ".." || strings.HasPrefix(c, ".") {
			return false
		}
	}
	return true
}

// readOnly are the programs a low-risk shell intent may run.
var readOnly = map[string]bool{
	"cat": true, "ls": true, "grep": true, "head": true, "tail": true, "wc": true, "echo": true, "pwd": true,
	"diff": true, "cmp": true, "sort": true, "uniq": true, "stat": true, "file": true, "true": true, "false": true,
	"test": true, "sha256sum": true, "md5sum": true, "du": true,
}

func readOnlyCommand(cmd string) bool {
	if strings.ContainsAny(cmd, ";&|<>`$(){}\\\n\r\x00") {
		return false
	}
	f := strings.Fields(cmd)
	if len(f) == 0 || !readOnly[f[0]] {
		return false
	}
	for _, arg := range f[1:] {
		for _, a := range strings.Split(strings.Trim(arg, `"'`), "=") {
			a = strings.Trim(a, `"'`)
			if strings.HasPrefix(a, "/") || strings.HasPrefix(a, "~") || strings.Contains(a, "..") {
				return false
			}
		}
	}
	return true
}
