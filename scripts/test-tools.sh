#!/bin/sh
# Installs the outside programs the tests use, from Debian's packages, when
# they are missing and this is root with apt-get: prometheus (promtool and
# the server, for the alert tests and the Prometheus end-to-end test), zsh
# and fish (their completion scripts are checked), bubblewrap (the
# sandbox's namespace layer, for its escape suite), git (git workspaces:
# internal/gitws and the jobs that work on a repository). With CI=true a tool that
# cannot be installed is an error; otherwise the tests that need it skip
# loudly.
set -eu
need=""
command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || need="$need prometheus"
command -v zsh >/dev/null 2>&1 || need="$need zsh"
command -v fish >/dev/null 2>&1 || need="$need fish"
command -v bwrap >/dev/null 2>&1 || need="$need bubblewrap"
command -v git >/dev/null 2>&1 || need="$need git"
[ -z "$need" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing test tools from Debian:$need"
  apt-get update -qq >/dev/null
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
elif [ "${CI:-}" = true ]; then
  echo "missing test tools:$need (need root and apt-get to install them)" >&2
  exit 1
else
  echo "SKIP (loud): missing test tools:$need; the tests that need them will skip (apt-get install$need)" >&2
fi
