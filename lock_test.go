package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

// TestUnlockWaitsReleaseTimeout: a release does not spend validity, so
// Unlock waits up to releaseTimeout, not the per-node timeout, for a
// majority that stalls briefly; a majority stalled for longer is
// reported as ErrNotHeld and ErrUnreachable within releaseTimeout.
func TestUnlockWaitsReleaseTimeout(t *testing.T) {
	nodes, clients := cluster(t, 3)
	const nodeTimeout = 10 * time.Millisecond
	const margin = 400 * time.Millisecond // generous for a loaded 2-core machine under -race
	c := newClient(t, clients, redlock.WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = n.Resume()
		}
	})

	k := key(t)
	l, err := c.TryLock(ctx, k, 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, nodes[1].Pause())
	require.NoError(t, nodes[2].Pause())
	done := make(chan error, 1)
	go func() { done <- l.Unlock(ctx) }()
	// The stall lasts several per-node timeouts but well under
	// releaseTimeout: this sleep is the fault, not a synchronization.
	time.Sleep(5 * nodeTimeout)
	require.NoError(t, nodes[1].Resume())
	require.NoError(t, nodes[2].Resume())
	select {
	case err := <-done:
		require.NoError(t, err, "the stalled nodes released within releaseTimeout")
	case <-time.After(releaseTimeout + margin):
		t.Fatal("Unlock did not return")
	}
	// Unlock returned at its quorum: the third node's release may land
	// just after (Close would wait for it).
	for i, cl := range clients {
		eventually(t, 2*time.Second, func() bool { return get(t, cl, k) == "" }, "node %d kept the key", i)
	}

	l, err = c.TryLock(ctx, key(t), 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, nodes[1].Pause())
	require.NoError(t, nodes[2].Pause())
	start := time.Now()
	err = l.Unlock(ctx)
	took := time.Since(start)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	require.ErrorIs(t, err, redlock.ErrUnreachable)
	require.GreaterOrEqual(t, took, releaseTimeout, "Unlock gave up before releaseTimeout")
	require.Less(t, took, releaseTimeout+margin)
}

// TestNeverDeletesOthers: after expiry, Extend and Unlock report
// ErrNotHeld and leave the next holder's keys alone.
func TestNeverDeletesOthers(t *testing.T) {
	_, clients := cluster(t, 3)
	ctx := context.Background()
	c := newClient(t, clients)
	k := key(t)
	const ttl = 150 * time.Millisecond
	l, err := c.TryLock(ctx, k, ttl)
	require.NoError(t, err)
	eventually(t, 5*time.Second, func() bool { return l.Validity() <= 0 }, "validity did not run out")
	err = l.Extend(ctx, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	require.ErrorIs(t, err, redlock.ErrExpired)
	eventually(t, 5*time.Second, func() bool {
		for _, cl := range clients {
			if get(t, cl, k) != "" {
				return false
			}
		}
		return true
	}, "keys did not expire on the nodes")

	l2, err := c.TryLock(ctx, k, 10*time.Second)
	require.NoError(t, err)
	err = l.Unlock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Zero(t, qe.OK)
	for _, r := range qe.Nodes {
		// absent: l2's SET had not yet landed there
		require.Contains(t, []string{"taken", "absent", "pending"}, r.Status, "%v", r)
	}
	for i, cl := range clients {
		eventually(t, 2*time.Second, func() bool { return get(t, cl, k) == l2.Token() }, "node %d: the new holder's key was touched", i)
	}
	require.NoError(t, l2.Unlock(ctx))
	err = l2.Unlock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotHeld, "a second Unlock finds nothing")
	require.NotErrorIs(t, err, redlock.ErrUnreachable)
}

