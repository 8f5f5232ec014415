#!/usr/bin/env bash
# Runs `go test` in each module folder given, all at once, and prints each
# module's output whole, in the order given, once all have ended; exits
# non-zero if any failed. `make test` runs the small modules (the CLI and
# the adapters) this way: their tests mostly wait on timers and real
# nodes, so side by side they take about the time of the longest one.
# The environment variable GOTEST holds the go test arguments.
set -uo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=0
for m in "$@"; do
	(cd "$m" && eval go test "$GOTEST" ./... >"$tmp/$i.out" 2>&1; echo $? >"$tmp/$i.rc") &
	i=$((i + 1))
done
wait
rc=0
i=0
for m in "$@"; do
	echo "== go test $m"
	cat "$tmp/$i.out"
	if [[ $(cat "$tmp/$i.rc") != 0 ]]; then
		rc=1
	fi
	i=$((i + 1))
done
exit $rc
