package redlockprom_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockprom"
	"github.com/seed543a70bd/redlock/redlocktest"
)

// setup returns a registered Collector and a Client over n real nodes
// that reports to it.
func setup(t *testing.T, n int, opts ...redlock.Option) (*redlockprom.Collector, *redlock.Client, []*redlocktest.Node) {
	t.Helper()
	m := redlockprom.New()
	if err := prometheus.NewPedanticRegistry().Register(m); err != nil {
		t.Fatalf("Register: want no error, got %v", err)
	}
	nodes := redlocktest.Start(t, n)
	locker, err := redlock.New(clients(t, nodes), append([]redlock.Option{redlock.WithObserver(m.Observe)}, opts...)...)
	if err != nil {
		t.Fatalf("redlock.New: want no error, got %v", err)
	}
	t.Cleanup(func() { _ = locker.Close() })
	return m, locker, nodes
}

var keySeq atomic.Int64

func key(t *testing.T) string { return fmt.Sprintf("%s:%d", t.Name(), keySeq.Add(1)) }

// gathered returns the series of name with the given label values (the
// first, when several match), or nil.
func gathered(t *testing.T, c prometheus.Collector, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	ms := gather(t, c, name, labels)
	if len(ms) == 0 {
		return nil
	}
	return ms[0]
}

// gather returns the series of name whose labels include labels.
func gather(t *testing.T, c prometheus.Collector, name string, labels map[string]string) []*dto.Metric {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: want no error, got %v", err)
	}
	var out []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metrics
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// sampleCount returns the sample count of histogram name's series with
// the given label values, or 0.
func sampleCount(t *testing.T, c prometheus.Collector, name string, labels map[string]string) uint64 {
	t.Helper()
	var n uint64
	for _, m := range gather(t, c, name, labels) {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

const counterHead = `# HELP redlock_acquire_attempts_total Lock acquisition attempts (lock rounds), by outcome.
# TYPE redlock_acquire_attempts_total counter
redlock_acquire_attempts_total{reason="cancelled"} 0
redlock_acquire_attempts_total{reason="contended"} %d
redlock_acquire_attempts_total{reason="expired"} 0
redlock_acquire_attempts_total{reason="not_held"} 0
redlock_acquire_attempts_total{reason="unreachable"} %d
redlock_acquire_attempts_total{reason="won"} %d
# HELP redlock_extensions_total Successful lock extensions (Extend or auto-extension).
# TYPE redlock_extensions_total counter
redlock_extensions_total %d
# HELP redlock_locks_held Locks acquired and not yet released or lost.
# TYPE redlock_locks_held gauge
redlock_locks_held %d
# HELP redlock_locks_lost_total Locks found lost while held.
# TYPE redlock_locks_lost_total counter
redlock_locks_lost_total %d
# HELP redlock_locks_released_total Locks ended by Unlock.
# TYPE redlock_locks_released_total counter
redlock_locks_released_total %d
`

var counterNames = []string{"redlock_acquire_attempts_total", "redlock_extensions_total", "redlock_locks_held", "redlock_locks_lost_total", "redlock_locks_released_total"}

// checkCounters compares the counters and the gauge with the text format.
func checkCounters(t *testing.T, m *redlockprom.Collector, contended, unreachable, won, extensions, held, lost, released int) {
	t.Helper()
	want := fmt.Sprintf(counterHead, contended, unreachable, won, extensions, held, lost, released)
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), counterNames...); err != nil {
		t.Error(err)
	}
}

