package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

// An Extend that waits for another extension of the same lock (the
// scheduler's, or another Extend's) waits on its own ctx too.

// ctxKey marks the ctx of the Extend a test waits behind.
type ctxKey struct{}

// extendObserver is an Observer that hears only ObserveNode.
type extendObserver func(redlock.NodeEvent)

func (f extendObserver) ObserveNode(e redlock.NodeEvent) { f(e) }
func (extendObserver) ObserveRound(redlock.RoundEvent)   {}
func (extendObserver) ObserveLock(redlock.LockEvent)     {}

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
	obs := extendObserver(func(e redlock.NodeEvent) {
		if e.Op == redlock.OpExtend && e.Ctx.Value(ctxKey{}) != nil {
			once.Do(func() { close(inFlight) })
		}
	})
	rl := newClient(t, clients, redlock.WithNodeTimeout(20*time.Second), redlock.WithObserver(obs))
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
		require.Equal(t, redlock.NodePending, r.Status, "want nothing sent by the Extend that waited: %v", r)
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
	_, clients := cluster(t, 3)
	rl := newClient(t, clients, redlock.WithNodeTimeout(2*time.Second))
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
