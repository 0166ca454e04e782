#!/bin/sh
# Installs pinned agent CLIs from npm into .cache/agents/NAME, once: a
# folder whose .installed marker names the pinned version is left alone.
# Usage: install-agents.sh NAME... (default: all in agent-versions.txt)
set -eu
cd "$(dirname "$0")/.."
dir=.cache/agents
mkdir -p "$dir"
names="$*"
[ -n "$names" ] || names=$(grep -v '^#' scripts/agent-versions.txt | awk 'NF{print $1}')
if ! command -v npm >/dev/null 2>&1; then
	echo "install-agents: npm not found; installing Debian's nodejs and npm" >&2
	apt-get install -y nodejs npm >/dev/null 2>&1 || { echo "install-agents: could not install npm" >&2; exit 1; }
fi
pids=""
for n in $names; do
	line=$(grep -v '^#' scripts/agent-versions.txt | awk -v n="$n" '$1==n')
	[ -n "$line" ] || { echo "install-agents: unknown agent $n" >&2; exit 1; }
	pkg=$(echo "$line" | awk '{print $2}'); ver=$(echo "$line" | awk '{print $3}')
	if [ "$(cat "$dir/$n/.installed" 2>/dev/null || true)" = "$pkg@$ver" ]; then
		continue
	fi
	(
		rm -rf "$dir/$n" && mkdir -p "$dir/$n" && cd "$dir/$n" &&
		npm install --no-audit --no-fund --loglevel=error --prefix . "$pkg@$ver" >install.log 2>&1 &&
		echo "$pkg@$ver" >.installed && echo "install-agents: $pkg@$ver" ||
		{ echo "install-agents: npm install $pkg@$ver failed:" >&2; tail -20 install.log >&2; exit 1; }
	) &
	pids="$pids $!"
done
rc=0
for p in $pids; do wait "$p" || rc=1; done
exit $rc
