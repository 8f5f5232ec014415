// Package stress holds the long randomized tests of the library against
// real redis-server nodes with faults: TestStress (random mixed
// operations from a replayable seed, leader elections among them,
// checked by the chaos checker) and
// TestSoak (many clients over minutes). Both run for 30 seconds in
// `make test`; `make soak` runs them long. TestStress's operation
// families that check a lock's life beyond exclusion (resumed
// auto-extension, bursts, locks lost on a quorum, the restart guard over
// WithTimeout clones, foreign values at lock keys) can run one at a time
// with -stress.ops (go test ./stress -args -stress.ops=burst). The
// package has no code of its own: it lives in the chaos module so that
// the library's module needs neither toxiproxy nor Docker.
package stress