func TestLockExtendUnlock(t *testing.T) {
	m, locker, _ := setup(t, 3)
	ctx := context.Background()
	k := key(t)

	checkCounters(t, m, 0, 0, 0, 0, 0, 0, 0)
	l, err := locker.TryLock(ctx, k, 10*time.Second)
	if err != nil {
		t.Fatalf("TryLock: want no error, got %v", err)
	}
	checkCounters(t, m, 0, 0, 1, 0, 1, 0, 0)
	if _, err := locker.TryLock(ctx, k, 10*time.Second); !errors.Is(err, redlock.ErrContended) {
		t.Fatalf("second TryLock: want ErrContended, got %v", err)
	}
	if err := l.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("Extend: want no error, got %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: want no error, got %v", err)
	}
	checkCounters(t, m, 1, 0, 1, 1, 0, 0, 1)

	for _, c := range []struct {
		labels map[string]string
		want   uint64
	}{
		{map[string]string{"op": "lock", "reason": "won"}, 1},
		{map[string]string{"op": "lock", "reason": "contended"}, 1},
		{map[string]string{"op": "extend", "reason": "won"}, 1},
		{map[string]string{"op": "unlock", "reason": "won"}, 1},
	} {
		if got := sampleCount(t, m, "redlock_round_duration_seconds", c.labels); got != c.want {
			t.Errorf("redlock_round_duration_seconds%v count: want %d, got %d", c.labels, c.want, got)
		}
	}
	if got := sampleCount(t, m, "redlock_lock_hold_duration_seconds", nil); got != 1 {
		t.Errorf("redlock_lock_hold_duration_seconds count: want 1, got %d", got)
	}
	// A quorum's replies per round are observed before the round.
	if got := sampleCount(t, m, "redlock_node_request_duration_seconds", nil); got < 8 {
		t.Errorf("redlock_node_request_duration_seconds count: want at least 8, got %d", got)
	}
	// Only op "lock" is exact: on fresh nodes the Extend's last reply
	// can be NOSCRIPT when it shares a pipeline with the Unlock that
	// follows (internal/node/pipeline.go does not rerun it after a later request of the
	// same token), which counts as a node error of op "extend".
	if got := gather(t, m, "redlock_node_errors_total", map[string]string{"op": "lock"}); len(got) != 0 {
		t.Errorf("redlock_node_errors_total{op=lock} series: want 0, got %d", len(got))
	}
	problems, err := testutil.CollectAndLint(m)
	if err != nil {
		t.Fatalf("CollectAndLint: want no error, got %v", err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestUnreachableAndLost(t *testing.T) {
	m, locker, nodes := setup(t, 3)
	ctx := context.Background()

	l, err := locker.TryLock(ctx, key(t), 200*time.Millisecond)
	if err != nil {
		t.Fatalf("TryLock: want no error, got %v", err)
	}
	<-l.Done() // never extended: lost at the loss margin
	if !errors.Is(l.Err(), redlock.ErrLockLost) {
		t.Fatalf("Err: want ErrLockLost, got %v", l.Err())
	}
	_ = l.Unlock(ctx) // the end was reported once, when lost

	for _, nd := range nodes[1:] {
		if err := nd.Kill(); err != nil {
			t.Fatalf("Kill: want no error, got %v", err)
		}
	}
	if _, err := locker.TryLock(ctx, key(t), 10*time.Second); !errors.Is(err, redlock.ErrUnreachable) {
		t.Fatalf("TryLock with 2 of 3 nodes down: want ErrUnreachable, got %v", err)
	}
	checkCounters(t, m, 0, 1, 1, 0, 0, 1, 0)
	for _, node := range []string{"1", "2"} {
		labels := map[string]string{"op": "lock", "node": node}
		if got := gathered(t, m, "redlock_node_errors_total", labels).GetCounter().GetValue(); got != 1 {
			t.Errorf("redlock_node_errors_total%v: want 1, got %v", labels, got)
		}
	}
	// Node 0 answered; the clean-up releases (op "unlock") may still be
	// under way, so only op "lock" is exact.
	if got := gathered(t, m, "redlock_node_errors_total", map[string]string{"op": "lock", "node": "0"}); got != nil {
		t.Errorf("redlock_node_errors_total{node=0,op=lock}: want no series, got %v", got)
	}
}

// TestConcurrentLocks: many goroutines on a few keys, -race clean, and
// the counters add up.
func TestConcurrentLocks(t *testing.T) {
	m, locker, _ := setup(t, 3, redlock.WithNodeTimeout(time.Second))
	keys := []string{key(t), key(t), key(t)}
	var tries, wins, busy atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				l, err := locker.TryLock(context.Background(), keys[(w+i)%len(keys)], 5*time.Second)
				tries.Add(1)
				switch {
				case err == nil:
					wins.Add(1)
					if err := l.Unlock(context.Background()); err != nil {
						t.Errorf("Unlock: want no error, got %v", err)
					}
				case errors.Is(err, redlock.ErrContended):
					busy.Add(1)
				default:
					t.Errorf("TryLock: want nil or ErrContended, got %v", err)
				}
			}
		}()
	}
	wg.Wait()
	checkCounters(t, m, int(busy.Load()), 0, int(wins.Load()), 0, 0, 0, int(wins.Load()))
	if got := sampleCount(t, m, "redlock_round_duration_seconds", map[string]string{"op": "lock"}); got != uint64(tries.Load()) {
		t.Errorf("lock rounds: want %d, got %d", tries.Load(), got)
	}
}

