#!/bin/sh
# make cluster-chaos: the full-size chaos run of cluster mode
# (internal/testbed/clusterchaos). Prints the run's log tail on failure;
# the last line is always the figures line (or says the run did not get
# that far). CHAOS_FLAGS adds or overrides flags (e.g. -chaos.seed=N).
set -u
GO=${GO:-go}
log=$(mktemp)
$GO test -count=1 -timeout 15m -run '^TestClusterChaos$' -v ./internal/testbed/clusterchaos \
  -chaos.nodes=3 -chaos.jobs=100 -chaos.kills=30 -chaos.pauses=5 -chaos.cuts=3 -chaos.limit=12m ${CHAOS_FLAGS:-} >"$log" 2>&1
status=$?
if [ "$status" -ne 0 ]; then
  grep -v '^cluster-chaos:' "$log" | tail -60 >&2
fi
grep -E 'seed|rescues' "$log" | sed 's/^ *//' >&2
line=$(grep '^cluster-chaos:' "$log" | tail -1)
rm -f "$log"
if [ -n "$line" ]; then
  echo "$line"
else
  echo "cluster-chaos: the run stopped before its figures (exit $status)"
fi
exit "$status"
