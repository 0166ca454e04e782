package cluster

import (
	"testing"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/testkit"
)

// BenchmarkOwnScriptJob is runner's BenchmarkScriptJob (scenario 3's
// two-call scripted job in the engine alone, testkit's BenchScriptJobs)
// with every unit committed through the jobs folder's store as logistd
// wires it (OwnCommit): the owner's check of each unit
// (clusterstore.Apply) is in each op, as in the daemon.
func BenchmarkOwnScriptJob(b *testing.B) {
	k := testkit.New(b)
	k.Env.Store.InPlace = true // as logistd saves manifests
	k.Sign()                   // as logistd signs every record and head
	k.Env.History.Commit = OwnCommit(k.Env)
	e := runner.NewEngine(k.Env, builtins.Effects())
	k.Runner = e
	k.BenchScriptJobs(b)
}
