package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// A config file is outside input: any bytes give settings or a clear
// error, never a panic, and a flag set on the command line always wins.
func FuzzConfigFile(f *testing.F) {
	f.Add([]byte(`{"max_parallel": 8, "listen": "127.0.0.1:1", "grace": "5s"}`))
	f.Add([]byte(`{"max_parallel": "x"}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"grace": 1e400}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(t.TempDir(), "c.json")
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		n := fs.Int("max-parallel", 4, "")
		fs.String("listen", "", "")
		fs.Duration("grace", 30*time.Second, "")
		if err := fs.Parse([]string{"--max-parallel", "3"}); err != nil {
			t.Fatal(err)
		}
		_, _ = Apply(fs, file, func(string) string { return "" })
		if *n != 3 {
			t.Fatalf("the command line's --max-parallel 3 became %d", *n)
		}
	})
}