func TestOptionsAndZeroValues(t *testing.T) {
	m := redlockprom.New(redlockprom.WithNamespace("billing"), redlockprom.WithConstLabels(prometheus.Labels{"service": "api"}), redlockprom.WithBuckets([]float64{0.01, 1}))
	m.Observe(redlock.Event{Kind: "round", Op: "lock", Reason: "won", Duration: 5 * time.Millisecond})
	want := `# HELP billing_redlock_locks_held Locks acquired and not yet released or lost.
# TYPE billing_redlock_locks_held gauge
billing_redlock_locks_held{service="api"} 1
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "billing_redlock_locks_held"); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(m, "billing_redlock_round_duration_seconds"); got != 1 {
		t.Errorf("billing_redlock_round_duration_seconds series: want 1, got %d", got)
	}

	// Unsorted, duplicate and NaN boundaries must not panic on a node's
	// goroutine at the first observation.
	odd := redlockprom.New(redlockprom.WithBuckets([]float64{1, 0.01, math.NaN(), 1}))
	odd.Observe(redlock.Event{Kind: "node", Op: "lock", Latency: time.Millisecond})
	odd.Observe(redlock.Event{Kind: "round", Op: "lock", Reason: "won"})
	odd.Observe(redlock.Event{Kind: "lock"})
	if got := testutil.CollectAndCount(odd, "redlock_node_request_duration_seconds"); got != 1 {
		t.Errorf("redlock_node_request_duration_seconds series with odd buckets: want 1, got %d", got)
	}

	if err := prometheus.NewRegistry().Register(redlockprom.New(redlockprom.WithConstLabels(prometheus.Labels{"op": "x"}))); err == nil {
		t.Errorf("Register with a const label named op: want an error, got nil")
	}

	var zero redlockprom.Collector
	var nilC *redlockprom.Collector
	for _, c := range []*redlockprom.Collector{&zero, nilC} {
		c.Observe(redlock.Event{Kind: "node", Status: "failed"})
		c.Observe(redlock.Event{Kind: "round", Op: "lock"})
		c.Observe(redlock.Event{Kind: "lock"})
		if got := testutil.CollectAndCount(c); got != 0 {
			t.Errorf("metrics of a zero Collector: want 0, got %d", got)
		}
	}
	// Events with nothing set do not panic.
	m.Observe(redlock.Event{Kind: "node"})
	m.Observe(redlock.Event{Kind: "round"})
	m.Observe(redlock.Event{Kind: "lock"})
}

// clients returns one go-redis client per node, with the library's
// settings for lock nodes (redlock.NewClients), closed when t ends.
func clients(t testing.TB, nodes []*redlocktest.Node) []redis.UniversalClient {
	t.Helper()
	cs, err := redlock.NewClients(redlocktest.URLs(nodes)...)
	if err != nil {
		t.Fatalf("redlock.NewClients: want no error, got %v", err)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			_ = c.Close()
		}
	})
	return cs
}
