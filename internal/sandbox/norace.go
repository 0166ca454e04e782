//go:build !race

package sandbox

// launcherEnv is the launcher's environment: none, the plan carries the
// call's (race.go: a race build's).
func launcherEnv() []string { return []string{} }
