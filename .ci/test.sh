#!/usr/bin/env bash
# Usage: test.sh  (from the repository's root; `make test` runs it)
# Vets and race-tests every module. On a fresh machine most of the time
# went to compiling, not to the tests: go vet and go test -race built
# every dependency twice, once plain and once with -race (454 s of 2
# cores, cold, against 296 s when vet builds with -race too). So:
#   - every module is vetted with -race, which checks the same files (no
#     file of ours has a race build tag) and leaves the race build of
#     each dependency in the cache for its tests;
#   - the root package is vetted first; then, while its tests run as
#     shards (.ci/test-shards.sh; they wait on timers and nodes for most
#     of their time), the other modules are vetted and their test
#     binaries compiled at the lowest CPU priority (nice 19), so that the
#     tests' processes come first whenever they can run;
#   - then the root module's other packages, the chaos module (one test
#     binary at a time: its latency checks and the stress test must not
#     run beside each other), and the small modules side by side
#     (.ci/test-parallel.sh). Each waits only for its own modules'
#     preparation: at nice 19 beside the root's tests, the whole of it
#     ended 100 s after them, cold, and the small modules' part can end
#     beside the chaos tests.
#   - then the Valkey pass (the Makefile's VALKEY_TESTS and VALKEY_CHAOS,
#     against valkey-server): its chaos scenarios right after the chaos
#     module's tests, in their conditions, and its root tests beside the
#     small modules'.
#   - staticcheck ($STATICCHECK, .ci/staticcheck.sh) of every module runs
#     as a third background job at nice 19, once the small modules are
#     prepared, and is awaited last, beside the chaos and small modules'
#     tests.
# Cold, on 2 cores, the root's vet took about 100 s, its tests 290 s,
# and the rest about 250 s once prepared; the Valkey pass adds about 75 s
# (chaos 30 s; root subset and internal packages 70 s of tests, of which
# the small modules' phase hid about 40 s), on a loaded machine.
# Environment: GO (default go), GOTEST (the go test arguments), SOLO (the
# root tests that run on their own, see test-shards.sh), ROOT_PKG,
# LARGE (the modules after the root, one at a time), SMALL (the small
# modules, side by side), for the Valkey pass, VALKEY_TESTS (the root
# tests to run against valkey-server, see valkey_tests below) and
# VALKEY_CHAOS (the chaos scenarios); either empty skips its part;
# STATICCHECK (the staticcheck binary; unset: not run), STATICCHECK_PKG
# (what go install builds it from when it is missing) and CHECKED (the
# modules staticcheck checks).
set -uo pipefail
GO=${GO:-go}
: "${GOTEST:?}" "${ROOT_PKG:?}" "${LARGE:=}" "${SMALL:=}" "${SOLO:=}" "${VALKEY_TESTS:=}" "${VALKEY_CHAOS:=}" "${STATICCHECK:=}" "${STATICCHECK_PKG:=}" "${CHECKED:=}"
export STATICCHECK
export GOTEST
tmp=$(mktemp -d)
bg=
cleanup() {
	if [[ -n $bg ]]; then
		# the background jobs' process groups: go and the compilers too
		kill -CONT -- -$bg 2>/dev/null # a stopped process would hold the TERM
		kill -- -$bg 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

echo "== [${SECONDS}s] go vet -race ./... (the root module)"
$GO vet -race ./... || exit 1

# prepare vets the modules given and compiles their test binaries, at
# the lowest CPU priority; with -main, it also builds their commands.
# Tests that build a module's commands with go build (the CLI's tests
# run the binary they build) need the dependencies built without -race,
# which vet -race does not leave in the cache: about a minute, cold,
# inside those tests otherwise.
prepare() {
	local rc=0 mains=0 m
	if [[ $1 == -main ]]; then
		mains=1
		shift
	fi
	# The job's shell lowers its own priority, once: what it runs
	# inherits it, and await's renice of the job then holds for the
	# rest of it (a nice(1) per command would lower it again).
	# --priority sets the value itself, as util-linux documents it.
	renice --priority 19 -p "$BASHPID" >/dev/null 2>&1 || true
	for m in "$@"; do
		echo "== [${SECONDS}s] go vet -race $m (in the background)"
		(cd "$m" && $GO vet -race ./...) || rc=1
		# -c builds each package's test binary without running it; the
		# runs below find the compiled packages in the build cache.
		(cd "$m" && $GO test -race -c -o "$tmp/bin/" ./... >/dev/null) || rc=1
		if ((mains)); then
			(
				cd "$m" || exit 1
				pkgs=$($GO list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./...) || exit 1
				if [[ -n $pkgs ]]; then
					# shellcheck disable=SC2086
					$GO build -o /dev/null $pkgs
				fi
			) || rc=1
		fi
	done
	echo "== [${SECONDS}s] ready: $*"
	return $rc
}

# await waits for the background job of pid $1, whose output is in file
# $2, prints that output, and fails when the job did. Once awaited, the
# job is what the run waits for, so it gets back the normal priority:
# beside two busy loops of normal priority, a job left at nice 19 got
# almost no CPU while the run waited for it. (renice to a lower value
# needs root, which CI runs as; elsewhere the job stays at nice 19.)
await() {
	local rc=0
	renice --priority 0 -g "$1" >/dev/null 2>&1 || true
	wait "$1" || rc=$?
	cat "$2"
	if [[ $rc != 0 ]]; then
		echo "go vet or a build failed (above)"
		exit 1
	fi
}

# The other modules are prepared in the background, while the root
# package's tests run: the large ones, then the small ones, as two jobs,
# each awaited only before its modules' tests. The second starts when
# the first has ended (tail --pid waits for a process to end): side by
# side, both starved at nice 19, the chaos module was ready at 449 s
# instead of 316 s, cold. Each job is a process group of its own
# (set -m), which cleanup ends whole.
set -m
prepare $LARGE >"$tmp/large.out" 2>&1 &
bgl=$!
(
	tail --pid="$bgl" -f /dev/null
	prepare -main $SMALL
) >"$tmp/small.out" 2>&1 &
bgs=$!
(
	tail --pid="$bgs" -f /dev/null
	renice --priority 19 -p "$BASHPID" >/dev/null 2>&1 || true
	if [[ -n $STATICCHECK ]]; then
		if [[ ! -x $STATICCHECK ]]; then
			# Built here rather than before the tests: cold, its build
			# is a minute of CPU, which nice 19 gives to the tests.
			echo "== [${SECONDS}s] go install $STATICCHECK_PKG (in the background)"
			GO=$GO bash .ci/install-staticcheck.sh "$STATICCHECK" "$STATICCHECK_PKG" || exit 1
		fi
		echo "== [${SECONDS}s] staticcheck $CHECKED (in the background)"
		# shellcheck disable=SC2086
		if ! bash .ci/staticcheck.sh $CHECKED; then
			echo "staticcheck found problems (above)"
			exit 1
		fi
		echo "== [${SECONDS}s] staticcheck: no findings"
	fi
) >"$tmp/staticcheck.out" 2>&1 &
bgc=$!
set +m
bg="$bgl -$bgs -$bgc"

echo "== [${SECONDS}s] go test . (2 shards side by side, then the tests matching $SOLO on their own; meanwhile the other modules are vetted and built)"
# The background jobs are stopped while the root's tests that load the
# machine themselves run: beside them, even at nice 19, a cold run failed
# TestWriterNotStarvedWithSilentNode's bound.
PAUSE_GROUPS="-$bgl -$bgs -$bgc" bash .ci/test-shards.sh 2 . "$SOLO" .ci/root-test-times.txt || exit 1

echo "== [${SECONDS}s] go test ./internal/node (2 shards side by side, then the tests matching $SOLO on their own)"
# internal/node's tests drive whole Clients against real nodes, as the
# root's do, and wait on them as much: dealt the same way.
PAUSE_GROUPS="-$bgl -$bgs -$bgc" bash .ci/test-shards.sh 2 ./internal/node "$SOLO" .ci/root-test-times.txt || exit 1

echo "== [${SECONDS}s] go test the root module's other packages"
# shellcheck disable=SC2046
eval $GO test "$GOTEST" $($GO list ./... | grep -vx -e "$ROOT_PKG" -e "$ROOT_PKG/internal/node") || exit 1
await "$bgl" "$tmp/large.out"
for m in $LARGE; do
	echo "== [${SECONDS}s] go test $m"
	(cd "$m" && eval $GO test "$GOTEST" ./...) || exit 1
done
if [[ -n $VALKEY_CHAOS ]]; then
	# The chaos module's conditions again (the small modules prepared at
	# nice 19 beside it): the scenarios' liveness checks are bounds that
	# a loaded machine can miss.
	echo "== [${SECONDS}s] Valkey: go test chaos -run '^TestSuite\$' -chaos.scenario=$VALKEY_CHAOS"
	(cd chaos && export REDLOCK_SERVER=valkey-server && eval $GO test "$GOTEST" -run "'^TestSuite\$'" . -args -chaos.scenario="$VALKEY_CHAOS") || exit 1
fi
await "$bgs" "$tmp/small.out"
bg="$bgc"

# valkey_tests runs, against valkey-server (REDLOCK_SERVER, which
# internal/redisnode reads), the root module's internal packages whole
# and the root tests matching VALKEY_TESTS but not SOLO (those load the
# machine themselves, and run on their own). Every test binary is in
# the build cache by now: it only runs tests, beside the small modules'
# tests, which wait on timers and nodes for most of their time.
valkey_tests() {
	local names
	export REDLOCK_SERVER=valkey-server
	echo "== [${SECONDS}s] Valkey: go test the root module's internal packages"
	# shellcheck disable=SC2046
	eval $GO test "$GOTEST" $($GO list ./internal/...) || return 1
	names=$(eval $GO test "$GOTEST" -list "'^($VALKEY_TESTS)\$'" .) || {
		echo "$names"
		return 1
	}
	names=$(grep -E '^Test' <<<"$names" | grep -vE "${SOLO:-^\$}" | paste -sd'|')
	if [[ -z $names ]]; then
		echo "Valkey: no root test matches VALKEY_TESTS"
		return 1
	fi
	echo "== [${SECONDS}s] Valkey: go test . -run '^($names)\$'"
	eval $GO test "$GOTEST" -run "'^($names)\$'" . || return 1
}

if [[ -n $VALKEY_TESTS ]]; then
	echo "== [${SECONDS}s] go test, side by side: $SMALL, and the Valkey pass of the root module"
	valkey_tests >"$tmp/valkey.out" 2>&1 &
	vk=$!
else
	echo "== [${SECONDS}s] go test, side by side: $SMALL"
fi
# shellcheck disable=SC2086
bash .ci/test-parallel.sh $SMALL
rc=$?
if [[ -n $VALKEY_TESTS ]]; then
	wait "$vk" || rc=1
	echo "== Valkey: the root module"
	cat "$tmp/valkey.out"
fi
await "$bgc" "$tmp/staticcheck.out"
bg=
echo "== [${SECONDS}s] done"
exit $rc
