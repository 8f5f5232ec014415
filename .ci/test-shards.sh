#!/usr/bin/env bash
# Usage: test-shards.sh N PKG [SOLO [TIMES]]
# Runs the tests, examples and fuzz seeds of one package (PKG, relative
# to the current module) as N go test processes side by side, then the
# tests whose names match the extended regular expression SOLO in one
# process on their own; prints each run's output whole once it has
# ended, and exits non-zero if any failed. `make test` runs the root
# package this way: its tests wait on timers and real nodes for much of
# their time (about 0.8 of 2 cores used when run one at a time), and
# they are written to pass on a loaded machine, which is what each shard
# is to the other. The tests that load the machine themselves (bursts of
# thousands of calls, thousands of locks, kill storms) run on their own:
# beside a shard and other load they measured that load rather than the
# library.
# The tests are dealt longest first, each to the shard with the least
# time so far, by the seconds that the file TIMES lists ("seconds name"
# lines; # starts a comment); a test it does not list counts as 0.3 s.
# Without TIMES they are dealt in turn. Dealt in turn, the two shards of
# the root package took 142 and 191 s.
# The environment variable GOTEST holds the go test arguments.
set -uo pipefail
n=$1
pkg=$2
solo=${3:-}
times=${4:-/dev/null}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# -list runs the test binary, so it is built with the same flags as the
# shards, which then find it in the build cache.
if ! eval go test "$GOTEST" -list "'.*'" "$pkg" >"$tmp/list" 2>&1; then
	cat "$tmp/list"
	exit 1
fi
mapfile -t all < <(grep -E '^(Test|Example|Fuzz)[A-Za-z0-9_]*$' "$tmp/list")
names=()
alone=""
for t in "${all[@]}"; do
	if [[ -n $solo ]] && grep -qE "$solo" <<<"$t"; then
		alone+="${alone:+|}$t"
	else
		names+=("$t")
	fi
done
if [[ ${#names[@]} -eq 0 ]]; then
	echo "test-shards: no tests listed in $pkg"
	cat "$tmp/list"
	exit 1
fi
# Each line of deal is "shard name".
printf '%s\n' "${names[@]}" |
	awk -v tf="$times" 'BEGIN { while ((getline l < tf) > 0) if (l !~ /^#/ && split(l, a, " ") == 2) w[a[2]] = a[1] }
		{ print ($1 in w ? w[$1] : 0.3), NR, $1 }' |
	sort -k1,1gr -k2,2n |
	awk -v n="$n" '{ b = 0; for (i = 1; i < n; i++) if (load[i] < load[b]) b = i; load[b] += $1; print b, $3 }' >"$tmp/deal"
for ((s = 0; s < n; s++)); do
	run=$(awk -v s="$s" '$1 == s { printf "%s%s", sep, $2; sep = "|" }' "$tmp/deal")
	if [[ -z $run ]]; then
		continue
	fi
	(eval go test "$GOTEST" -run "'^($run)\$'" "$pkg" >"$tmp/$s.out" 2>&1; echo $? >"$tmp/$s.rc") &
done
wait
rc=0
for ((s = 0; s < n; s++)); do
	if [[ ! -e $tmp/$s.rc ]]; then
		continue
	fi
	echo "== go test $pkg, shard $((s + 1)) of $n"
	cat "$tmp/$s.out"
	if [[ $(cat "$tmp/$s.rc") != 0 ]]; then
		rc=1
	fi
done
if [[ -n $alone ]]; then
	echo "== go test $pkg, the tests that run on their own: $alone"
	# PAUSE_GROUPS: process groups ("-PGID ...") stopped meanwhile, so
	# that these tests do run on their own (test.sh's background builds).
	if [[ -n ${PAUSE_GROUPS:-} ]]; then
		kill -STOP -- $PAUSE_GROUPS 2>/dev/null
	fi
	if ! eval go test "$GOTEST" -run "'^($alone)\$'" "$pkg"; then
		rc=1
	fi
	if [[ -n ${PAUSE_GROUPS:-} ]]; then
		kill -CONT -- $PAUSE_GROUPS 2>/dev/null
	fi
fi
exit $rc
