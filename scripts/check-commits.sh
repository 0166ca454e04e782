#!/bin/sh
# Reports the commits in a range whose subject breaks the project's rule
# (README.md, "Contributing"): `pkg: what changed`, at most 72 characters.
# Merge commits are skipped. Exits 1 if any is reported.
#
#   sh scripts/check-commits.sh              # main..HEAD: this branch's own
#   sh scripts/check-commits.sh A..B         # any range git log takes
#
# Not part of `make test`: history already made cannot be rewritten.
set -eu
range=${1:-main..HEAD}
log=$(git log --no-merges --format='%h %s' "$range")
[ -n "$log" ] || exit 0
# Bytes in, characters counted: UTF-8 continuation bytes are not counted.
printf '%s\n' "$log" | LC_ALL=C awk '
{
	hash = $1
	subject = substr($0, length(hash) + 2)
	why = ""
	chars = subject
	gsub(/[\200-\277]/, "", chars)
	if (length(chars) > 72)
		why = sprintf("%d characters", length(chars))
	if (subject !~ /^[A-Za-z0-9][A-Za-z0-9_.\/-]*(, [A-Za-z0-9][A-Za-z0-9_.\/-]*)*: [^ ]/)
		why = (why == "" ? "" : why "; ") "not \"pkg: what changed\""
	if (why != "") {
		printf "%s %s\n    (%s)\n", hash, subject, why
		bad++
	}
}
END { exit bad > 0 }'
