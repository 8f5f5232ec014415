GO ?= go

.PHONY: help redis valkey test lint vet fmt-check staticcheck apicount released-imports

# `make` alone lists the targets; it installs and runs nothing.
.DEFAULT_GOAL := help
help:
	@echo 'Targets (see the comment above each in the Makefile):'
	@echo '  make demo       build bin/redlock-lab and run its demo: 5 local nodes, a node killed mid-lock, report/demo/index.html'
	@echo '  make test       vet, gofmt check, race tests of every module with the short chaos pass (several minutes)'
	@echo '  make lint       go vet, staticcheck and gofmt -l of every module, and the root package'"'"'s exported identifiers (at most API_LIMIT)'
	@echo '  make cli        build the lean production CLI (run, status) into bin/redlock'
	@echo '  make lab        build redlock-lab (demo, chaos) into bin/redlock-lab'
	@echo '  make bench      peer benchmarks (redsync, redislock) on 5 local nodes, bench/results/latest.json'
	@echo '  make hold       hold 100 000 auto-extended locks on one client for 60s (HOLD_FLAGS=...)'
	@echo '  make chaos      the long chaos suite, report/chaos/ (CHAOS_FLAGS=...)'
	@echo '  make fuzz       every fuzz target for FUZZTIME (default 15s)'
	@echo '  make soak       the soak and stress tests for SOAK (default 10m)'
	@echo '  make redis      install redis-server if missing (apt-get); test, demo, bench, chaos, fuzz and soak do it first'
	@echo '  make valkey     install valkey-server if missing (apt-get, bookworm-backports); test does it first unless VALKEY=0'

# Make sure redis-server is available (installs it with apt-get if possible).
redis:
	bash .ci/ensure-redis.sh

# Make sure valkey-server is available (installs it with apt-get if
# possible; on Debian 12 from bookworm-backports, which it adds).
valkey:
	bash .ci/ensure-valkey.sh

# The Valkey pass of make test (.ci/test.sh): Redis 7 stays the main
# target, and a subset of the tests runs against valkey-server too
# (REDLOCK_SERVER=valkey-server, see internal/redisnode), chosen to fit
# the time budget (about 60 s of tests beside the small modules' and 30 s
# of chaos after the chaos module's; see docs/architecture.md): the
# internal packages whole (node provisioning, the scripts, the server's
# error texts), the root tests matching VALKEY_TESTS but not SOLO_TESTS
# (the lock, quorum subsets, the restart guard, the scripts' NOSCRIPT
# fallback, ACL refusals; the family: read locks, paths, semaphores;
# fencing; the election) and the chaos short pass's scenarios in
# VALKEY_CHAOS. VALKEY=0 skips it, and the install.
VALKEY ?= 1
VALKEY_TESTS = TestNoOverlap|TestKilledNodeWhileHeld|TestIdempotentAcquire|TestCancellation|TestNeverDeletesOthers|TestValidityAndExtend|TestExtendUnlockRace|TestConcurrentExtendNeverOverpromises|TestQuorumSubsets|TestCancelledWinLeavesNothing|TestAutoExtendOneWinner|TestRestartGuard|TestPipelineNoScriptInBatch|TestACL|TestKeyPrefixACL|TestReadWrite|TestRWHandoff|TestWriterMarkEnds|TestWriterMarkKeysAndFencing|TestPath(Conflicts|KeyAndRelease|Invalid|Handoff|ExpiredDescendantStopsBlocking|sOfAnyShapeConflictWithRelatives)|TestSemaphore.*|TestFamily.*|TestForeignValue.*|TestFence(SkewedCounters|MultiKey|RaiseRoundNeedsQuorum)|TestFencedSet|TestElection.*|TestCampaign.*|TestObserve.*|TestProclaimWaitsForItsAcquire|TestResign.*|TestLeaderIgnoresFailedProclaim
VALKEY_CHAOS = baseline,kill-minority,restart-guard,path-locks,read-write,semaphore,election

# Every module of the repository, each with its own go.mod (the root is
# the library alone; see README "Modules"). bench/ is apart: `make bench`.
# Each module's go test ./... covers its commands too: chaos's covers
# chaos/cmd/redlock-lab.
LARGE_MODULES = . chaos
SMALL_MODULES = cmd/redlock extra/redlockotel extra/redlockprom extra/redlockgocron extra/redlockcron
MODULES = $(LARGE_MODULES) $(SMALL_MODULES)
GOTEST = -race -count=1 -p 1 -timeout 14m

# staticcheck (honnef.co/go/tools) at a fixed version from the Go module
# proxy, built once into bin/ and run in every module, bench/ too, by
# make lint and make test.
STATICCHECK_VERSION = v0.8.2
STATICCHECK = $(CURDIR)/bin/staticcheck-$(STATICCHECK_VERSION)
STATICCHECK_PKG = honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# make test runs .ci/test.sh, which says how and why at its top: every
# module vetted with -race (so that vet and the tests build each
# dependency once), the root package's tests as 2 shards side by side
# (.ci/test-shards.sh) while the other modules are vetted and built at
# low priority, then the chaos module's tests one binary at a time (-p 1:
# its latency checks and the stress test must not run beside each
# other), then the small modules side by side (.ci/test-parallel.sh).
ROOT_PKG = github.com/seed543a70bd/redlock
# The root package's tests that load the machine themselves run on their
# own, after the shards (see .ci/test-shards.sh).
SOLO_TESTS = Burst|Many|Storm|UnderLoad|Churn|SilentNode
test: redis $(if $(filter 1,$(VALKEY)),valkey) fmt-check
	@GO='$(GO)' GOTEST='$(GOTEST)' ROOT_PKG='$(ROOT_PKG)' SOLO='$(SOLO_TESTS)' \
		LARGE='$(filter-out .,$(LARGE_MODULES))' SMALL='$(SMALL_MODULES)' \
		VALKEY_TESTS='$(if $(filter 1,$(VALKEY)),$(VALKEY_TESTS))' VALKEY_CHAOS='$(if $(filter 1,$(VALKEY)),$(VALKEY_CHAOS))' \
		STATICCHECK='$(STATICCHECK)' STATICCHECK_PKG='$(STATICCHECK_PKG)' CHECKED='$(MODULES) bench' \
		bash .ci/test.sh

