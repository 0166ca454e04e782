// Command logist is the steward's command line for Logist jobs.
package main

import (
	"context"
	"os"

	"github.com/logist/logist/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args, os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}
