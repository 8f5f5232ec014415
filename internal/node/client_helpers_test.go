package node_test

// The client tests' helpers (a copy of the root's in-package helpers, for the
// tests of *_client_test.go, which drive the root's Client and so are an
// external test package, node_test: the root imports this package):
// go-redis clients of test nodes, Clients
// on them, background load, and the checks that a test left nothing
// behind (keys, Watch goroutines, borrowed connections, held slots).

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
)

// poll calls cond every interval until it holds (true) or wait passes
// (false).
func poll(wait, interval time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(wait); !cond(); time.Sleep(interval) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// eventually polls cond every 5ms until it holds or wait passes.
func eventually(t *testing.T, wait time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	if !poll(wait, 5*time.Millisecond, cond) {
		t.Fatalf("after %v: "+format, append([]any{wait}, args...)...)
	}
}

// nodeClient is a go-redis client of nd with the test defaults (no
// retries, short timeouts) changed by mod, closed when the test ends.
func nodeClient(t *testing.T, nd *redisnode.Node, mod func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: nd.Addr(), Password: nd.Password(), MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond}
	if mod != nil {
		mod(o)
	}
	cl := redis.NewClient(o)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func nodeClients(t *testing.T, nodes []*redisnode.Node, mod func(*redis.Options)) []redis.UniversalClient {
	t.Helper()
	out := make([]redis.UniversalClient, len(nodes))
	for i, nd := range nodes {
		out[i] = nodeClient(t, nd, mod)
	}
	return out
}

// adminClients returns a plain go-redis client per node, for checks.
func adminClients(t *testing.T, nodes []*redisnode.Node) []redis.UniversalClient {
	t.Helper()
	return nodeClients(t, nodes, nil)
}

// newTestClient is New with a per-node timeout far above a reply's time on a
// loaded machine, closed when the test ends.
func newTestClient(t *testing.T, clients []redis.UniversalClient, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := redlock.New(clients, append([]redlock.Option{redlock.WithNodeTimeout(250 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newTestClients is n newTestClients sharing clients.
func newTestClients(t *testing.T, clients []redis.UniversalClient, n int, opts ...redlock.Option) []*redlock.Client {
	t.Helper()
	lcs := make([]*redlock.Client, n)
	for i := range lcs {
		lcs[i] = newTestClient(t, clients, opts...)
	}
	return lcs
}

// lockCycles runs workers goroutines of n TryLock+Unlock cycles on
// distinct keys and returns the errors.
func lockCycles(c *redlock.Client, name string, workers, n int) []error {
	ctx := context.Background()
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range n {
				l, err := c.TryLock(ctx, fmt.Sprintf("%s-%d-%d", name, w, i), 10*time.Second)
				if err == nil {
					err = l.Unlock(ctx)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errs
}

// loops is background load: goroutines that repeat their work until
// stop, which the test's end calls too, so that a test that fails early
// leaves none running.
type loops struct {
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	failed atomic.Int64 // lock cycles (cycles) that failed
}

func newLoops(t *testing.T) *loops {
	lp := &loops{done: make(chan struct{})}
	t.Cleanup(lp.stop)
	return lp
}

// run calls f(0), f(1), … on a goroutine of its own until stop.
func (lp *loops) run(f func(i int)) {
	lp.wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-lp.done:
				return
			default:
			}
			f(i)
		}
	})
}

// cycles runs workers goroutines of back-to-back TryLock+Unlock cycles
// on c, on keys prefix-<worker>-<n>, and counts the failed ones.
func (lp *loops) cycles(c *redlock.Client, prefix string, workers int) {
	ctx := context.Background()
	for w := range workers {
		lp.run(func(j int) {
			l, err := c.TryLock(ctx, fmt.Sprintf("%s-%d-%d", prefix, w, j), 5*time.Second)
			if err == nil {
				err = l.Unlock(ctx)
			}
			if err != nil {
				lp.failed.Add(1)
				time.Sleep(time.Millisecond)
			}
		})
	}
}

// stop ends the loops and waits for them.
func (lp *loops) stop() {
	lp.once.Do(func() { close(lp.done) })
	lp.wg.Wait()
}

// sampleMax calls f every millisecond until lp stops and keeps its
// largest value.
func sampleMax(lp *loops, f func() int32) *atomic.Int32 {
	var most atomic.Int32
	lp.run(func(int) {
		if v := f(); v > most.Load() {
			most.Store(v)
		}
		time.Sleep(time.Millisecond)
	})
	return &most
}

// killStorm closes the normal client connections of one node after the
// other (CLIENT KILL TYPE normal SKIPME yes: not the admin's own), every
// millisecond until lp stops, and counts the kills.
func killStorm(lp *loops, admins []redis.UniversalClient) *atomic.Int64 {
	var kills atomic.Int64
	lp.run(func(i int) {
		if admins[i%len(admins)].ClientKillByFilter(context.Background(), "TYPE", "normal", "SKIPME", "yes").Err() == nil {
			kills.Add(1)
		}
		time.Sleep(time.Millisecond) // pacing, not synchronization
	})
	return &kills
}

// pinger is a direct user of clients: it PINGs them in turn, every
// gap, until the returned stop is called, which reports the slowest
// PING and the first error.
func pinger(clients []redis.UniversalClient, gap time.Duration) (stop func() (time.Duration, error)) {
	ctx := context.Background()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var slowest time.Duration
	var first error
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			start := time.Now()
			if err := clients[i%len(clients)].Ping(ctx).Err(); err != nil && first == nil {
				first = err
			}
			slowest = max(slowest, time.Since(start))
			time.Sleep(gap)
		}
	})
	return func() (time.Duration, error) {
		close(done)
		wg.Wait()
		return slowest, first
	}
}

// pause SIGSTOPs nd and returns resume, which the test's end calls if
// the test did not.
func pause(t *testing.T, nd *redisnode.Node) (resume func()) {
	t.Helper()
	require.NoError(t, nd.Pause())
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { _ = nd.Resume() }) })
	return func() {
		t.Helper()
		once.Do(func() { require.NoError(t, nd.Resume()) })
	}
}

