#!/bin/sh
# Makes a throwaway PostgreSQL possible for the cluster tests
# (internal/pgtest): installs Debian's postgresql when initdb/pg_ctl are
# missing (on PATH or under /usr/lib/postgresql/*/bin), and, as root,
# creates the unprivileged user logist-test the test servers run as
# (PostgreSQL refuses to run as root). With CI=true anything missing is an
# error; otherwise the cluster tests skip loudly.
set -eu
have_pg() {
  command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && return 0
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && return 0
  done
  return 1
}
if ! have_pg; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing postgresql from Debian (for the cluster tests)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  elif [ "${CI:-}" = true ]; then
    echo "missing postgresql (initdb, pg_ctl): need root and apt-get to install it" >&2
    exit 1
  else
    echo "SKIP (loud): postgresql is missing; the cluster tests will skip (apt-get install postgresql)" >&2
    exit 0
  fi
fi
if [ "$(id -u)" = 0 ] && ! id logist-test >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin logist-test
fi