// TestExtendUnlockRace: an Extend in flight when Unlock starts does not
// revive the lock: once both have returned, Validity is not positive, and
// an Extend that failed says the lock is not held.
func TestExtendUnlockRace(t *testing.T) {
	_, clients := cluster(t, 3)
	c := newClient(t, clients)
	ctx := context.Background()
	const rounds = 100
	for i := range rounds {
		l, err := c.TryLock(ctx, key(t), 10*time.Second)
		require.NoError(t, err)
		var wg sync.WaitGroup
		var extErr, unlErr error
		wg.Add(2)
		go func() { defer wg.Done(); extErr = l.Extend(ctx, 10*time.Second) }()
		go func() { defer wg.Done(); unlErr = l.Unlock(ctx) }()
		wg.Wait()
		if v := l.Validity(); v > 0 {
			t.Fatalf("round %d: want no validity after Unlock, got %v (Extend: %v)", i, v, extErr)
		}
		require.NoError(t, unlErr, "round %d", i)
		if extErr != nil {
			require.ErrorIs(t, extErr, redlock.ErrNotHeld, "round %d", i)
		}
		require.ErrorIs(t, l.Extend(ctx, 10*time.Second), redlock.ErrNotHeld, "round %d: Extend after Unlock", i)
	}
}

// TestValidityAndExtend checks Validity's bounds and that Extend on a
// cancelled ctx sends nothing and keeps the lock.
func TestValidityAndExtend(t *testing.T) {
	_, clients := cluster(t, 3)
	c := newClient(t, clients)
	ctx := context.Background()
	const ttl = 10 * time.Second
	l, err := c.TryLock(ctx, key(t), ttl)
	require.NoError(t, err)
	v := l.Validity()
	require.Positive(t, v)
	require.LessOrEqual(t, v, ttl-102*time.Millisecond, "validity leaves the drift allowance")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err = l.Extend(cctx, time.Minute)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, redlock.ErrNotHeld)

	require.NoError(t, l.Extend(ctx, time.Minute))
	require.Greater(t, l.Validity(), ttl)
	for _, cl := range clients {
		eventually(t, 2*time.Second, func() bool { return cl.PTTL(ctx, l.Key()).Val() > 50*time.Second }, "a node was not extended")
	}
	require.NoError(t, l.Unlock(cctx), "Unlock releases even when ctx is cancelled")
	require.LessOrEqual(t, l.Validity(), time.Duration(0))
	for _, cl := range clients {
		eventually(t, 2*time.Second, func() bool { return get(t, cl, l.Key()) == "" }, "a node keeps the key after Unlock")
	}
}

// ctxKey marks the ctx of the Extend a test waits behind.
type ctxKey struct{}

// extendObserver is an Observer that hears only ObserveNode.
type extendObserver func(redlock.Event)

func (f extendObserver) ObserveNode(e redlock.Event) { f(e) }

func (extendObserver) ObserveRound(redlock.Event) {}

func (extendObserver) ObserveLock(redlock.Event) {}

