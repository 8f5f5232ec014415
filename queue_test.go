package redlock_test

// Adversarial tests of waiting in line (queue.go): the in-process line
// of a Client's Lock calls on a key, and the wait queue that the key's
// queue node keeps across Clients. Bounds are generous: they state what
// must happen, not how fast.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// qLease is the lease of the tests' locks: long, as loss is not their
// subject.
const qLease = 30 * time.Second

// qNode is the index of the node that keeps k's wait queue among n.
func qNode(k string, n int) int { return redlock.QueueNodeForTest(k, n) }

// qMembers returns the waiter ids in k's queue on c, in queue order.
func qMembers(t testing.TB, c redis.UniversalClient, k string) []string {
	t.Helper()
	queue, _ := wire.QueueKeys(k)
	ids, err := c.ZRange(context.Background(), queue, 0, -1).Result()
	require.NoError(t, err)
	return ids
}

// qWaitLen waits until k's queue on c holds n waiters.
func qWaitLen(t testing.TB, c redis.UniversalClient, k string, n int, wait time.Duration) {
	t.Helper()
	queue, _ := wire.QueueKeys(k)
	deadline := time.Now().Add(wait)
	for c.ZCard(context.Background(), queue).Val() != int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: want %d waiters in %s, have %v", wait, n, queue, qMembers(t, c, k))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// requireNothingLeft waits (up to wait) until no node in clients keeps
// k, its wait queue or the mark of its named waiter.
func requireNothingLeft(t testing.TB, clients []redis.UniversalClient, k string, wait time.Duration) {
	t.Helper()
	queue, named := wire.QueueKeys(k)
	ctx := context.Background()
	left := func() bool {
		for _, c := range clients {
			if n, err := c.Exists(ctx, k, queue, named).Result(); err != nil || n != 0 {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(wait)
	for left() {
		if time.Now().After(deadline) {
			var kept []string
			for i, c := range clients {
				for _, x := range []string{k, queue, named} {
					if c.Exists(ctx, x).Val() == 1 {
						kept = append(kept, fmt.Sprintf("node %d: %s (%s, pttl %v)", i, x, c.Type(ctx, x).Val(), c.PTTL(ctx, x).Val()))
					}
				}
			}
			t.Fatalf("after %v, the nodes keep: %v", wait, kept)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requireIdle waits (up to wait) until none of the Clients has a line,
// a hub waiter or a subscription session left.
func requireIdle(t testing.TB, wait time.Duration, cs ...*redlock.Client) {
	t.Helper()
	for i, c := range cs {
		eventually(t, wait, func() bool { return redlock.QueueIdleForTest(c) },
			"client %d keeps a line, a hub waiter or a subscription after every Lock returned", i)
	}
}

// section counts the holders inside the critical section and remembers
// the most it saw at once.
type section struct {
	in, most atomic.Int32
}

// enter records a holder inside; the returned func records it leaving.
func (s *section) enter() (leave func()) {
	n := s.in.Add(1)
	for {
		m := s.most.Load()
		if n <= m || s.most.CompareAndSwap(m, n) {
			break
		}
	}
	return func() { s.in.Add(-1) }
}

// TestQueueManyClientsExclusiveFairClean: 4 Clients × 8 goroutines on one
// key, for a fixed number of acquisitions: never two holders, every
// goroutine is served before the total is reached, and afterwards no
// lock, queue or mark key remains on any node and no Client keeps wait
// state.
func TestQueueManyClientsExclusiveFairClean(t *testing.T) {
	const nClients, perClient, total = 4, 8, 128
	_, clients := cluster(t, 3)
	k := key(t)
	cs := make([]*redlock.Client, nClients)
	for i := range cs {
		cs[i] = newClient(t, clients)
	}
	var sec section
	var acquired atomic.Int64
	served := make([]atomic.Int64, nClients*perClient)
	errs := make(chan error, nClients*perClient)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for ci, c := range cs {
		for j := range perClient {
			g := ci*perClient + j
			wg.Go(func() {
				for acquired.Load() < total {
					l, err := c.Lock(ctx, k, qLease)
					if err != nil {
						errs <- fmt.Errorf("goroutine %d (client %d): Lock: %w", g, ci, err)
						return
					}
					leave := sec.enter()
					if acquired.Add(1) <= total {
						served[g].Add(1)
					}
					holdBriefly()
					leave()
					if err := l.Unlock(ctx); err != nil {
						errs <- fmt.Errorf("goroutine %d: Unlock: %w", g, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.EqualValues(t, 1, sec.most.Load(), "most holders inside the critical section at once")
	var starved []int
	for g := range served {
		if served[g].Load() == 0 {
			starved = append(starved, g)
		}
	}
	require.Empty(t, starved, "goroutines not served once in %d acquisitions", total)
	requireIdle(t, 5*time.Second, cs...)
	requireNothingLeft(t, clients, k, 10*time.Second)
}

// TestQueueFIFOAcrossClients: Clients A, B, C that check in one after the
// other while the key is held are queued in that order on the queue node
// and granted the key in that order once it is released.
func TestQueueFIFOAcrossClients(t *testing.T) {
	stalls := watchStalls(t)
	_, clients := cluster(t, 3)
	k := key(t)
	qc := clients[qNode(k, 3)]
	holder := newClient(t, clients)
	held := tryLock(t, holder, k, qLease)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	names := []string{"A", "B", "C"}
	var mu sync.Mutex
	var order []string
	done := make(chan error, len(names))
	var ids []string
	for i, name := range names {
		// A retry delay of 200ms: the named waiter stays expected for
		// 200ms (the most), and the others check in once a second, so a
		// slow scheduler does not let one skip ahead.
		c := newClient(t, clients, redlock.WithRetryDelay(200*time.Millisecond))
		ids = append(ids, redlock.WaiterIDForTest(c))
		go func() {
			l, err := c.Lock(ctx, k, qLease)
			if err != nil {
				done <- fmt.Errorf("%s: %w", name, err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			holdBriefly()
			done <- l.Unlock(ctx)
		}()
		qWaitLen(t, qc, k, i+1, 10*time.Second) // checked in before the next starts
	}
	require.Equal(t, ids, qMembers(t, qc, k), "the queue's order: A, B, C")
	require.NoError(t, held.Unlock(ctx))
	for range names {
		awaitNoError(t, done, 30*time.Second, "a queued waiter was not served")
	}
	mu.Lock()
	// A named waiter is expected for 200ms at most: one that a stalled
	// process makes later than that is passed over by design, and the
	// next in the queue goes first.
	if longest := stalls.Longest(); longest < 100*time.Millisecond {
		require.Equal(t, names, order, "order of the grants")
	} else {
		t.Logf("order of the grants %v, with a stall of %v: not checked", order, longest)
	}
	mu.Unlock()
	requireNothingLeft(t, clients, k, 10*time.Second)
}

// TestQueueDeadWaitersDoNotBlock: waiters ahead in the queue that are
// gone (an entry of a process that died, a Lock whose ctx ended, a
// Client that lost every node) delay the live waiter behind them by at
// most a few check-ins (each about queuePoll + namedFor): it gets the
// key within 5s of the release.
func TestQueueDeadWaitersDoNotBlock(t *testing.T) {
	nodes, clients := cluster(t, 3)
	k := key(t)
	qi := qNode(k, 3)
	qc := clients[qi]
	queue, _ := wire.QueueKeys(k)
	holder := newClient(t, clients)
	held := tryLock(t, holder, k, qLease)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	// A waiter whose process died: its entry, with the lowest ticket.
	require.NoError(t, qc.ZAdd(ctx, queue, redis.Z{Score: 1, Member: "00dead00dead00de"}).Err())

	// A waiter whose ctx ends while it is queued.
	xc := newClient(t, clients)
	xctx, xcancel := context.WithCancel(ctx)
	defer xcancel()
	xdone := make(chan error, 1)
	go func() {
		l, err := xc.Lock(xctx, k, qLease)
		if l != nil {
			_ = l.Unlock(context.Background())
			err = errors.New("won a held key")
		}
		xdone <- err
	}()
	qWaitLen(t, qc, k, 2, 10*time.Second)
	xcancel()
	select {
	case err := <-xdone:
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("a Lock whose ctx was cancelled did not return")
	}

	// A waiter whose Client lost every node (its go-redis clients closed)
	// and keeps retrying in vain until its ctx ends.
	yraw := make([]redis.UniversalClient, len(nodes))
	for i, nd := range nodes {
		yraw[i] = redis.NewClient(&redis.Options{Addr: nd.Addr(), MaxRetries: -1, DialerRetries: 1,
			DialTimeout: 250 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
	}
	yc := newClient(t, yraw)
	yctx, ycancel := context.WithCancel(ctx)
	defer ycancel()
	ydone := make(chan error, 1)
	go func() {
		l, err := yc.Lock(yctx, k, qLease)
		if l != nil {
			err = errors.New("won a held key")
		}
		ydone <- err
	}()
	qWaitLen(t, qc, k, 3, 10*time.Second)
	for _, c := range yraw {
		require.NoError(t, c.Close())
	}

	// The live waiter, last.
	bc := newClient(t, clients)
	type result struct {
		l   *redlock.Lock
		err error
		at  time.Time
	}
	bdone := make(chan result, 1)
	go func() {
		l, err := bc.Lock(ctx, k, qLease)
		bdone <- result{l, err, time.Now()}
	}()
	qWaitLen(t, qc, k, 4, 10*time.Second)

	released := time.Now()
	require.NoError(t, held.Unlock(ctx))
	select {
	case r := <-bdone:
		require.NoError(t, r.err)
		waited := r.at.Sub(released)
		t.Logf("the live waiter got the key %v after the release", waited)
		require.Less(t, waited, 5*time.Second, "the live waiter behind 3 gone ones")
		require.NoError(t, r.l.Unlock(ctx))
	case <-time.After(10 * time.Second):
		t.Fatalf("the live waiter behind 3 gone ones did not get the key within 10s of the release; queue: %v", qMembers(t, qc, k))
	}
	ycancel()
	select {
	case err := <-ydone:
		require.ErrorIs(t, err, redlock.ErrNotObtained)
	case <-time.After(5 * time.Second):
		t.Fatal("the Lock of the Client without nodes did not return once its ctx was cancelled")
	}
	requireNothingLeft(t, clients, k, 10*time.Second)
	requireIdle(t, 5*time.Second, xc, bc)
}

// TestQueueNodeDown: with the key's queue node down (of 5), Lock waiters
// with a 20s retry delay are still each served within 5s of the release
// before them: they fall back to waking on any release.
func TestQueueNodeDown(t *testing.T) {
	t.Parallel()
	// The node is killed while the waiters are queued on it.
	t.Run("killed while queued", func(t *testing.T) { queueNodeDown(t, queueKilled) })
	// The node restarts empty while the waiters are queued on it: it
	// answers again, without their entries.
	t.Run("restarted empty while queued", func(t *testing.T) { queueNodeDown(t, queueRestarted) })
	// The node is down before the waiters start.
	t.Run("down before waiting", func(t *testing.T) { queueNodeDown(t, queueDownBefore) })
}

// How TestQueueNodeDown fails the queue node.
const (
	queueKilled = iota
	queueRestarted
	queueDownBefore
)

func queueNodeDown(t *testing.T, mode int) {
	whileQueued := mode != queueDownBefore
	const nWaiters = 3
	nodes, clients := cluster(t, 5)
	k := key(t)
	qi := qNode(k, 5)
	queue, _ := wire.QueueKeys(k)
	holder := newClient(t, clients)
	held := tryLock(t, holder, k, qLease)
	if mode == queueDownBefore {
		require.NoError(t, nodes[qi].Kill())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type grant struct {
		name              string
		granted, released time.Time
	}
	grants := make(chan grant, nWaiters)
	errs := make(chan error, nWaiters)
	var sec section
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before wg.Wait: a waiter never served returns
	var waiters []*redlock.Client
	for i := range nWaiters {
		c := newClient(t, clients, redlock.WithRetryDelay(20*time.Second))
		waiters = append(waiters, c)
		wg.Go(func() {
			l, err := c.Lock(ctx, k, qLease)
			if err != nil {
				errs <- fmt.Errorf("waiter %d: %w", i, err)
				return
			}
			g := grant{name: fmt.Sprint(i), granted: time.Now()}
			leave := sec.enter()
			holdBriefly()
			leave()
			g.released = time.Now()
			grants <- g
			_ = l.Unlock(ctx) // one node is down: the release may report it
		})
		if whileQueued {
			qWaitLen(t, clients[qi], k, i+1, 10*time.Second)
		}
	}
	if whileQueued {
		// The entries are on the node the test computed, and on no other.
		for i, c := range clients {
			if i != qi {
				require.Zero(t, c.Exists(ctx, queue).Val(), "node %d keeps a queue; the queue node is %d", i, qi)
			}
		}
		if mode == queueRestarted {
			require.NoError(t, nodes[qi].Restart())
		} else {
			require.NoError(t, nodes[qi].Kill())
		}
	} else {
		// Every waiter found the key held, and its check-in failed: it
		// waits as one without a queue.
		for i, c := range waiters {
			eventually(t, 10*time.Second, func() bool {
				joined, queued := redlock.WaitersForTest(c)
				return joined == 1 && queued == 0
			}, "waiter %d does not wait fallen back", i)
		}
	}
	prev := time.Now()
	if err := held.Unlock(ctx); err != nil {
		t.Logf("holder's Unlock with the queue node down: %v", err)
	}
	for i, c := range clients {
		if i != qi || mode == queueRestarted {
			eventually(t, 5*time.Second, func() bool { return get(t, c, k) == "" }, "node %d still holds the key after Unlock", i)
		}
	}
	for n := range nWaiters {
		deadline := prev.Add(5 * time.Second)
		select {
		case g := <-grants:
			t.Logf("waiter %s granted %v after the release before it", g.name, g.granted.Sub(prev))
			require.True(t, g.granted.Before(deadline), "waiter %s granted %v after the release before it, want < 5s", g.name, g.granted.Sub(prev))
			prev = g.released
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(time.Until(deadline) + time.Second):
			t.Fatalf("grant %d of %d: no waiter got the key within 5s of the release before (retry delay 20s, queue node %d down)", n+1, nWaiters, qi)
		}
	}
	require.EqualValues(t, 1, sec.most.Load(), "most holders at once")
}

// TestQueueTryLockMixed: TryLock beside queued Lock calls never blocks
// (returns within 2s), is refused with ErrContended while the key is
// held, never overlaps a holder, and the queued Lock calls are all
// served.
func TestQueueTryLockMixed(t *testing.T) {
	const nClients, perClient = 3, 3
	_, clients := cluster(t, 3)
	k := key(t)
	qc := clients[qNode(k, 3)]
	holder := newClient(t, clients)
	held := tryLock(t, holder, k, qLease)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var sec section
	done := make(chan error, nClients*perClient)
	for range nClients {
		c := newClient(t, clients)
		for range perClient {
			go func() {
				l, err := c.Lock(ctx, k, qLease)
				if err != nil {
					done <- err
					return
				}
				leave := sec.enter()
				holdBriefly()
				leave()
				done <- l.Unlock(ctx)
			}()
		}
	}
	qWaitLen(t, qc, k, nClients, 10*time.Second) // one entry per Client

	tc := newClient(t, clients)
	for i := range 10 {
		start := time.Now()
		l, err := tc.TryLock(ctx, k, qLease)
		took := time.Since(start)
		require.Less(t, took, 2*time.Second, "TryLock %d on a held key with waiters queued", i)
		requireNotObtained(t, l, err, "TryLock %d on a held key", i)
		require.ErrorIs(t, err, redlock.ErrContended, "TryLock %d on a held key", i)
	}

	// TryLock keeps trying while the waiters are served.
	stop := make(chan struct{})
	tried := make(chan struct{})
	var slowest atomic.Int64
	var tries, wins atomic.Int64
	var bad []error
	go func() {
		defer close(tried)
		for {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			l, err := tc.TryLock(ctx, k, qLease)
			if d := int64(time.Since(start)); d > slowest.Load() {
				slowest.Store(d)
			}
			tries.Add(1)
			switch {
			case err == nil:
				wins.Add(1)
				leave := sec.enter()
				holdBriefly()
				leave()
				if err := l.Unlock(ctx); err != nil {
					bad = append(bad, fmt.Errorf("Unlock of a TryLock win: %w", err))
				}
			case !errors.Is(err, redlock.ErrNotObtained) || l != nil:
				bad = append(bad, fmt.Errorf("TryLock: lock %v, error %w", l, err))
			}
			time.Sleep(rand.N(2 * time.Millisecond)) // pacing, not synchronization
		}
	}()
	require.NoError(t, held.Unlock(ctx))
	for range nClients * perClient {
		awaitNoError(t, done, 30*time.Second, "a queued Lock was not served beside TryLocks")
	}
	close(stop)
	<-tried
	t.Logf("TryLock: %d tries, %d won, slowest %v", tries.Load(), wins.Load(), time.Duration(slowest.Load()))
	require.Empty(t, bad)
	require.Less(t, time.Duration(slowest.Load()), 2*time.Second, "slowest TryLock")
	require.EqualValues(t, 1, sec.most.Load(), "most holders at once")
	requireNothingLeft(t, clients, k, 10*time.Second)
}

// TestQueueRandomDeadlinesOneHandle: many concurrent Lock calls on one
// Client whose ctxs end at random points (0-50ms, by deadline or
// cancellation), around a release: no panic, each returns an error
// matching ErrNotObtained and its ctx's error or a lock that unlocks
// cleanly, never two holders, and nothing is left in the Client or on
// the nodes (TestMain checks goroutines).
func TestQueueRandomDeadlinesOneHandle(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	_, clients := cluster(t, 3)
	k := key(t)
	c := newClient(t, clients)
	holder := newClient(t, clients)
	var sec section
	var won, failed atomic.Int64
	var mu sync.Mutex
	var bad []string
	report := func(format string, args ...any) {
		mu.Lock()
		bad = append(bad, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	for round := range 4 {
		// The clean-up release of an attempt cut short by its ctx may
		// still be on its way when the call returns: wait for it.
		var held *redlock.Lock
		var refused, last error
		freeAt := time.Now()
		for {
			l, err := holder.TryLock(context.Background(), k, qLease)
			if err == nil {
				held = l
				break
			}
			if refused == nil {
				refused = err
			}
			last = err
			if time.Since(freeAt) > 10*time.Second {
				t.Fatalf("round %d: the key is not free 10s after the previous round; last refusal: %v", round, last)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if refused != nil {
			t.Logf("round %d: the key was free %v after the previous round's calls returned; first refusal: %v", round, time.Since(freeAt), refused)
		}
		relDone := make(chan error, 1)
		relTimer := time.AfterFunc(time.Duration(rng.Int64N(int64(50*time.Millisecond))), func() {
			relDone <- held.Unlock(context.Background())
		})
		var wg sync.WaitGroup
		for i := range 48 {
			d := time.Duration(rng.Int64N(int64(50 * time.Millisecond)))
			byCancel := rng.IntN(3) == 0
			wg.Go(func() {
				defer func() {
					if p := recover(); p != nil {
						report("round %d call %d: panic: %v", round, i, p)
					}
				}()
				var ctx context.Context
				var cancel context.CancelFunc
				if byCancel {
					ctx, cancel = context.WithCancel(context.Background())
					stop := time.AfterFunc(d, cancel)
					defer stop.Stop()
				} else {
					ctx, cancel = context.WithTimeout(context.Background(), d)
				}
				defer cancel()
				l, err := c.Lock(ctx, k, qLease)
				if err != nil {
					failed.Add(1)
					if l != nil || ctx.Err() == nil || !errors.Is(err, redlock.ErrNotObtained) || !errors.Is(err, ctx.Err()) {
						report("round %d call %d (ctx end %v, cancel %v): lock %v, ctx error %v, error %v", round, i, d, byCancel, l, ctx.Err(), err)
					}
					return
				}
				won.Add(1)
				leave := sec.enter()
				holdBriefly()
				leave()
				if err := l.Unlock(context.Background()); err != nil {
					report("round %d call %d: Unlock: %v", round, i, err)
				}
			})
		}
		wg.Wait()
		select {
		case err := <-relDone:
			require.NoError(t, err, "holder's Unlock")
		case <-time.After(10 * time.Second):
			relTimer.Stop()
			t.Fatal("the holder's Unlock did not return")
		}
	}
	t.Logf("%d won, %d ended by their ctx", won.Load(), failed.Load())
	require.Empty(t, bad)
	require.LessOrEqual(t, sec.most.Load(), int32(1), "most holders at once")
	requireIdle(t, 5*time.Second, c)
	requireNothingLeft(t, clients, k, 10*time.Second)
}

// TestQueueTinyNodeTimeoutMaxTries: with a 1ms per-node timeout and
// WithMaxTries(3), Lock calls on a contended key (held, and contended by
// each other) return by themselves with an error, without a ctx
// deadline: no hang in the line or the queue.
func TestQueueTinyNodeTimeoutMaxTries(t *testing.T) {
	tiny := []redlock.Option{redlock.WithNodeTimeout(time.Millisecond), redlock.WithMaxTries(3)}
	// The key is held by another Client for the whole test: every call
	// fails, and returns.
	t.Run("held key", func(t *testing.T) {
		_, clients := cluster(t, 3)
		k := key(t)
		holder := newClient(t, clients)
		held := tryLock(t, holder, k, qLease)
		defer func() { _ = held.Unlock(context.Background()) }()
		c1 := newClient(t, clients, tiny...)
		c2 := newClient(t, clients, tiny...)
		lockAllRefused(t, "Lock calls with a 1ms node timeout and 3 tries on a held key", k, 8, c1, c2)
		requireIdle(t, 5*time.Second, c1, c2)
	})
	// The key is free: the two Clients contend with each other; each
	// call wins or fails, and returns.
	t.Run("free key", func(t *testing.T) {
		_, clients := cluster(t, 3)
		k := key(t)
		c1 := newClient(t, clients, tiny...)
		c2 := newClient(t, clients, tiny...)
		var sec section
		var won atomic.Int64
		within(t, 10*time.Second, "Lock calls with a 1ms node timeout and 3 tries on a free key", func() {
			var wg sync.WaitGroup
			for i := range 8 {
				c := c1
				if i%2 == 1 {
					c = c2
				}
				wg.Go(func() {
					l, err := c.Lock(context.Background(), k, qLease)
					if err != nil {
						assert.ErrorIs(t, err, redlock.ErrNotObtained, "call %d", i)
						return
					}
					won.Add(1)
					leave := sec.enter()
					holdBriefly()
					leave()
					_ = l.Unlock(context.Background()) // a 1ms node timeout may fail the release; it is retried
				})
			}
			wg.Wait()
		})
		t.Logf("%d of 8 won", won.Load())
		require.LessOrEqual(t, sec.most.Load(), int32(1), "most holders at once")
		requireIdle(t, 5*time.Second, c1, c2)
	})
}

// TestQueueMaxTriesBoundsLineSuccessor: WithMaxTries bounds every Lock
// call, also one that takes the front of its Client's line from a call
// that gave up and then only checks in, behind an entry of another
// Client that gave up earlier, while the key stays held: it returns
// with an error matching ErrNotObtained, without a ctx deadline.
func TestQueueMaxTriesBoundsLineSuccessor(t *testing.T) {
	_, clients := cluster(t, 3)
	k := key(t)
	qc := clients[qNode(k, 3)]
	holder := newClient(t, clients)
	held := tryLock(t, holder, k, qLease)
	defer func() { _ = held.Unlock(context.Background()) }()

	// Another Client's waiter gives up once queued: its entry stays ahead.
	other := newClient(t, clients)
	octx, ocancel := context.WithCancel(context.Background())
	odone := make(chan error, 1)
	go func() {
		_, err := other.Lock(octx, k, qLease)
		odone <- err
	}()
	qWaitLen(t, qc, k, 1, 10*time.Second)
	ocancel()
	require.ErrorIs(t, <-odone, context.Canceled)

	// Two calls of one Client, 3 tries each, no ctx deadline.
	c := newClient(t, clients, redlock.WithMaxTries(3))
	lockAllRefused(t, "two Lock calls of one Client with WithMaxTries(3) on a held key", k, 2, c)
}

// lockAllRefused runs n Lock calls on the held key k at once, taking
// the Clients cs in turn, and requires each to return, within 10s, an
// error matching ErrNotObtained.
func lockAllRefused(t *testing.T, what, k string, n int, cs ...*redlock.Client) {
	t.Helper()
	errs := make([]error, n)
	within(t, 10*time.Second, what, func() {
		var wg sync.WaitGroup
		for i := range errs {
			c := cs[i%len(cs)]
			wg.Go(func() {
				l, err := c.Lock(context.Background(), k, qLease)
				if l != nil {
					_ = l.Unlock(context.Background())
					err = errors.New("won a held key")
				}
				errs[i] = err
			})
		}
		wg.Wait()
	})
	for i, err := range errs {
		require.ErrorIs(t, err, redlock.ErrNotObtained, "call %d", i)
	}
}

// TestQueueNilContextInvalid: a nil ctx, and other bad input, to Lock
// returns ErrInvalid at once, without a panic, even while another call
// of the same Client waits in the key's line and queue.
func TestQueueNilContextInvalid(t *testing.T) {
	_, clients := cluster(t, 3)
	k := key(t)
	qc := clients[qNode(k, 3)]
	c := newClient(t, clients)
	holder := newClient(t, clients)
	held := tryLock(t, holder, k, qLease)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, k, qLease)
		if l != nil {
			err = errors.New("won a held key")
		}
		waiting <- err
	}()
	qWaitLen(t, qc, k, 1, 10*time.Second)

	var nilCtx context.Context
	var nilClient *redlock.Client
	cases := []struct {
		name string
		call func() (*redlock.Lock, error)
	}{
		{"Lock, nil ctx", func() (*redlock.Lock, error) { return c.Lock(nilCtx, k, qLease) }},
		{"TryLock, nil ctx", func() (*redlock.Lock, error) { return c.TryLock(nilCtx, k, qLease) }},
		{"Lock, nil ctx, other key", func() (*redlock.Lock, error) { return c.Lock(nilCtx, k+"-other", qLease) }},
		{"Lock, nil *Client", func() (*redlock.Lock, error) { return nilClient.Lock(ctx, k, qLease) }},
		{"Lock, nil *Client, nil ctx", func() (*redlock.Lock, error) { return nilClient.Lock(nilCtx, k, qLease) }},
		{"Lock, zero Client", func() (*redlock.Lock, error) { return (&redlock.Client{}).Lock(ctx, k, qLease) }},
		{"Lock, empty key", func() (*redlock.Lock, error) { return c.Lock(ctx, "", qLease) }},
		{"Lock, zero ttl", func() (*redlock.Lock, error) { return c.Lock(ctx, k, 0) }},
		{"Lock, negative ttl", func() (*redlock.Lock, error) { return c.Lock(ctx, k, -time.Second) }},
		{"Lock, zero retry delay", func() (*redlock.Lock, error) { return c.Lock(ctx, k, qLease, redlock.WithRetryDelay(0)) }},
		{"Lock, negative max tries", func() (*redlock.Lock, error) { return c.Lock(ctx, k, qLease, redlock.WithMaxTries(-1)) }},
		{"Lock, with a token", func() (*redlock.Lock, error) {
			return c.Lock(ctx, k, qLease, redlock.WithToken("0123456789abcdef0123"))
		}},
	}
	for _, tc := range cases {
		within(t, 5*time.Second, tc.name, func() {
			l, err := tc.call()
			assert.ErrorIs(t, err, redlock.ErrInvalid, tc.name)
			assert.Nil(t, l, tc.name)
		})
	}
	// The waiting call is unharmed: still waiting, and it returns when
	// its ctx ends.
	select {
	case err := <-waiting:
		t.Fatalf("the waiting Lock returned early: %v", err)
	default:
	}
	cancel()
	select {
	case err := <-waiting:
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting Lock did not return once its ctx was cancelled")
	}
	require.NoError(t, held.Unlock(context.Background()))
	requireIdle(t, 5*time.Second, c)
	requireNothingLeft(t, clients, k, 10*time.Second)
}

// TestQueueRandomizedHistory: a replayable random mix (-seed) of Lock
// (must win), Lock under a short deadline, Lock cancelled at a random
// point, TryLock and holds, with per-call options that change how a
// call waits (WithHandoff(false), a short retry delay), from 3 Clients
// × 4 goroutines on one key:
// no two recorded holds [acquired, released) overlap, every Lock that
// must win wins, every failure matches ErrNotObtained (and its ctx's
// error when ctx ended), and nothing is left in the Clients or on the
// nodes.
func TestQueueRandomizedHistory(t *testing.T) {
	const nClients, perClient, ops = 3, 4, 12
	seed := testSeed(t)
	_, clients := cluster(t, 3)
	k := key(t)
	cs := make([]*redlock.Client, nClients)
	for i := range cs {
		opts := []redlock.Option{}
		if i == 2 {
			opts = append(opts, redlock.WithRetryDelay(10*time.Millisecond))
		}
		cs[i] = newClient(t, clients, opts...)
	}
	type hold struct {
		who        string
		start, end time.Time
	}
	var mu sync.Mutex
	var holds []hold
	var bad []string
	report := func(format string, args ...any) {
		mu.Lock()
		bad = append(bad, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var sec section
	var counts [4]atomic.Int64 // wins by op
	var wg sync.WaitGroup
	for ci, c := range cs {
		for j := range perClient {
			w := ci*perClient + j
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			wg.Go(func() {
				for n := range ops {
					op := rng.IntN(4)
					d := time.Duration(rng.Int64N(int64(100 * time.Millisecond)))
					holdFor := time.Duration(rng.Int64N(int64(3 * time.Millisecond)))
					who := fmt.Sprintf("worker %d op %d (kind %d)", w, n, op)
					var ctx context.Context
					var cancel context.CancelFunc
					switch op {
					case 0: // Lock that must win
						ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
					case 1: // Lock under a short deadline
						ctx, cancel = context.WithTimeout(context.Background(), d)
					case 2: // Lock cancelled at a random point
						ctx, cancel = context.WithCancel(context.Background())
						time.AfterFunc(d, cancel) // cancel is idempotent: the timer may fire after the op
					case 3: // TryLock
						ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
					}
					var l *redlock.Lock
					var err error
					// Calls of one Client with other options share its line
					// but wait differently: without a queue, or polling faster.
					var opts []redlock.LockOption
					switch rng.IntN(4) {
					case 0:
						opts = append(opts, redlock.WithHandoff(false))
					case 1:
						opts = append(opts, redlock.WithRetryDelay(5*time.Millisecond))
					}
					if op == 3 {
						l, err = c.TryLock(ctx, k, qLease, opts...)
					} else {
						l, err = c.Lock(ctx, k, qLease, opts...)
					}
					if err != nil {
						switch {
						case l != nil:
							report("%s: a lock with error %v", who, err)
						case op == 0:
							report("%s: a Lock with 20s failed: %v", who, err)
						case !errors.Is(err, redlock.ErrNotObtained):
							report("%s: error not matching ErrNotObtained: %v", who, err)
						case op != 3 && (ctx.Err() == nil || !errors.Is(err, ctx.Err())):
							report("%s: error %v, want one matching ctx's %v", who, err, ctx.Err())
						}
						cancel()
						continue
					}
					start := time.Now()
					leave := sec.enter()
					time.Sleep(holdFor)
					leave()
					end := time.Now()
					if l.Validity() <= 0 {
						report("%s: lease of %v ran out while held", who, qLease)
					}
					mu.Lock()
					holds = append(holds, hold{who, start, end})
					mu.Unlock()
					counts[op].Add(1)
					if err := l.Unlock(context.Background()); err != nil {
						report("%s: Unlock: %v", who, err)
					}
					cancel()
				}
			})
		}
	}
	wg.Wait()
	t.Logf("holds by kind (must win, deadline, cancelled, TryLock): %d %d %d %d",
		counts[0].Load(), counts[1].Load(), counts[2].Load(), counts[3].Load())
	require.Empty(t, bad)
	require.LessOrEqual(t, sec.most.Load(), int32(1), "most holders at once")
	sort.Slice(holds, func(i, j int) bool { return holds[i].start.Before(holds[j].start) })
	for i := 1; i < len(holds); i++ {
		a, b := holds[i-1], holds[i]
		if b.start.Before(a.end) {
			t.Fatalf("holds overlap: %s [%v, %v) and %s [%v, %v)", a.who, a.start, a.end, b.who, b.start, b.end)
		}
	}
	require.NotEmpty(t, holds)
	require.True(t, slices.IsSortedFunc(holds, func(a, b hold) int { return a.start.Compare(b.start) }))
	requireIdle(t, 5*time.Second, cs...)
	requireNothingLeft(t, clients, k, 10*time.Second)
}
