package agent

import "context"

// Executor starts the processes of agent calls: command agents, the CLI
// presets, the protocol's tools and checks. It is the one seam every such
// process goes through (RunProcess), so that what a process may reach is
// decided in one place: Direct runs it with the daemon's rights, Contained
// in a sandbox (internal/sandbox); a remote runtime would be another.
type Executor interface {
	// Run runs spec to its end (see RunProcess for its errors).
	Run(ctx context.Context, spec ProcSpec) (*ProcResult, error)
	// Layer names the containment its runs get ("none", "bwrap+landlock",
	// "landlock"), as history, status and metrics show it.
	Layer() string
}

type execKey struct{}

// WithExecutor returns ctx carrying ex: the runs of the calls made with it
// go through ex.
func WithExecutor(ctx context.Context, ex Executor) context.Context {
	return context.WithValue(ctx, execKey{}, ex)
}

// ExecutorFrom is the executor ctx carries, Direct if none. Only a
// context the engine did not make carries none (unit tests, tools run
// outside a job): the daemon's engine always sets one (fail closed).
func ExecutorFrom(ctx context.Context) Executor {
	if ex, ok := ctx.Value(execKey{}).(Executor); ok && ex != nil {
		return ex
	}
	return Direct{}
}

// Direct runs a program uncontained, as its own process group: what the
// sandbox opt-out ("sandbox": "none") runs under. Ceiling holds its runs
// to the operator's output ceiling (ProcSpec.Ceiling; 0: none).
type Direct struct{ Ceiling int64 }

// LayerNone is the Layer of an uncontained run.
const LayerNone = "none"

// Run implements Executor.
func (d Direct) Run(ctx context.Context, spec ProcSpec) (*ProcResult, error) {
	return runDirect(ctx, spec.ceiled(d.Ceiling))
}

// Layer implements Executor.
func (Direct) Layer() string { return LayerNone }
