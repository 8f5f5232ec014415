package redlock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// Go-level benchmarks of the core paths against real loopback nodes:
//
//	go test -run '^$' -bench . -benchmem
//
// The peer comparison (redsync, redislock, a slow node, hand-off,
// throughput) is the separate module in bench/: make bench.

const benchTTL = 10 * time.Second

// benchClients starts n redis-server nodes for b and returns one go-redis
// client each, with default options; b.Cleanup closes both.
func benchClients(b *testing.B, n int) []redis.UniversalClient {
	b.Helper()
	nodes, err := redisnode.StartN(n, redisnode.Options{})
	if err != nil {
		b.Fatalf("starting %d redis-server nodes: %v", n, err)
	}
	clients := make([]redis.UniversalClient, n)
	for i, nd := range nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: nd.Addr()})
	}
	b.Cleanup(func() {
		for i := range nodes {
			_ = clients[i].Close()
			if err := nodes[i].Close(); err != nil {
				b.Errorf("closing %s: %v", nodes[i].Addr(), err)
			}
		}
	})
	return clients
}

// benchKeys returns n distinct keys, built before the timer starts so that
// their formatting is not counted.
func benchKeys(b *testing.B, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%d", b.Name(), i)
	}
	return keys
}

// benchWarm runs f a few times so that connections are dialled, scripts loaded
// and nodes identified before the timer starts.
func benchWarm(b *testing.B, keys []string, f func(key string) error) {
	b.Helper()
	for i := range 50 {
		if err := f(keys[i%len(keys)]); err != nil {
			b.Fatalf("warm-up: %v", err)
		}
	}
	b.ResetTimer()
}

// benchLoop runs cycle on keys in turn while b.Loop says so, and reports
// the median cycle time (of the last 4096) as p50-µs.
func benchLoop(b *testing.B, keys []string, cycle func(key string) error) {
	b.Helper()
	lat := make([]time.Duration, 4096) // before the timed loop
	n := 0
	for ; b.Loop(); n++ {
		start := time.Now()
		if err := cycle(keys[n%len(keys)]); err != nil {
			b.Fatal(err)
		}
		lat[n%len(lat)] = time.Since(start)
	}
	lat = lat[:min(n, len(lat))]
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2])/float64(time.Microsecond), "p50-µs")
}

// BenchmarkTryLockUnlock is one uncontended TryLock + Unlock on 5 nodes.
func BenchmarkTryLockUnlock(b *testing.B) {
	benchCycles(b, "", func(ctx context.Context, c *redlock.Client, key string) (*redlock.Lock, error) {
		return c.TryLock(ctx, key, benchTTL)
	})
}

// BenchmarkTryLockPathUnlock is one uncontended TryLockPath + Unlock on 5
// nodes, on a path of depth 3 ("<key>/a/b"): 3 holder keys read, an
// intention record written on each of the 2 ancestors.
func BenchmarkTryLockPathUnlock(b *testing.B) {
	benchCycles(b, "/a/b", func(ctx context.Context, c *redlock.Client, path string) (*redlock.Lock, error) {
		return c.TryLockPath(ctx, path, benchTTL)
	})
}

// BenchmarkTryAcquireUnlock is one uncontended TryAcquire (limit 3) +
// Unlock on 5 nodes: a permit needs SemaphoreQuorum(5, 3) = 4 of them.
func BenchmarkTryAcquireUnlock(b *testing.B) {
	benchCycles(b, "", func(ctx context.Context, c *redlock.Client, key string) (*redlock.Lock, error) {
		return c.TryAcquire(ctx, key, 3, benchTTL)
	})
}

// benchCycles measures uncontended acquire + Unlock cycles on 5 nodes,
// over 256 keys (each with suffix), acquiring with acquire.
func benchCycles(b *testing.B, suffix string, acquire func(context.Context, *redlock.Client, string) (*redlock.Lock, error)) {
	c, err := redlock.New(benchClients(b, 5))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	keys := benchKeys(b, 256)
	for i := range keys {
		keys[i] += suffix
	}
	cycle := func(key string) error {
		l, err := acquire(ctx, c, key)
		if err != nil {
			return err
		}
		return l.Unlock(ctx)
	}
	b.ReportAllocs()
	benchWarm(b, keys, cycle)
	benchLoop(b, keys, cycle)
}

// BenchmarkTryLockUnlockParallel is TryLockUnlock from GOMAXPROCS*8
// goroutines on distinct keys: the throughput path.
func BenchmarkTryLockUnlockParallel(b *testing.B) {
	c, err := redlock.New(benchClients(b, 5))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var seq sync.Mutex
	next := 0
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		seq.Lock()
		id := next
		next++
		seq.Unlock()
		keys := make([]string, 16)
		for i := range keys {
			keys[i] = fmt.Sprintf("%s-%d-%d", b.Name(), id, i)
		}
		for i := 0; pb.Next(); i++ {
			l, err := c.TryLock(ctx, keys[i%len(keys)], benchTTL)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Unlock(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkSetNXDelOneNode is the raw floor: SET NX PX then DEL on one node.
func BenchmarkSetNXDelOneNode(b *testing.B) {
	c := benchClients(b, 1)[0]
	ctx := context.Background()
	keys := benchKeys(b, 256)
	cycle := func(key string) error {
		if err := c.SetNX(ctx, key, "bench-token", benchTTL).Err(); err != nil {
			return err
		}
		return c.Del(ctx, key).Err()
	}
	b.ReportAllocs()
	benchWarm(b, keys, cycle)
	benchLoop(b, keys, cycle)
}

// BenchmarkSetNXDelFiveParallel is the raw floor on 5 nodes: SET NX PX on
// all in parallel, wait for all, then DEL on all in parallel, wait for all.
func BenchmarkSetNXDelFiveParallel(b *testing.B) {
	clients := benchClients(b, 5)
	ctx := context.Background()
	keys := benchKeys(b, 256)
	each := func(f func(c redis.UniversalClient) error) error {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var first error
		for _, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := f(c); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return first
	}
	cycle := func(key string) error {
		if err := each(func(c redis.UniversalClient) error {
			return c.SetNX(ctx, key, "bench-token", benchTTL).Err()
		}); err != nil {
			return err
		}
		return each(func(c redis.UniversalClient) error { return c.Del(ctx, key).Err() })
	}
	b.ReportAllocs()
	benchWarm(b, keys, cycle)
	benchLoop(b, keys, cycle)
}
