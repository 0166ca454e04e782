package sandbox

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	Helper()
	if attacker() {
		return
	}
	os.Exit(m.Run())
}
