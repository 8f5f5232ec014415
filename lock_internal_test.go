package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
)

// TestLockExtExclusionAndWakeups: lockExt and unlockExt from 8
// goroutines, half of the waits with contexts that end at random
// instants, mixed with the scheduler's TryLock. At most one holder at a
// time, every wait ends (no lost wake-up: with no ctx to end it, a lost
// one would hang), and a wait whose ctx ends returns its error without
// the lock.
func TestLockExtExclusionAndWakeups(t *testing.T) {
	t.Parallel()
	var l Lock
	var inside atomic.Int32
	var ctxEnded atomic.Int64
	critical := func() {
		if n := inside.Add(1); n != 1 {
			t.Errorf("%d holders of extMu at once", n)
		}
		if rand.IntN(4) == 0 {
			time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond) // work inside: a second holder would overlap it
		}
		inside.Add(-1)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 3000 {
				switch {
				case g == 0 && i%2 == 0: // the scheduler's way in
					if l.extMu.TryLock() {
						critical()
						l.unlockExt()
					}
				case g%2 == 1:
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(100))*time.Microsecond)
					if err := l.lockExt(ctx); err != nil {
						if ctx.Err() == nil {
							t.Errorf("lockExt failed with a live ctx: %v", err)
						}
						ctxEnded.Add(1)
					} else {
						critical()
						l.unlockExt()
					}
					cancel()
				default:
					if err := l.lockExt(context.Background()); err != nil {
						t.Errorf("lockExt with a background ctx: %v", err)
						return
					}
					critical()
					l.unlockExt()
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("lockExt waits did not all end within 60s: a lost wake-up")
	}
	t.Logf("%d waits ended by their ctx", ctxEnded.Load())
	if !l.extMu.TryLock() {
		t.Fatal("extMu left held")
	}
}

// TestExtendValidityNeverOutlivesNodes: Extends of random TTLs, many cut short by
// their ctx (mid-round, or while waiting for another extension), from 8
// goroutines, with AutoExtend running and a node paused at times (so
// requests land late). Once everything has settled, Validity must not
// exceed what a quorum of nodes still holds (the quorum-th largest
// PTTL), and the lock's token must be on a quorum while Validity > 0.
func TestExtendValidityNeverOutlivesNodes(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			nodes := redistest.Nodes(t, 3)
			clients := nodeClients(t, nodes, func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = 2*time.Second, 2*time.Second })
			admins := nodeClients(t, nodes, nil)
			c := newTestClient(t, clients, WithNodeTimeout(300*time.Millisecond))
			ctx := context.Background()
			k := fmt.Sprintf("%s-k", t.Name())
			l, err := c.TryLock(ctx, k, time.Second)
			require.NoError(t, err)
			actx, stopAuto := context.WithCancel(ctx)
			require.NoError(t, l.AutoExtend(actx))
			ttls := []time.Duration{400 * time.Millisecond, time.Second, 3 * time.Second, 6 * time.Second}
			var wg sync.WaitGroup
			var ok, failed atomic.Int64
			for g := range 8 {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				wg.Go(func() {
					for range 60 {
						var cctx context.Context
						var cancel context.CancelFunc
						if rng.IntN(2) == 0 {
							cctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(3000))*time.Microsecond)
						} else {
							cctx, cancel = context.WithCancel(ctx)
						}
						if err := l.Extend(cctx, ttls[rng.IntN(len(ttls))]); err == nil {
							ok.Add(1)
						} else {
							failed.Add(1)
						}
						cancel()
						time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // pacing the Extends
					}
				})
			}
			wg.Go(func() {
				time.Sleep(100 * time.Millisecond) // the fault's schedule: Extends run before it
				paused := nodes[2:]
				if round == 2 {
					paused = nodes[1:]
				}
				for _, nd := range paused {
					_ = nd.Pause()
				}
				time.Sleep(time.Duration(400+200*round) * time.Millisecond) // the pause
				for _, nd := range paused {
					_ = nd.Resume()
				}
			})
			wg.Wait()
			stopAuto()
			// Settle: requests that timed out land; nothing in flight.
			require.NoError(t, l.lockExt(ctx))
			eventually(t, 10*time.Second, func() bool { return inFlight(c, clients) == 0 },
				"requests still in flight: %d", inFlight(c, clients))
			var pttls []time.Duration
			for _, a := range admins {
				v, _ := a.Get(ctx, k).Result()
				d := a.PTTL(ctx, k).Val()
				if v != l.token || d < 0 {
					d = 0
				}
				pttls = append(pttls, d)
			}
			v := l.Validity()
			l.unlockExt()
			sort.Slice(pttls, func(i, j int) bool { return pttls[i] > pttls[j] })
			q := pttls[len(pttls)/2]
			t.Logf("%d Extends won, %d failed; Validity %v; PTTLs %v (quorum-th %v)", ok.Load(), failed.Load(), v, pttls, q)
			if v > q+5*time.Millisecond {
				t.Errorf("Validity %v promises more than a quorum holds (PTTLs %v)", v, pttls)
			}
			_ = l.Unlock(ctx)
		})
	}
}