// TestExtendWaitHonoursCtx: with 2 of 3 nodes paused, one Extend waits
// for them (a per-node timeout of 20s); a second Extend of the same lock,
// whose ctx ends after 100ms, returns then with an error matching
// context.DeadlineExceeded and nothing sent, instead of waiting 20s for
// the first one's round. Before the fix it waited.
func TestExtendWaitHonoursCtx(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	// Read timeouts longer than the test: the first Extend's requests to
	// the paused nodes wait for the per-node timeout alone.
	clients := make([]redis.UniversalClient, len(nodes))
	for i, nd := range nodes {
		c := redis.NewClient(&redis.Options{Addr: nd.Addr(), ReadTimeout: time.Minute, WriteTimeout: time.Minute, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	inFlight := make(chan struct{})
	var once sync.Once
	obs := extendObserver(func(e redlock.Event) {
		if e.Op == "extend" && e.Ctx.Value(ctxKey{}) != nil {
			once.Do(func() { close(inFlight) })
		}
	})
	rl := newClient(t, clients, redlock.WithNodeTimeout(20*time.Second), redlock.WithObserver(observeWith(obs)))
	ctx := context.Background()
	l, err := rl.TryLock(ctx, key(t), time.Minute)
	require.NoError(t, err)
	for _, nd := range nodes[1:] {
		require.NoError(t, nd.Pause())
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			for _, nd := range nodes[1:] {
				_ = nd.Resume()
			}
		}
	}
	defer resume()

	first := make(chan error, 1)
	go func() { first <- l.Extend(context.WithValue(ctx, ctxKey{}, true), time.Minute) }()
	select {
	case <-inFlight: // node 1 answered; nodes 2 and 3 are awaited
	case <-time.After(10 * time.Second):
		t.Fatal("the first Extend's reply from the running node did not come within 10s")
	}
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = l.Extend(wctx, time.Minute)
	took := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded, "want the waiting Extend's ctx error")
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	for _, r := range qe.Nodes {
		require.Equal(t, "pending", r.Status, "want nothing sent by the Extend that waited: %v", r)
	}
	require.Less(t, took, 10*time.Second, "want the waiting Extend back soon after its 100ms ctx, not after the first one's 20s round")
	select {
	case err := <-first:
		t.Fatalf("the first Extend returned while 2 of 3 nodes were paused: %v", err)
	default:
	}

	resume()
	select {
	case err := <-first:
		require.NoError(t, err, "want the first Extend won once the nodes answer")
	case <-time.After(30 * time.Second):
		t.Fatal("the first Extend did not return within 30s of the nodes' resuming")
	}
	// The lock's rounds are free again: an Extend with a live ctx runs.
	require.NoError(t, l.Extend(ctx, time.Minute))
	require.NoError(t, l.Unlock(ctx))
}

// TestExtendCtxStorm: while AutoExtend extends a lock, 8 goroutines call
// Extend on it with contexts of 0 to 5ms (some done before the call) and
// TTLs shorter and longer than its own. Every call returns (none waits
// behind another past its ctx by much), each with nil or an error
// matching its ctx's error or ErrNotHeld; the lock is never lost; and a
// quorum of nodes holds the key at least as long as Validity says.
// Replay with -seed N.
func TestExtendCtxStorm(t *testing.T) {
	seed := testSeed(t)
	clients, rl := threeNodes(t, redlock.WithNodeTimeout(2*time.Second))
	ctx := context.Background()
	k := key(t)
	l, err := rl.TryLock(ctx, k, 2*time.Second)
	require.NoError(t, err)
	actx, stop := context.WithCancel(ctx)
	defer stop()
	require.NoError(t, l.AutoExtend(actx))

	var wg sync.WaitGroup
	var bad atomic.Pointer[string]
	var ok, cancelled, refused atomic.Int64
	for g := range 8 {
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(g)))
		wg.Go(func() {
			for range 40 {
				d := time.Duration(rng.IntN(5000)) * time.Microsecond
				ttl := time.Duration(1000+rng.IntN(3000)) * time.Millisecond
				cctx, cancel := context.WithTimeout(ctx, d)
				err := l.Extend(cctx, ttl)
				cancel()
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, context.DeadlineExceeded):
					cancelled.Add(1)
				case errors.Is(err, redlock.ErrNotHeld):
					refused.Add(1)
				default:
					s := err.Error()
					bad.CompareAndSwap(nil, &s)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("seed %d: 320 Extends of 0-5ms contexts did not return within 60s", seed)
	}
	t.Logf("Extends: %d won, %d cancelled, %d refused", ok.Load(), cancelled.Load(), refused.Load())
	if p := bad.Load(); p != nil {
		t.Fatalf("seed %d: unexpected error: %s", seed, *p)
	}
	select {
	case <-l.Done():
		t.Fatalf("seed %d: the lock was lost: %v", seed, l.Err())
	default:
	}
	// What Validity promises, a quorum holds.
	v := l.Validity()
	at := time.Now()
	held := 0
	for _, c := range clients {
		pttl := c.PTTL(ctx, k).Val()
		if get(t, c, k) == l.Token() && pttl >= v-time.Since(at)-time.Millisecond {
			held++
		}
	}
	require.GreaterOrEqual(t, held, 2, "seed %d: want a quorum holding the key for Validity (%v)", seed, v)
	stop()
	require.NoError(t, l.Unlock(ctx))
}

// TestConcurrentExtendNeverOverpromises runs two Extends at once on one
// lock, one to 10s and one to 300ms, many times, and after each pair
// checks that Validity promises no more than a quorum of nodes grants:
// the quorum-th largest PTTL on the nodes. Before Extends were
// serialised, whichever call finished last set the deadline, so Validity
// could say ~9.4s while every node expired the key in 300ms.
func TestConcurrentExtendNeverOverpromises(t *testing.T) {
	clients, rl := threeNodes(t)
	k := key(t)
	l, err := rl.TryLock(context.Background(), k, 10*time.Second)
	require.NoError(t, err)
	defer func() { _ = l.Unlock(context.Background()) }()
	// A stall may end the lease; the loop then takes it again.

	ttls := [2]time.Duration{10 * time.Second, 300 * time.Millisecond}
	pairs := 400
	if testing.Short() {
		pairs = 100
	}
	for i := range pairs {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, ttl := range ttls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[j] = l.Extend(context.Background(), ttl)
			}()
		}
		wg.Wait()
		// Under load an Extend may fail (a node timeout); the promise
		// must hold whatever each call returned.
		granted := quorumPTTL(t, clients, k, rl.Quorum())
		v := l.Validity()
		if v > granted+2*time.Millisecond {
			t.Fatalf("pair %d (Extend(10s): %v; Extend(300ms): %v): want Validity <= %v (the quorum-th largest PTTL on the nodes), got %v", i, errs[0], errs[1], granted, v)
		}
		if v <= 0 {
			// A stall outlasted the 300ms lease: start again.
			_ = l.Unlock(context.Background())
			l, err = rl.TryLock(context.Background(), k, 10*time.Second)
			require.NoError(t, err)
		}
	}
}