// cycleWithin takes and releases lock k on c with a node stalled: the
// other nodes make a quorum, and TryLock and Unlock each return within
// bound (Unlock may report the stalled node; its release is retried).
func cycleWithin(t *testing.T, c *redlock.Client, k string, bound time.Duration) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	l, err := c.TryLock(ctx, k, 10*time.Second)
	require.NoError(t, err, "want a quorum of the answering nodes")
	require.Less(t, time.Since(start), bound, "TryLock")
	start = time.Now()
	_ = l.Unlock(ctx)
	require.Less(t, time.Since(start), bound, "Unlock")
}

// autoLocks takes n locks of ttl on c, named prefix-0 to prefix-(n-1),
// and auto-extends each.
func autoLocks(t *testing.T, c *redlock.Client, prefix string, n int, ttl time.Duration) []*redlock.Lock {
	t.Helper()
	ctx := context.Background()
	autos := make([]*redlock.Lock, 0, n)
	for i := range n {
		l, err := c.TryLock(ctx, fmt.Sprintf("%s-%d", prefix, i), ttl)
		require.NoError(t, err)
		require.NoError(t, l.AutoExtend(ctx))
		autos = append(autos, l)
	}
	return autos
}

// autosHeld reports (t.Errorf) the auto-extended locks of autos (of
// ttl, on a client of per-node timeout nodeTimeout) that were lost, and
// returns how many. A loss is excused when the process stalled long
// enough to explain it (stallExcuses); such a lock must still be lost
// everywhere at once: Done closed and no validity left.
func autosHeld(t *testing.T, autos []*redlock.Lock, stalls *redistest.StallMonitor, ttl, nodeTimeout time.Duration) (lost int) {
	t.Helper()
	var last error
	for _, l := range autos {
		if err := l.Err(); err != nil {
			lost++
			last = err
			if l.Validity() > 0 {
				t.Errorf("want a lost lock to report no validity, got %v (%v)", l.Validity(), err)
			}
		}
	}
	if lost > 0 && !stallExcuses(t, stalls, ttl, nodeTimeout) {
		t.Errorf("want every auto-extended lock held, got %d of %d lost; last: %v", lost, len(autos), last)
	}
	return lost
}

// minLossMargin is the least time before its deadline that a Lock's
// Done closes (see Lock.Done; the root's helpers_test.go has it too).
const minLossMargin = 20 * time.Millisecond

// stallExcuses reports whether this process's stalls explain the loss of
// an auto-extended lock of ttl, on a client of per-node timeout
// nodeTimeout whose nodes answer at once (local, healthy): a stall as
// long as the time from the extension's due point (ttl/2 left) to the
// loss margin, or stalls adding up to ttl/4 within any ttl/2. A loss
// without such stalls (a connection pool that held the extension for
// its timeout, say) is not excused. It logs the figures.
func stallExcuses(t *testing.T, stalls *redistest.StallMonitor, ttl, nodeTimeout time.Duration) bool {
	t.Helper()
	margin := min(max(nodeTimeout, minLossMargin), ttl/4)
	longest, worst := stalls.Longest(), stalls.Worst(ttl/2)
	ok := longest >= ttl/2-margin || worst >= ttl/4
	t.Logf("longest stall %v, stalls within the worst %v: %v; a lock of %v is lost by a stall of %v or stalls of %v: excused %v",
		longest, ttl/2, worst, ttl, ttl/2-margin, ttl/4, ok)
	return ok
}

var key0Seq atomic.Int64

func key0(t *testing.T) string { return fmt.Sprintf("%s-%d", t.Name(), key0Seq.Add(1)) }

// waitVotesAgain waits (3s at most) for node, once failing, to hold the
// token of a lock c takes again.
func waitVotesAgain(t *testing.T, c *redlock.Client, node redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 3*time.Second, func() bool {
		k := key0(t)
		l, err := c.TryLock(ctx, k, 10*time.Second)
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Unlock(ctx)) }()
		return node.Get(ctx, k).Val() == l.Token()
	}, "node 0 never voted again")
}

