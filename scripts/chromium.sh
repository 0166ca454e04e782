#!/bin/sh
# Installs Debian's chromium for the console's browser test
# (internal/console/browser_test.go drives it headless through chromedp)
# when it is missing and this is root with apt-get. With CI=true a chromium
# that cannot be installed is an error (the test never skips there);
# otherwise the browser test skips loudly.
set -eu
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing chromium from Debian (the console's browser test)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
elif [ "${CI:-}" = true ]; then
  echo "chromium is missing (need root and apt-get to install it)" >&2
  exit 1
else
  echo "SKIP (loud): chromium is missing; the console's browser test will skip (apt-get install chromium)" >&2
fi
