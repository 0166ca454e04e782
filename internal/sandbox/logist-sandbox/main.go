// Command logist-sandbox is the sandbox's launcher and in-sandbox helper
// on their own, installed next to logistd (make build: bin/logist-sandbox).
//
// Why a binary of its own: every sandboxed call starts the launcher once
// and the in-sandbox helper once. As logistd, each start pays the Go
// runtime and the package inits of the whole daemon (HTTP, metrics,
// storage); this binary links only internal/sandbox and what it imports.
// logistd uses it when it finds it beside its own executable
// (sandbox.OwnBinary) and runs itself otherwise. make build links it
// statically (CGO_ENABLED=0): the dynamic loader and cgo's start cost each
// of its starts about 1 ms of CPU more, and nothing here needs libc.
package main

import (
	"fmt"
	"os"

	"github.com/logist/logist/internal/sandbox"
)

func main() {
	// A helper verb runs and exits here.
	sandbox.Helper()
	fmt.Fprintf(os.Stderr, "%s: logistd's sandbox helper, started by logistd for each sandboxed call; not for use by hand\n", sandbox.HelperName)
	os.Exit(2)
}
