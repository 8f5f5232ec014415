package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// Go-level benchmarks of one uncontended lock+unlock cycle on one node,
// ours against the single-node peers, for profiling where our cycle's
// time goes (bench/PROFILE-NOTES.md):
//
//	go test -run '^$' -bench OneNode -benchmem -cpuprofile cpu.prof ./cmd/redlock-bench
//	go tool pprof -top redlock-bench.test cpu.prof
//
// The peer comparison with its targets is the command itself: make bench.

// oneNodePID starts one redis-server node for b and returns a go-redis
// client of default options and the node's process ID; b.Cleanup closes
// both.
func oneNodePID(b *testing.B) (redis.UniversalClient, int) {
	b.Helper()
	nodes, err := redisnode.StartN(1, redisnode.Options{})
	if err != nil {
		b.Fatalf("starting redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: nodes[0].Addr()})
	b.Cleanup(func() {
		_ = c.Close()
		_ = nodes[0].Close()
	})
	return c, nodes[0].PID()
}

// oneNodeImpl starts one node and builds m's impl on it; it returns the
// impl and the node's process ID. b.Cleanup closes both.
func oneNodeImpl(b *testing.B, m maker) (impl, int) {
	b.Helper()
	c, pid := oneNodePID(b)
	im, err := m.new(m.name, []redis.UniversalClient{c})
	if err != nil {
		b.Fatal(err)
	}
	if im.closer != nil {
		b.Cleanup(im.closer)
	}
	return im, pid
}

// benchOneNode times cycles of the impl that m builds on one node, as
// benchImpl does.
func benchOneNode(b *testing.B, m maker) {
	im, _ := oneNodeImpl(b, m)
	benchImpl(b, im)
}

// benchImpl times cycles of im over 256 keys, after 200 untimed ones,
// and reports the median cycle as p50-µs and the failed cycles.
func benchImpl(b *testing.B, im impl) {
	ctx := context.Background()
	ks := keys(b.Name(), 256)
	for i := range 200 {
		if err := im.cycle(ctx, ks[i%len(ks)]); err != nil {
			b.Fatalf("warm-up: %v", err)
		}
	}
	lat := make([]time.Duration, 4096)
	n, errs := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		if err := im.cycle(ctx, ks[n%len(ks)]); err != nil {
			// rueidislock gives up an acquire after its TryNextAfter
			// (20ms): a stall of a loaded machine. Counted, not fatal.
			errs++
		}
		lat[n%len(lat)] = time.Since(t0)
		n++
	}
	b.ReportMetric(float64(errs), "errors")
	lat = lat[:min(n, len(lat))]
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2])/float64(time.Microsecond), "p50-µs")
	}
}

func BenchmarkOneNodeLockUnlock(b *testing.B) { benchOneNode(b, oursOne(implOurs1)) }

func BenchmarkOneNodeTryLockUnlock(b *testing.B) {
	benchOneNode(b, oursFrom(implOurs1, func(cs []redis.UniversalClient) (locker, error) {
		c, err := redlock.New(cs)
		return tryLocker{c}, err
	}))
}

func BenchmarkOneNodeRedislock(b *testing.B) { benchOneNode(b, redislockImpl(implRedislock)) }

func BenchmarkOneNodeRueidislock(b *testing.B) {
	benchOneNode(b, rueidislockImpl(implRueidis, false))
}

func BenchmarkOneNodeSetNXDel(b *testing.B) { benchOneNode(b, floorOne(implFloor1)) }

// tryLocker is a Client whose Lock is TryLock: one attempt, no waiting.
type tryLocker struct{ *redlock.Client }

func (t tryLocker) Lock(ctx context.Context, key string, ttl time.Duration, opts ...redlock.LockOption) (*redlock.Lock, error) {
	l, err := t.TryLock(ctx, key, ttl, opts...)
	if err != nil {
		return nil, fmt.Errorf("TryLock: %w", err)
	}
	return l, nil
}

// benchOneNodeParallel is the throughput scenario as a Go benchmark:
// 32 goroutines on keys of their own, cycles of the impl that m builds
// on one node. It reports the process's CPU per cycle (user + system;
// the node is another process) as cpu-µs/op and the node's as
// node-cpu-µs/op, so that profiles of the throughput path can be
// compared on a busy machine, where ops/s cannot; and the node's read
// system calls per cycle as node-reads/op (one read a batch: 0.125 is
// batches of 8 cycles, 16 requests).
func benchOneNodeParallel(b *testing.B, m maker) {
	im, pid := oneNodeImpl(b, m)
	ctx := context.Background()
	var seq atomic.Int64
	cpu0, node0 := processCPU(), nodesCPU([]int{pid})
	reads0 := readCalls(strconv.Itoa(pid))
	b.ResetTimer()
	b.SetParallelism(max(1, workers/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		ks := keys(fmt.Sprintf("%s:%d", b.Name(), seq.Add(1)), 16)
		for i := 0; pb.Next(); i++ {
			if err := im.cycle(ctx, ks[i%len(ks)]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(b.N) }
	b.ReportMetric(per(processCPU()-cpu0), "cpu-µs/op")
	b.ReportMetric(per(nodesCPU([]int{pid})-node0), "node-cpu-µs/op")
	if reads := readCalls(strconv.Itoa(pid)); reads0 >= 0 && reads >= 0 {
		b.ReportMetric(float64(reads-reads0)/float64(b.N), "node-reads/op")
	}
}

func BenchmarkOneNodeParallelOurs(b *testing.B) { benchOneNodeParallel(b, oursOne(implOurs1)) }

func BenchmarkOneNodeParallelRueidislock(b *testing.B) {
	benchOneNodeParallel(b, rueidislockImpl(implRueidis, false))
}

func BenchmarkOneNodeParallelRedislock(b *testing.B) {
	benchOneNodeParallel(b, redislockImpl(implRedislock))
}

func BenchmarkOneNodeSetNXEvalsha(b *testing.B) {
	benchOneNode(b, floorOneScript(implFloor1S))
}
