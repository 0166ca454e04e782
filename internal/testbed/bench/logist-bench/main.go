// Command logist-bench runs Logist's benchmark scenarios (pickup latency,
// per-call overhead, durable throughput, history growth, folder scale,
// concurrency, cluster mode) against baselines measured in the same run, and writes
// docs/benchmarks.md and docs/benchmarks.json. See internal/testbed/bench.
package main

import (
	"os"

	"github.com/logist/logist/internal/testbed/bench"
)

func main() { os.Exit(bench.Main(os.Args[1:], os.Stdout, os.Stderr)) }
