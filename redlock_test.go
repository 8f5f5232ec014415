package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

// TestKilledNodeWhileHeld: a holder keeps its lock through the loss of two
// of five nodes, and no contender wins while three still hold its token.
func TestKilledNodeWhileHeld(t *testing.T) {
	nodes, clients := cluster(t, 5)
	ctx := context.Background()
	k := key(t)
	holder := newClient(t, clients)
	l, err := holder.TryLock(ctx, k, 10*time.Second)
	require.NoError(t, err)

	require.NoError(t, nodes[0].Kill())
	require.NoError(t, nodes[1].Kill())

	contender := newClient(t, clients, redlock.WithNodeTimeout(500*time.Millisecond))
	_, err = contender.TryLock(ctx, k, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrContended)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Zero(t, qe.OK)
	for i, r := range qe.Nodes {
		if i < 2 { // killed: failed, or not yet failed when contention decided
			require.Contains(t, []string{"failed", "pending"}, r.Status, "%v", r)
		} else {
			require.Contains(t, []string{"taken", "pending"}, r.Status, "%v", r)
		}
		require.Equal(t, nodes[i].Addr(), r.Addr)
	}

	before := l.Validity()
	require.NoError(t, l.Extend(ctx, 20*time.Second))
	require.Greater(t, l.Validity(), before, "Extend recomputes validity from its own start")
	require.NoError(t, l.Unlock(ctx))
	for i := 2; i < 5; i++ {
		require.Empty(t, get(t, clients[i], k), "node %d keeps the key after Unlock", i)
	}
	l2, err := contender.TryLock(ctx, k, 10*time.Second)
	require.NoError(t, err, "after Unlock the three live nodes form a quorum")
	require.NoError(t, l2.Unlock(ctx))
}

// TestNoOverlap: many goroutines lock one key many times and hold it for
// a few milliseconds; no two are ever inside the critical section while
// their Validity is positive.
func TestNoOverlap(t *testing.T) {
	t.Parallel()
	_, clients := cluster(t, 5)
	k := key(t)
	const workers, iters = 8, 25
	lockers := make([]*redlock.Client, workers)
	for w := range lockers {
		lockers[w] = newClient(t, clients, redlock.WithRetryDelay(2*time.Millisecond))
	}
	var inside, maxInside atomic.Int64
	contend(t, workers, iters, 60*time.Second,
		func(ctx context.Context, w int) (*redlock.Lock, error) {
			return lockers[w].Lock(ctx, k, 5*time.Second)
		},
		func(int) (leave func()) {
			n := inside.Add(1)
			for {
				m := maxInside.Load()
				if n <= m || maxInside.CompareAndSwap(m, n) {
					break
				}
			}
			return func() { inside.Add(-1) }
		},
		func(err error) {
			// A loaded machine may time a release out on most nodes:
			// Unlock's documented ErrUnreachable, after which the key
			// expires with its TTL; exclusion is what this test checks.
			if !errors.Is(err, redlock.ErrUnreachable) {
				assert.NoError(t, err)
			}
		})
	require.Equal(t, int64(1), maxInside.Load(), "two holders overlapped")
}

// TestIdempotentAcquire: an attempt that finds its own token on a node
// counts that node and refreshes its TTL.
func TestIdempotentAcquire(t *testing.T) {
	t.Parallel()
	_, clients := cluster(t, 5)
	ctx := context.Background()
	c := newClient(t, clients)
	k := key(t)
	const tok = "0123456789abcdef0123456789abcdef"
	for _, cl := range clients[:2] {
		require.NoError(t, cl.Set(ctx, k, tok, time.Second).Err())
	}
	holdForeign(t, clients[2], k, time.Minute)
	holdForeign(t, clients[3], k, time.Minute)
	l, err := c.TryLock(ctx, k, 30*time.Second, redlock.WithToken(tok))
	require.NoError(t, err, "nodes 0, 1 (ours) and 4 (free) are a quorum")
	require.Equal(t, tok, l.Token())
	for _, cl := range clients[:2] {
		require.Greater(t, cl.PTTL(ctx, k).Val(), 10*time.Second, "our key's TTL was refreshed")
	}
	require.NoError(t, l.Unlock(ctx))
	require.Equal(t, foreignToken, get(t, clients[2], k))
}

// TestCancellation: a cancelled or expired ctx ends Lock's wait with an
// error matching both ErrNotObtained and the context's error.
func TestCancellation(t *testing.T) {
	_, clients := cluster(t, 3)
	c := newClient(t, clients)
	k := key(t)
	l, err := c.TryLock(context.Background(), k, 10*time.Second)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Unlock(context.Background())) }()

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err = c.Lock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe, "per-node outcomes of the last attempt")

	// Cancelled while it waits: at its first refused attempt.
	ctx, cancel = context.WithCancel(context.Background())
	waiting, refused := refusedOnce()
	go func() {
		select {
		case <-refused:
		case <-time.After(10 * time.Second):
			t.Error("Lock was not refused within 10s")
		}
		cancel()
	}()
	_, err = c.Lock(ctx, k, time.Second, waiting)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, context.Canceled)

	_, err = c.TryLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, context.Canceled)

	_, err = c.Lock(context.Background(), k, time.Second, redlock.WithMaxTries(3), redlock.WithRetryDelay(time.Millisecond))
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrContended)
	require.NotErrorIs(t, err, context.Canceled)
}

