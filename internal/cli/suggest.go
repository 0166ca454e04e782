package cli

import (
	"fmt"

	"github.com/logist/logist/internal/suggest"
)

// unknownCommand is the error message for a command word logist does not
// know, naming the nearest one.
func unknownCommand(name string) string {
	names := []string{"help", "version"}
	for _, c := range commands {
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	if s := suggest.Nearest(name, names); s != "" {
		return fmt.Sprintf("unknown command %q; did you mean %q? (logist help lists them)", name, s)
	}
	return fmt.Sprintf("unknown command %q; run 'logist help' for the list", name)
}