// TestExtendWaitsForBatchThenSerialised: with the scheduler's batch
// holding extMu (a node paused, so it waits), an Extend with a short ctx
// returns its ctx error, nothing sent, Validity unchanged; an Extend
// with a live ctx waits and runs only once the batch has ended (extMu
// free), and is not lost (no missed wake-up) when the batch ends.
func TestExtendWaitsForBatchThenSerialised(t *testing.T) {
	t.Parallel()
	nodes := redistest.Nodes(t, 3)
	clients := nodeClients(t, nodes, func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = 5*time.Second, 5*time.Second })
	c := newTestClient(t, clients, WithNodeTimeout(3*time.Second))
	ctx := context.Background()
	l, err := c.TryLock(ctx, t.Name(), 2*time.Second)
	require.NoError(t, err)
	require.NoError(t, nodes[1].Pause())
	require.NoError(t, nodes[2].Pause())
	resumed := false
	defer func() {
		if !resumed {
			_ = nodes[1].Resume()
			_ = nodes[2].Resume()
		}
	}()
	require.NoError(t, l.AutoExtend(ctx))
	// Wait for the batch to hold extMu.
	eventually(t, 3*time.Second, func() bool {
		if l.extMu.TryLock() {
			l.unlockExt()
			return false
		}
		return true
	}, "the auto-extension batch never took extMu")
	before := l.Validity()
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err = l.Extend(sctx, 10*time.Second)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.LessOrEqual(t, l.Validity(), before)
	// A waiter with a live ctx. The Extend cut short above left its
	// wake-up channel registered: cleared, so that a channel there is
	// this waiter's.
	l.extWait.Store(nil)
	res := make(chan error, 1)
	var ran atomic.Bool
	go func() { res <- l.Extend(ctx, 2*time.Second); ran.Store(true) }()
	eventually(t, 5*time.Second, func() bool { return l.extWait.Load() != nil || ran.Load() },
		"the Extend neither waited for the batch nor returned")
	require.False(t, ran.Load(), "the Extend did not wait for the batch")
	resumed = true
	require.NoError(t, nodes[1].Resume())
	require.NoError(t, nodes[2].Resume())
	select {
	case err := <-res:
		// The lock may have been lost meanwhile (2 nodes paused for a
		// while); what matters is that the Extend came back.
		t.Logf("waiting Extend: %v; lock err %v", err, l.Err())
	case <-time.After(8 * time.Second):
		t.Fatal("an Extend waiting for the batch did not return within 8s of the nodes' resuming: lost wake-up")
	}
	_ = l.Unlock(ctx)
	if errors.Is(l.Err(), ErrReleased) {
		return
	}
}
