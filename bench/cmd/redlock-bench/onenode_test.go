package main

import (
	"context"
	"fmt"
	"slices"
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

// oneNode starts one redis-server node for b and returns a go-redis
// client of default options; b.Cleanup closes both.
func oneNode(b *testing.B) redis.UniversalClient {
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
	return c
}

// benchOneNode times cycles of the impl that m builds on one node, over
// 256 keys, after 200 untimed ones, and reports the median cycle as p50-µs.
func benchOneNode(b *testing.B, m maker) {
	c := oneNode(b)
	im, err := m.new(m.name, []redis.UniversalClient{c})
	if err != nil {
		b.Fatal(err)
	}
	if im.closer != nil {
		b.Cleanup(im.closer)
	}
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

func (t tryLocker) Lock(ctx context.Context, key string, ttl time.Duration, opts ...redlock.Option) (*redlock.Lock, error) {
	l, err := t.TryLock(ctx, key, ttl, opts...)
	if err != nil {
		return nil, fmt.Errorf("TryLock: %w", err)
	}
	return l, nil
}
