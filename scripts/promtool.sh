#!/bin/sh
# Checks and unit-tests the shipped alert rules with promtool (Debian's
# prometheus package, promtool 2.42), installed by test-tools.sh when it
# can be; with CI=true a missing promtool is an error, otherwise a loud skip.
set -eu
cd "$(dirname "$0")/.."
sh scripts/test-tools.sh
if ! command -v promtool >/dev/null 2>&1; then
  [ "${CI:-}" = true ] && { echo "promtool is missing" >&2; exit 1; }
  echo "SKIP: promtool not found (apt-get install prometheus); alert rules NOT tested" >&2
  exit 0
fi
promtool --version | head -n 1
promtool check rules deploy/prometheus/logistd-alerts.yml
promtool check config deploy/prometheus/prometheus.yml
promtool check config deploy/cluster/prometheus.yml
promtool test rules deploy/prometheus/logistd-alerts.test.yml
