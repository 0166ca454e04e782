#!/bin/sh
# Checks and unit-tests the shipped alert rules with promtool (Debian's
# prometheus package, promtool 2.42). Installs it when it can (root with
# apt-get); with CI=true a missing promtool is an error, otherwise a loud skip.
set -eu
cd "$(dirname "$0")/.."
if ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's prometheus package for promtool"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  elif [ "${CI:-}" = true ]; then
    echo "promtool is missing and cannot be installed (need root and apt-get)" >&2
    exit 1
  else
    echo "SKIP: promtool not found (apt-get install prometheus); alert rules NOT tested" >&2
    exit 0
  fi
fi
promtool --version | head -n 1
promtool check rules deploy/prometheus/logistd-alerts.yml
promtool check config deploy/prometheus/prometheus.yml
promtool test rules deploy/prometheus/logistd-alerts.test.yml