// TestUnlockWaitsForEveryReachableNode: Unlock returns at its quorum,
// and Close waits for the releases still in flight: once Close returns,
// a node that was stopped during the Unlock and resumed 100ms later has
// released too, so that a process that exits after Close leaves nothing
// behind, though Unlock itself need not wait for the nodes beyond its
// quorum.
func TestUnlockWaitsForEveryReachableNode(t *testing.T) {
	nodes, clients := cluster(t, 5)
	rl, err := redlock.New(clients, redlock.WithNodeTimeout(testNodeTimeout))
	require.NoError(t, err)
	k := key(t)
	l := tryLock(t, rl, k, 10*time.Second)
	require.NoError(t, nodes[4].Pause())
	resumed := make(chan error, 1)
	time.AfterFunc(100*time.Millisecond, func() { resumed <- nodes[4].Resume() })
	require.NoError(t, l.Unlock(context.Background()))
	require.NoError(t, rl.Close())
	require.NoError(t, <-resumed)
	for i, c := range clients {
		require.Empty(t, get(t, c, k), "node %d still holds the key when Close returned", i+1)
	}
}

// TestCloseBounded: Close returns within its bound even when a stopped
// node holds a release of a go-redis client with no read timeout (which
// honours no context deadline either). The stuck request's goroutine
// ends once the node resumes.
func TestCloseBounded(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	clients := unboundedClients(t, nodes)
	rl, err := redlock.New(clients, redlock.WithNodeTimeout(testNodeTimeout))
	require.NoError(t, err)
	k := key(t)
	l := tryLock(t, rl, k, 10*time.Second)
	require.NoError(t, nodes[2].Pause())
	t.Cleanup(func() { _ = nodes[2].Resume() })
	require.NoError(t, l.Unlock(context.Background()))
	start := time.Now()
	require.NoError(t, rl.Close())
	took := time.Since(start)
	require.Less(t, took, 3*time.Second, "want Close bounded (about 850ms) with a stopped node and no read timeout, took %v", took)
	require.NoError(t, nodes[2].Resume())
	eventually(t, 5*time.Second, func() bool { return get(t, clients[2], k) == "" },
		"want the stuck release to land once node 3 resumes")
}

// TestCloseGivesConnectionsBack: once Close returns, no connection of
// the go-redis pools is still held by the Client (the nodes' leaders and
// the one-node direct path hold one each), so a caller that closes its
// go-redis clients next closes no connection under us, which go-redis
// logs as "Unexpected conn state changed by hook to CLOSED". On one node
// (the direct path) and on three (pipelined leaders), after sequential
// and concurrent traffic.
func TestCloseGivesConnectionsBack(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprint(n, " nodes"), func(t *testing.T) {
			_, clients := cluster(t, n)
			log := new(dialLog)
			redis.SetLogger(log)
			t.Cleanup(func() { redis.SetLogger(quietLogger{}) })
			ctx := context.Background()
			for round := range 3 {
				rl, err := redlock.New(clients)
				require.NoError(t, err)
				var g errgroup.Group
				for w := range 16 {
					g.Go(func() error {
						for i := range 50 {
							l, err := rl.TryLock(ctx, fmt.Sprintf("%s-%d-%d-%d", key(t), round, w, i), 10*time.Second)
							if err != nil {
								return err
							}
							if err := l.Unlock(ctx); err != nil {
								return err
							}
						}
						return nil
					})
				}
				require.NoError(t, g.Wait())
				l, err := rl.TryLock(ctx, key(t), 10*time.Second) // a last one alone: the direct path on one node
				require.NoError(t, err)
				require.NoError(t, l.Unlock(ctx))
				require.NoError(t, rl.Close())
				for i, c := range clients {
					st := c.PoolStats()
					require.Equal(t, st.TotalConns, st.IdleConns,
						"round %d: want every connection of node %d's pool idle once Close returned, got %d of %d in use", round, i+1, st.TotalConns-st.IdleConns, st.TotalConns)
				}
			}
			for _, c := range clients {
				require.NoError(t, c.Close())
			}
			require.NotContains(t, log.String(), "Unexpected conn", "want no connection closed under the Client")
		})
	}
}

// TestCloseBoundedWithPausedNode: Close with releases in flight and queued
// for a paused node returns within its bound, and a second Close and
// Unlock after Close neither hang nor panic.
func TestCloseBoundedWithPausedNode(t *testing.T) {
	nodes, clients := cluster(t, 3)
	rl, err := redlock.New(clients, redlock.WithNodeTimeout(50*time.Millisecond))
	require.NoError(t, err)
	ctx := context.Background()
	var locks []*redlock.Lock
	for i := 0; i < 20; i++ {
		l, err := rl.TryLock(ctx, fmt.Sprintf("%s-%d", key(t), i), 10*time.Second)
		require.NoError(t, err)
		locks = append(locks, l)
	}
	require.NoError(t, nodes[2].Pause())
	defer func() { _ = nodes[2].Resume() }()
	var wg sync.WaitGroup
	for _, l := range locks {
		wg.Go(func() {
			_ = l.Unlock(ctx)
		})
	}
	wg.Wait()
	start := time.Now()
	var closers sync.WaitGroup
	for i := 0; i < 4; i++ {
		closers.Go(func() {
			within(t, 2*time.Second, "Close", func() { _ = rl.Close() })
		})
	}
	// Acquisitions racing Close.
	for i := 0; i < 10; i++ {
		closers.Go(func() {
			l, err := rl.TryLock(ctx, key(t), time.Second)
			if err == nil {
				_ = l.Unlock(ctx)
			}
		})
	}
	closers.Wait()
	t.Logf("Close took %v", time.Since(start))
	_, err = rl.TryLock(ctx, key(t), time.Second)
	require.ErrorIs(t, err, redlock.ErrClosed)
	require.NoError(t, nodes[2].Resume())
}

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
// Unlock on 5 nodes: a permit needs floor(3*5/4)+1 = 4 of them.
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
			wg.Go(func() {
				if err := f(c); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
				}
			})
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