lint: vet fmt-check staticcheck apicount released-imports

vet:
	@set -e; for m in $(MODULES) bench; do (cd $$m && $(GO) vet ./...); done

$(STATICCHECK):
	GO='$(GO)' bash .ci/install-staticcheck.sh $@ $(STATICCHECK_PKG)
staticcheck: $(STATICCHECK)
	@STATICCHECK='$(STATICCHECK)' bash .ci/staticcheck.sh $(MODULES) bench

# The released modules (cmd/redlock, extra/*) import no internal/ package
# of the root module: once the modules are tagged apart, another module's
# internals are no contract. (The chaos lab and bench/ may.)
released-imports:
	@out=$$(grep -rn --include='*.go' '"$(ROOT_PKG)/internal/' cmd extra); \
		if [ -n "$$out" ]; then echo "released modules import the root module's internal packages:"; echo "$$out"; exit 1; fi

# The root package's exported identifiers (types, functions, methods of
# exported types, variables and constants), counted by
# internal/tools/apicount: the API stays small enough to take in at a
# glance. Fails above API_LIMIT.
API_LIMIT ?= 90
apicount:
	@$(GO) run ./internal/tools/apicount -limit $(API_LIMIT) .

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# Peer benchmarks: bench/ is a separate module, so that the peers it
# measures, redsync and redislock, never become dependencies of the
# library, nor does toxiproxy (like chaos/ and cmd/redlock, which have
# modules of their own too). Starts its own 5 redis-server nodes, prints a markdown
# table and writes bench/results/latest.json; about 75 s on 2 cores.
# Go-level benchmarks of the core paths: go test -run '^$$' -bench . -benchmem
.PHONY: bench
bench: redis
	cd bench && $(GO) run -mod=mod ./cmd/redlock-bench -json results/latest.json

# Many locks on one client (README "Holding many locks"): 5 local nodes,
# 100 000 locks taken from 256 goroutines and auto-extended, TTL 10s,
# held for 60s; prints the take rate, goroutines, heap per lock, client
# CPU and locks lost. About 70 s. HOLD_FLAGS="-locks 20000 -ttl 2s -hold 12s".
HOLD_FLAGS ?=
.PHONY: hold
hold: redis
	cd bench && $(GO) run -mod=mod ./cmd/redlock-hold $(HOLD_FLAGS)

# The README's first command: 5 local redis-server nodes, contending workers,
# a node killed and restarted mid-lock, a summary and report/demo/index.html.
.PHONY: demo
demo: redis lab
	./bin/redlock-lab demo

# The lean CLI for production hosts (run, status), built from its own
# module into bin/redlock: go-redis and the library, no Docker, toxiproxy
# or Prometheus client (TestLeanBinaryLinksNoLabModule checks it).
.PHONY: cli
cli:
	$(GO) build -C cmd/redlock -o $(CURDIR)/bin/redlock .

# redlock-lab, the demo and the chaos suite, built from the chaos module
# into bin/redlock-lab.
.PHONY: lab
lab:
	$(GO) build -C chaos -o $(CURDIR)/bin/redlock-lab ./cmd/redlock-lab

# Fuzzing: each target for FUZZTIME, one at a time (go test -fuzz takes one
# target per run). Their seed corpora run as ordinary tests in `make test`;
# a failure the fuzzer finds is saved under testdata/fuzz/ and so joins
# them.
FUZZTIME ?= 15s
FUZZ_ROOT = FuzzOptions FuzzKeys FuzzURL FuzzReply
FUZZ_CLI = FuzzParseNodes FuzzRedact
.PHONY: fuzz
fuzz: redis
	@set -e; for f in $(FUZZ_ROOT); do echo "== $$f"; $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) . ; done
	@set -e; for f in $(FUZZ_CLI); do echo "== $$f"; (cd cmd/redlock && $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) .) ; done

# Soak: 64 clients on 4 keys over 5 nodes for SOAK while nodes are killed
# (and restarted after the TTL) or paused; checks every critical section
# with the chaos checker and reports acquisitions per second, goroutines
# and heap at start and end. Then TestStress for SOAK too: random mixed
# operations, cancellations and faults from a seed it prints (replay one
# with -stress.seed N). 30-second versions of both run in `make test`.
# SOAK_TIMEOUT covers both runs.
SOAK ?= 10m
SOAK_TIMEOUT ?= 30m
.PHONY: soak
soak: redis
	cd chaos && $(GO) test -race -count=1 -run '^(TestSoak|TestStress)$$' -timeout $(SOAK_TIMEOUT) -v ./stress -args -soak=$(SOAK) -stress=$(SOAK)

# Chaos: the long chaos suite (every scenario, 20s each by default; set
# CHAOS_FLAGS, e.g. --duration 1m or --scenario pause,skew-beyond) on local
# redis-server nodes, with an HTML timeline per scenario in report/chaos/.
# The short pass runs in `make test` (the chaos module's go test ./...).
CHAOS_FLAGS ?=
.PHONY: chaos
chaos: redis lab
	./bin/redlock-lab chaos --report report/chaos --json report/chaos/results.json $(CHAOS_FLAGS)