// quorumPTTL returns the quorum-th largest PTTL of key over clients: how
// long at least a quorum of nodes still keeps it.
func quorumPTTL(t testing.TB, clients []redis.UniversalClient, key string, quorum int) time.Duration {
	t.Helper()
	var ds []time.Duration
	for _, c := range clients {
		d, err := c.PTTL(context.Background(), key).Result()
		require.NoError(t, err)
		ds = append(ds, d)
	}
	sort.Slice(ds, func(a, b int) bool { return ds[a] > ds[b] })
	return ds[quorum-1]
}

// TestExtendUnlockAutoExtendAtOnceLeaveNothing: Extend, Unlock and AutoExtend at once on one
// lock: no panic, no hang, Validity <= 0 after Unlock, nothing left.
func TestExtendUnlockAutoExtendAtOnceLeaveNothing(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	for i := 0; i < 40; i++ {
		k := key(t)
		l, err := rl.TryLock(ctx, k, time.Second)
		require.NoError(t, err)
		var wg sync.WaitGroup
		for j := 0; j < 3; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = l.Extend(ctx, time.Duration(j+1)*time.Second)
			}()
		}
		wg.Add(2)
		go func() { defer wg.Done(); _ = l.AutoExtend(ctx) }()
		go func() { defer wg.Done(); _ = l.Unlock(ctx) }()
		within(t, 3*time.Second, "race", wg.Wait)
		require.LessOrEqual(t, l.Validity(), time.Duration(0), "iteration %d: Validity after Unlock", i)
		_ = l.Unlock(ctx)
		for n, c := range clients {
			eventually(t, time.Second, func() bool { return get(t, c, k) == "" }, "iteration %d node %d: key left", i, n+1)
		}
	}
}
