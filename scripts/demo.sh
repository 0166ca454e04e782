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
cat <<EOT

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