// takeWatchers counts the goroutines that hold a leader's Tx open (the
// Watch of leaderConn.take).
func takeWatchers() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "node.(*leaderConn).take.func") {
			n++
		}
	}
	return n
}

// requireSettled waits until no leader holds a Tx and every client's pool
// has all its connections idle: none was kept out of the pool.
func requireSettled(t *testing.T, clients []redis.UniversalClient) {
	t.Helper()
	eventually(t, 5*time.Second, func() bool { return takeWatchers() == 0 }, "%d Watch goroutines left", takeWatchers())
	for i, cl := range clients {
		rc := cl.(*redis.Client)
		eventually(t, 2*time.Second, func() bool {
			s := rc.PoolStats()
			return s.TotalConns == s.IdleConns
		}, "node %d: connections out of the pool: %+v", i, rc.PoolStats())
	}
}

// requireNoLockKeys waits (bounded) until no key with prefix is left on
// any node: every lock was released everywhere.
func requireNoLockKeys(t *testing.T, clients []redis.UniversalClient, prefix string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 5*time.Second, func() bool {
		for _, cl := range clients {
			ks, err := cl.Keys(ctx, prefix+"*").Result()
			if err != nil || len(ks) > 0 {
				return false
			}
		}
		return true
	}, "lock keys left on the nodes")
}

// endLoad ends a test of Clients lcs on clients: no key named after the
// test is left on the nodes (seen through keyNodes), every Client
// closes without an error, and clients' pools settle (requireSettled).
func endLoad(t *testing.T, keyNodes, clients []redis.UniversalClient, lcs ...*redlock.Client) {
	t.Helper()
	requireNoLockKeys(t, keyNodes, t.Name())
	for _, c := range lcs {
		require.NoError(t, c.Close())
	}
	requireSettled(t, clients)
}

// goroutinesBack waits until the goroutine count is back to at most
// base+slack.
func goroutinesBack(t *testing.T, base, slack int, wait time.Duration) {
	t.Helper()
	eventually(t, wait, func() bool { return runtime.NumGoroutine() <= base+slack },
		"goroutines: %d, were %d", runtime.NumGoroutine(), base)
}

// setup starts n nodes, a go-redis client of each (nodeClients with
// mod), and a Client on those (newTestClient with opts).
func setup(t *testing.T, n int, mod func(*redis.Options), opts ...redlock.Option) ([]*redisnode.Node, []redis.UniversalClient, *redlock.Client) {
	t.Helper()
	nodes := redistest.Nodes(t, n)
	clients := nodeClients(t, nodes, mod)
	return nodes, clients, newTestClient(t, clients, opts...)
}

// cyclesOn runs lockCycles on every Client of lcs at once, on keys
// prefixed name-<client>, and returns each Client's errors.
func cyclesOn(lcs []*redlock.Client, name string, workers, n int) [][]error {
	var wg sync.WaitGroup
	errs := make([][]error, len(lcs))
	for i, c := range lcs {
		wg.Go(func() { errs[i] = lockCycles(c, fmt.Sprintf("%s-%d", name, i), workers, n) })
	}
	wg.Wait()
	return errs
}

// busyClients starts n Clients on clients, each kept busy by workers
// goroutines of back-to-back lock cycles (loops.cycles, on keys named
// after the test and the Client), and returns the load and the Clients.
func busyClients(t *testing.T, clients []redis.UniversalClient, n, workers int) (*loops, []*redlock.Client) {
	t.Helper()
	lp := newLoops(t)
	lcs := newTestClients(t, clients, n)
	for i, c := range lcs {
		lp.cycles(c, fmt.Sprintf("%s-%d", t.Name(), i), workers)
	}
	return lp, lcs
}

// slotsOf returns the connection slots of each client.
func slotsOf(clients []redis.UniversalClient) []*node.ConnSlots {
	slots := make([]*node.ConnSlots, len(clients))
	for i, c := range clients {
		slots[i] = node.ConnSlotsOf(c.(*redis.Client))
	}
	return slots
}

// requireSlotsFree waits (5s at most) until no slot of slots is held:
// every take gave its slot back. when ends the message.
func requireSlotsFree(t *testing.T, slots []*node.ConnSlots, when string) {
	t.Helper()
	for i, s := range slots {
		eventually(t, 5*time.Second, func() bool { return s.Held() == 0 }, "node %d: %d slots still held %s", i, s.Held(), when)
	}
}

// sharedClients starts three nodes and six Clients (per-node timeout
// 1s) sharing one go-redis client per node, whose pool has poolSize
// connections and a 2s pool timeout.
func sharedClients(t *testing.T, poolSize int) ([]redis.UniversalClient, []*redlock.Client) {
	t.Helper()
	clients := nodeClients(t, redistest.Nodes(t, 3), func(o *redis.Options) { o.PoolSize = poolSize; o.PoolTimeout = 2 * time.Second })
	return clients, newTestClients(t, clients, 6, redlock.WithNodeTimeout(time.Second))
}
