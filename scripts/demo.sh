#!/bin/sh
# make demo: run the example jobs on the built-in agent in a scratch folder.
# It says what it is doing as it goes (the build before it is what takes
# time on a first run).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/logist-demo.XXXXXX")
cp -R "$root/jobs/." "$scratch/"
logist="$root/bin/logist"
n=$(ls -d "$scratch"/*/ | wc -l | tr -d ' ')
echo "demo: $n example jobs copied to $scratch"
# One more job works on a git repository, made here (never committed as a
# nested .git): it ends with a branch to review (logist result).
if command -v git >/dev/null 2>&1; then
  repo="$scratch.repo"
  mkdir -p "$repo/src"
  g() { git -C "$repo" -c user.name=Demo -c user.email=demo@localhost -c init.defaultBranch=main -c core.hooksPath=/dev/null "$@"; }
  g init -q
  printf '# app\n\nA small demo repository.\n' > "$repo/README.md"
  printf 'def greet(name):\n    return "Hello " + name\n' > "$repo/src/greet.py"
  g add -A && g commit -q -m "first version"
  printf 'def greet(name):\n    return "Hello, " + name\n' > "$repo/src/greet.py"
  g commit -q -am "punctuation"
  mkdir -p "$scratch/demo-repository"
  cat > "$scratch/demo-repository/job.json" <<EOJ
{
  "description": "An agent works on a git repository; the result is a branch to review.",
  "task_description": "Make greet() handle an empty name, and add a test.",
  "workspace": {"git": {"repo": "$repo", "ref": "main"}},
  "agents": {
    "worker": {"provider": "script", "script": [
      {"action": "RETRY", "summary": "First attempt: the test is still missing.", "files": {"src/greet.py": "def greet(name):\\n    return \\"Hello, \\" + (name or \\"world\\")\\n"}},
      {"action": "COMPLETED", "summary": "greet() falls back to 'world'; test added.", "evidence_files": ["src/greet.py", "tests/test_greet.py"],
       "files": {"tests/test_greet.py": "from src.greet import greet\\n\\ndef test_empty():\\n    assert greet(\\"\\") == \\"Hello, world\\"\\n"}}
    ]},
    "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "The change is small and tested.", "evidence_files": ["tests/test_greet.py"]}]}
  },
  "cost_threshold": 100
}
EOJ
  echo "demo: and demo-repository, on a git repository made for it at $repo"
else
  echo "demo: git is not installed: the repository job is left out"
fi
echo "demo: running them on the built-in scripted agent: logistd --once --jobs-dir $scratch …"
start=$(date +%s)
"$root/bin/logistd" --once --jobs-dir "$scratch" 2>"$scratch/.logistd.log" || {
  echo "logistd failed; its log:"; cat "$scratch/.logistd.log"; exit 1; }
echo "demo: logistd finished in $(( $(date +%s) - start ))s (no job left to run); what became of each job:"
echo
"$logist" list --jobs-dir "$scratch"
echo
for id in $("$logist" list --jobs-dir "$scratch" --format json | sed -n 's/.*"job_id": "\(.*\)".*/\1/p'); do
  st=$("$logist" status "$id" --jobs-dir "$scratch" --format json | sed -n 's/^    "status": "\(.*\)",$/\1/p' | head -n 1)
  case "$st" in
  INTERVENTION_REQUIRED|HALTED_COST|HALTED_TIME)
    echo "== $id is $st"
    "$logist" status "$id" --jobs-dir "$scratch" | grep -E '^(Reason|Error code|Next):' | sed 's/^/   /'
    ;;
  esac
done
if [ -f "$scratch/demo-repository/job.json" ]; then
  echo "== demo-repository: the branch to review (bin/logist result demo-repository --jobs-dir $scratch)"
  "$logist" result demo-repository --jobs-dir "$scratch" | sed 's/^/   /'
  echo
fi
cat <<EOT

The repository job's change, as a diff or a patch to apply or push:
  bin/logist diff demo-repository --jobs-dir $scratch
  bin/logist result demo-repository --jobs-dir $scratch --patch demo.patch
  bin/logist result demo-repository --jobs-dir $scratch --push review/demo
  git -C $scratch.repo log --oneline main..review/demo

The protocol session (seed 003) of demo-protocol, its signed events and their check:
  bin/logist history demo-protocol --jobs-dir $scratch
  bin/logist verify demo-protocol --jobs-dir $scratch

To continue the stuck job, as a steward would:
  bin/logist resume demo-stuck --jobs-dir $scratch --guidance 'Keep legacy_email; add the new column beside it.'
  bin/logistd --once --jobs-dir $scratch
Daemon log (JSON lines): $scratch/.logistd.log

To open the steward console on this folder, run this, then open http://127.0.0.1:9464/ and log in with
the token logistd writes to $scratch/.logist/console-token:
  bin/logistd --jobs-dir $scratch --listen 127.0.0.1:9464
EOT
