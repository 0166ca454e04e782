package deliberation

import (
	"fmt"
	"slices"
	"strings"
)

// Roler is a Session whose configuration names manifest agents: the roles
// its turns go to. Roles maps each naming field, as a person finds it in
// the manifest ("game.summarizer", "game.agents.estoria"), to the agent
// it names.
type Roler interface {
	Roles() map[string]string
}

// CheckRoles refuses a session whose configuration names an agent that is
// not among agents (the manifest's), naming the field. It is the one
// check: the run makes it before any turn and logist validate with it.
func CheckRoles(s Session, agents []string) error {
	r, ok := s.(Roler)
	if !ok {
		return nil
	}
	roles := r.Roles()
	fields := make([]string, 0, len(roles))
	for f := range roles {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	for _, f := range fields {
		if !slices.Contains(agents, roles[f]) {
			known := slices.Sorted(slices.Values(agents))
			return fmt.Errorf("%s: %q is not an agent of the manifest (agents: %s)", f, roles[f], strings.Join(known, ", "))
		}
	}
	return nil
}
