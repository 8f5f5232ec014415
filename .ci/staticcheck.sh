#!/usr/bin/env bash
# Usage: staticcheck.sh MODULE...  (from the repository's root)
# Runs staticcheck (the binary $STATICCHECK) on every package of each
# module given, each module in its own process, at most two side by side
# (the machine has 2 cores; each run type-checks its module's
# dependencies, which is most of its time). Prints each module's findings
# once it has ended and exits non-zero if any module had a finding.
set -uo pipefail
: "${STATICCHECK:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=0
for m in "$@"; do
	(cd "$m" && "$STATICCHECK" ./... >"$tmp/$i.out" 2>&1; echo $? >"$tmp/$i.rc") &
	i=$((i + 1))
	if ((i % 2 == 0)); then
		wait
	fi
done
wait
rc=0
i=0
for m in "$@"; do
	if [[ $(cat "$tmp/$i.rc") != 0 ]]; then
		echo "== staticcheck $m"
		cat "$tmp/$i.out"
		rc=1
	fi
	i=$((i + 1))
done
exit $rc
