#!/usr/bin/env bash
# Usage: test-shards.sh N PKG
# Runs the tests, examples and fuzz seeds of one package (PKG, relative
# to the current module) as N go test processes side by side, the
# package's tests dealt to them in turn in the order `go test -list`
# gives; prints each shard's output whole once all have ended, and exits
# non-zero if any failed. `make test` runs the root package this way: its
# tests wait on timers and real nodes for much of their time (about 0.8
# of 2 cores used when run one at a time), and they are written to pass
# on a loaded machine, which is what each shard is to the other.
# The environment variable GOTEST holds the go test arguments.
set -uo pipefail
n=$1
pkg=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# -list runs the test binary, so it is built with the same flags as the
# shards, which then find it in the build cache.
if ! eval go test "$GOTEST" -list "'.*'" "$pkg" >"$tmp/list" 2>&1; then
	cat "$tmp/list"
	exit 1
fi
mapfile -t names < <(grep -E '^(Test|Example|Fuzz)[A-Za-z0-9_]*$' "$tmp/list")
if [[ ${#names[@]} -eq 0 ]]; then
	echo "test-shards: no tests listed in $pkg"
	cat "$tmp/list"
	exit 1
fi
for ((s = 0; s < n; s++)); do
	run=""
	for ((i = s; i < ${#names[@]}; i += n)); do
		run+="${run:+|}${names[i]}"
	done
	(eval go test "$GOTEST" -run "'^($run)\$'" "$pkg" >"$tmp/$s.out" 2>&1; echo $? >"$tmp/$s.rc") &
done
wait
rc=0
for ((s = 0; s < n; s++)); do
	echo "== go test $pkg, shard $((s + 1)) of $n"
	cat "$tmp/$s.out"
	if [[ $(cat "$tmp/$s.rc") != 0 ]]; then
		rc=1
	fi
done
exit $rc
