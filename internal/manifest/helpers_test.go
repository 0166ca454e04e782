package manifest

// minimal is the smallest valid manifest: a task and the two agents of the
// default supervised workflow, played by the scripted provider.
const minimal = `{
  "task_description": "Write hello.txt",
  "agents": {
    "worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "done"}]},
    "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}
  }
}`

const agentsJSON = `"agents": {
    "worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "done"}]},
    "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}
  }`

// withFields returns a valid manifest with extra top-level fields (a JSON
// fragment without braces).
func withFields(fields string) string {
	return `{"task_description": "Write hello.txt", ` + agentsJSON + `, ` + fields + `}`
}
