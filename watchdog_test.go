package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
)

// TestDoOutlivesTTL: fn runs for several TTLs and holds the lock all along.
func TestDoOutlivesTTL(t *testing.T) {
	t.Parallel()
	_, clients := cluster(t, 5)
	c := newClient(t, clients)
	other := newClient(t, clients)
	k := key(t)
	// With the 250ms per-node timeout a shorter lease survives no stall
	// of a loaded machine; a 2s one survives half a second
	// (survivableStall). The test is about Do, not about stalls.
	const ttl = 2 * time.Second
	ctx := context.Background()
	ran := false
	err := c.Do(ctx, k, ttl, func(ctx context.Context) error {
		ran = true
		end := time.Now().Add(3 * ttl) // the work: 3 TTLs long
		for time.Now().Before(end) {
			_, err := other.TryLock(ctx, k, ttl)
			if !errors.Is(err, redlock.ErrContended) {
				return errors.New("a contender was not refused: " + errOrNil(err))
			}
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(ttl / 4):
			}
		}
		return ctx.Err()
	})
	require.NoError(t, err)
	require.True(t, ran)
	for i, cl := range clients {
		eventually(t, 2*time.Second, func() bool { return get(t, cl, k) == "" }, "node %d keeps the key after Do", i)
	}

	want := errors.New("fn failed")
	require.Same(t, want, c.Do(ctx, k, ttl, func(context.Context) error { return want }), "Do returns fn's error")
	require.ErrorIs(t, c.Do(ctx, k, ttl, nil), redlock.ErrInvalid)
}

func errOrNil(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestMajorityKilledCancelsFn: with 3 of 5 nodes killed mid-hold, the
// lock's loss is signalled before its lease can end on the nodes, so no
// other holder can have it yet.
func TestMajorityKilledCancelsFn(t *testing.T) {
	t.Parallel()
	nodes, clients := cluster(t, 5)
	c := newClient(t, clients)
	k := key(t)
	const ttl = time.Second
	ctx := context.Background()
	err := c.Do(ctx, k, ttl, func(fctx context.Context) error {
		for _, n := range nodes[:3] {
			if err := n.Kill(); err != nil {
				return err
			}
		}
		select {
		case <-fctx.Done():
		case <-time.After(5 * ttl):
			return errors.New("fn's ctx was not cancelled within 5 TTLs")
		}
		// The lease still stands on the surviving nodes: we stopped first.
		for _, cl := range clients[3:] {
			if pttl := cl.PTTL(ctx, k).Val(); pttl <= 0 {
				return errors.New("cancelled only after the key expired on a node")
			}
		}
		if !errors.Is(context.Cause(fctx), redlock.ErrLockLost) {
			return errors.New("cause is not ErrLockLost: " + errOrNil(context.Cause(fctx)))
		}
		return fctx.Err()
	})
	require.ErrorIs(t, err, redlock.ErrLockLost)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	require.ErrorIs(t, err, context.Canceled, "fn's own error is joined")
}

// TestAutoExtendDoneBeforeDeadline uses the *Lock API: Done closes no
// later than the deadline (on the monotonic clock) once extensions cannot
// reach a quorum.
func TestAutoExtendDoneBeforeDeadline(t *testing.T) {
	t.Parallel()
	nodes, clients := cluster(t, 3)
	c := newClient(t, clients)
	ctx := context.Background()
	l := autoExtended(t, c, 600*time.Millisecond)
	require.ErrorIs(t, l.AutoExtend(ctx), redlock.ErrInvalid)
	require.NoError(t, nodes[0].Kill())
	require.NoError(t, nodes[1].Kill())
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done did not close within 5s of losing the majority")
	}
	closed := time.Now()
	require.False(t, closed.After(deadlineOf(l)), "Done closed %v after the deadline", closed.Sub(deadlineOf(l)))
	require.ErrorIs(t, l.Err(), redlock.ErrLockLost)
	require.Error(t, l.Unlock(ctx))
	require.ErrorIs(t, l.Err(), redlock.ErrLockLost, "the first cause stays")
}

// TestDoneFollowsEarlierDeadline: when an Extend moves the deadline
// earlier, with a smaller TTL or by failing on a majority after some
// nodes took the shorter TTL, Done closes before the new deadline, not at
// the old one.
func TestDoneFollowsEarlierDeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const long, short = 10 * time.Second, 300 * time.Millisecond
	waitDone := func(t *testing.T, l *redlock.Lock) {
		t.Helper()
		select {
		case <-l.Done():
		case <-time.After(long / 2):
			t.Fatalf("Done did not close within %v; the deadline was %v away", long/2, time.Until(deadlineOf(l)))
		}
		closed := time.Now()
		require.False(t, closed.After(deadlineOf(l)), "Done closed %v after the deadline", closed.Sub(deadlineOf(l)))
		require.ErrorIs(t, l.Err(), redlock.ErrLockLost)
	}
	t.Run("smaller ttl", func(t *testing.T) {
		_, clients := cluster(t, 3)
		l, err := newClient(t, clients).TryLock(ctx, key(t), long)
		require.NoError(t, err)
		require.NoError(t, l.Err(), "arms Done's timer for the long deadline")
		require.NoError(t, l.Extend(ctx, short))
		require.Less(t, l.Validity(), short)
		waitDone(t, l)
		require.NoError(t, l.Unlock(ctx))
	})
	t.Run("failed extend", func(t *testing.T) {
		nodes, clients := cluster(t, 3)
		l, err := newClient(t, clients).TryLock(ctx, key(t), long)
		require.NoError(t, err)
		require.NoError(t, l.Err(), "arms Done's timer for the long deadline")
		require.NoError(t, nodes[1].Kill())
		require.NoError(t, nodes[2].Kill())
		require.ErrorIs(t, l.Extend(ctx, short), redlock.ErrUnreachable)
		require.Less(t, l.Validity(), short, "node 0 took the short TTL")
		waitDone(t, l)
	})
}

// TestHoldLimits: WithMaxExtensions and WithMaxHold stop auto-extension.
func TestHoldLimits(t *testing.T) {
	t.Parallel()
	_, clients := cluster(t, 3)
	const ttl = 600 * time.Millisecond // extended in time on a loaded machine, so that the limit, not a loss, ends it
	t.Run("max extensions", func(t *testing.T) {
		l := heldUntilLimit(t, newClient(t, clients, redlock.WithMaxExtensions(2)), ttl)
		require.ErrorIs(t, l.Err(), redlock.ErrLockLost)
		require.Equal(t, 2, l.Extensions())
	})
	t.Run("max hold", func(t *testing.T) {
		const hold = 2*ttl + ttl/4
		c := newClient(t, clients, redlock.WithMaxHold(hold))
		start := time.Now()
		l := heldUntilLimit(t, c, ttl)
		require.GreaterOrEqual(t, l.Extensions(), 1)
		require.LessOrEqual(t, deadlineOf(l).Sub(start), hold, "an extension carried the lock past the hold limit")
	})
}

// heldUntilLimit takes a lock of ttl on c and auto-extends it until a
// hold limit ends it (within 10 TTLs, else the test fails).
func heldUntilLimit(t *testing.T, c *redlock.Client, ttl time.Duration) *redlock.Lock {
	t.Helper()
	l := autoExtended(t, c, ttl)
	select {
	case <-l.Done():
	case <-time.After(10 * ttl):
		t.Fatalf("want auto-extension stopped by the limit within %v, got none", 10*ttl)
	}
	require.ErrorIs(t, l.Err(), redlock.ErrHoldLimit)
	return l
}

// TestDoneAfterUnlock: Unlock ends the watch with ErrReleased.
func TestDoneAfterUnlock(t *testing.T) {
	t.Parallel()
	_, clients := cluster(t, 3)
	c := newClient(t, clients)
	ctx := context.Background()
	l := autoExtended(t, c, 10*time.Second)
	require.NoError(t, l.Err())
	require.NoError(t, l.Unlock(ctx))
	<-l.Done() // already closed: Unlock waited for the extender
	require.ErrorIs(t, l.Err(), redlock.ErrReleased)

	l2, err := c.TryLock(ctx, key(t), 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, l2.Unlock(ctx))
	<-l2.Done()
	require.ErrorIs(t, l2.Err(), redlock.ErrReleased)
	require.ErrorIs(t, l2.AutoExtend(ctx), redlock.ErrReleased)
}

// requireLostNow checks that l is lost and that its handle says so
// everywhere at once: Done closed, Validity <= 0, Deadline not after now,
// and Err matching ErrLockLost and ErrNotHeld, naming cause and carrying
// the extension's *QuorumError.
func requireLostNow(t *testing.T, l *redlock.Lock, cause string) {
	t.Helper()
	select {
	case <-l.Done():
	default:
		t.Fatalf("want Done closed, got it open with Validity %v", l.Validity())
	}
	require.LessOrEqual(t, l.Validity(), time.Duration(0), "want no validity left once the lock is lost")
	require.False(t, deadlineOf(l).After(time.Now()), "want the deadline passed, got it %v away", time.Until(deadlineOf(l)))
	err := l.Err()
	require.ErrorIs(t, err, redlock.ErrLockLost)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	require.Contains(t, err.Error(), cause)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe, "want the extension's per-node outcome in Err")
}

// requireHeld checks that l's handle says it is held: Done open, Err nil,
// Validity above min.
func requireHeld(t *testing.T, l *redlock.Lock, min time.Duration) {
	t.Helper()
	select {
	case <-l.Done():
		t.Fatalf("want the lock held, got Done closed: %v", l.Err())
	default:
	}
	require.NoError(t, l.Err())
	require.Greater(t, l.Validity(), min)
}

// TestExtendLostEndsValidity: an Extend whose answers make a quorum
// impossible (another owner's token or no key on 2 of 3 nodes: a node
// lost its data and granted the key again) ends the lock before it
// returns: Validity <= 0, Done closed, Err naming the cause. One foreign
// node, or nodes that are down, prove nothing: the lock is kept.
func TestExtendLostEndsValidity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 10 * time.Second
	lost := []struct {
		name  string
		watch bool // Done asked for before the Extend: its timer is armed
		spoil func(t *testing.T, clients []redis.UniversalClient, k string)
		cause string
	}{
		{"other owner on 2 of 3", true, func(t *testing.T, cl []redis.UniversalClient, k string) {
			holdForeign(t, cl[0], k, ttl)
			holdForeign(t, cl[1], k, ttl)
		}, "held by another owner on 2 of 3 nodes"},
		{"key gone on 2 of 3", false, func(t *testing.T, cl []redis.UniversalClient, k string) {
			require.NoError(t, cl[1].Del(ctx, k).Err())
			require.NoError(t, cl[2].Del(ctx, k).Err())
		}, "key missing on 2 of 3 nodes"},
		{"other owner on 1, key gone on 1", false, func(t *testing.T, cl []redis.UniversalClient, k string) {
			holdForeign(t, cl[0], k, ttl)
			require.NoError(t, cl[2].Del(ctx, k).Err())
		}, "held by another owner on 1 and key missing on 1 of 3 nodes"},
	}
	for _, tc := range lost {
		t.Run(tc.name, func(t *testing.T) {
			_, clients := cluster(t, 3)
			k := key(t)
			l, err := newClient(t, clients).TryLock(ctx, k, ttl)
			require.NoError(t, err)
			if tc.watch {
				requireHeld(t, l, ttl/2)
			}
			tc.spoil(t, clients, k)
			err = l.Extend(ctx, ttl)
			require.ErrorIs(t, err, redlock.ErrNotHeld)
			require.NotErrorIs(t, err, redlock.ErrUnreachable)
			requireLostNow(t, l, tc.cause)
			err = l.Extend(ctx, ttl)
			require.ErrorIs(t, err, redlock.ErrNotHeld, "want a lost lock acquired again, not extended")
			require.ErrorIs(t, err, redlock.ErrExpired)
			require.ErrorIs(t, l.AutoExtend(ctx), redlock.ErrLockLost)
			require.ErrorIs(t, l.Unlock(ctx), redlock.ErrNotHeld)
			for i, c := range clients { // Unlock may return before every node answered
				eventually(t, 5*time.Second, func() bool { v := get(t, c, k); return v == "" || v == foreignToken },
					"node %d: want the other owner's token or nothing, got %q", i+1, get(t, c, k))
			}
		})
	}
	t.Run("other owner on 1 of 3: kept", func(t *testing.T) {
		_, clients := cluster(t, 3)
		k := key(t)
		l, err := newClient(t, clients).TryLock(ctx, k, ttl)
		require.NoError(t, err)
		holdForeign(t, clients[0], k, ttl)
		require.NoError(t, l.Extend(ctx, ttl))
		requireHeld(t, l, ttl/2)
		require.Equal(t, foreignToken, get(t, clients[0], k), "the other owner's key is left alone")
		require.NoError(t, l.Unlock(ctx))
	})
	t.Run("2 of 3 down: kept", func(t *testing.T) {
		nodes, clients := cluster(t, 3)
		k := key(t)
		l, err := newClient(t, clients).TryLock(ctx, k, ttl)
		require.NoError(t, err)
		requireHeld(t, l, ttl/2)
		require.NoError(t, nodes[1].Kill())
		require.NoError(t, nodes[2].Kill())
		require.ErrorIs(t, l.Extend(ctx, ttl), redlock.ErrUnreachable)
		// The lock may still be held on the nodes that did not answer:
		// its validity from the acquire stands.
		requireHeld(t, l, ttl/2)
	})
}

// TestAutoExtendLostEndsValidity: auto-extension that finds a lock of any
// kind lost (another owner's token, or its keys gone, on 2 of 3 nodes)
// ends it at once: when Done closes, Validity is already <= 0 and Err
// names the cause. With 1 of 3 nodes held by another owner the lock is
// extended on and kept.
func TestAutoExtendLostEndsValidity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = time.Second
	type lockFn func(c *redlock.Client, k string) (*redlock.Lock, error)
	cases := []struct {
		name  string
		lock  lockFn
		spoil func(t *testing.T, cl []redis.UniversalClient, l *redlock.Lock)
		cause string
	}{
		{"key lock, other owner", func(c *redlock.Client, k string) (*redlock.Lock, error) {
			return c.TryLock(ctx, k, ttl)
		}, func(t *testing.T, cl []redis.UniversalClient, l *redlock.Lock) {
			holdForeign(t, cl[1], l.Key(), 10*ttl)
			holdForeign(t, cl[2], l.Key(), 10*ttl)
		}, "held by another owner on 2 of 3 nodes"},
		{"key lock, keys gone", func(c *redlock.Client, k string) (*redlock.Lock, error) {
			return c.TryLock(ctx, k, ttl)
		}, func(t *testing.T, cl []redis.UniversalClient, l *redlock.Lock) {
			require.NoError(t, cl[0].Del(ctx, l.Key()).Err())
			require.NoError(t, cl[1].Del(ctx, l.Key()).Err())
		}, "key missing on 2 of 3 nodes"},
		{"read lock", func(c *redlock.Client, k string) (*redlock.Lock, error) {
			return c.TryRLock(ctx, k, ttl)
		}, func(t *testing.T, cl []redis.UniversalClient, l *redlock.Lock) {
			for _, c := range cl[:2] {
				require.NoError(t, c.Del(ctx, l.Key(), redlock.KeyName("readers", l.Key())).Err())
			}
		}, "key missing on 2 of 3 nodes"},
		{"semaphore permit", func(c *redlock.Client, k string) (*redlock.Lock, error) {
			return c.TryAcquire(ctx, k, 1, ttl)
		}, func(t *testing.T, cl []redis.UniversalClient, l *redlock.Lock) {
			for _, c := range cl[1:] {
				require.NoError(t, c.Del(ctx, l.Key()).Err())
			}
		}, "key missing on 2 of 3 nodes"},
		// Limit 2 on 3 nodes needs all 3 (floor(kN/(k+1))+1): one node
		// without the permit makes the quorum impossible.
		{"semaphore permit, quorum of 3", func(c *redlock.Client, k string) (*redlock.Lock, error) {
			return c.TryAcquire(ctx, k, 2, ttl)
		}, func(t *testing.T, cl []redis.UniversalClient, l *redlock.Lock) {
			require.NoError(t, cl[1].Del(ctx, l.Key()).Err())
		}, "key missing on 1 of 3 nodes"},
		{"path lock", func(c *redlock.Client, k string) (*redlock.Lock, error) {
			return c.TryLockPath(ctx, k+"/sub", ttl)
		}, func(t *testing.T, cl []redis.UniversalClient, l *redlock.Lock) {
			for _, c := range cl[:2] {
				require.NoError(t, c.Del(ctx, redlock.KeyName("path", l.Key())).Err())
			}
		}, "key missing on 2 of 3 nodes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, clients := cluster(t, 3)
			l, err := tc.lock(newClient(t, clients), key(t))
			require.NoError(t, err)
			require.NoError(t, l.AutoExtend(ctx))
			spoilUntilLost(t, l, ttl, 10*ttl, func() { tc.spoil(t, clients, l) })
			requireLostNow(t, l, tc.cause)
		})
	}
	t.Run("other owner on 1 of 3: kept", func(t *testing.T) {
		_, clients := cluster(t, 3)
		k := key(t)
		l, err := newClient(t, clients).TryLock(ctx, k, ttl)
		require.NoError(t, err)
		actx, stop := context.WithCancel(ctx)
		defer stop()
		require.NoError(t, l.AutoExtend(actx))
		holdForeign(t, clients[0], k, 10*ttl)
		eventually(t, 10*ttl, func() bool { return l.Extensions() >= 3 }, "want 3 extensions, got %d (Err %v)", l.Extensions(), l.Err())
		requireHeld(t, l, 0)
		stop()
		require.NoError(t, l.Unlock(ctx))
	})
	t.Run("2 of 3 down: validity stands until the margin", func(t *testing.T) {
		nodes, clients := cluster(t, 3)
		l, err := newClient(t, clients).TryLock(ctx, key(t), ttl)
		require.NoError(t, err)
		require.NoError(t, l.AutoExtend(ctx))
		require.NoError(t, nodes[0].Kill())
		require.NoError(t, nodes[1].Kill())
		select {
		case <-l.Done():
		case <-time.After(10 * ttl):
			t.Fatalf("Done did not close within %v of losing the majority", 10*ttl)
		}
		// Failed nodes prove nothing: the lease ran to its loss margin,
		// not cut short when the first extension failed.
		closed := time.Now()
		require.True(t, deadlineOf(l).After(closed), "want Done closed before the deadline, got it %v after", closed.Sub(deadlineOf(l)))
		require.ErrorIs(t, l.Err(), redlock.ErrLockLost)
		require.Contains(t, l.Err().Error(), "validity ran out")
	})
}

// TestAutoExtendResumesAfterCtx: after the ctx of an AutoExtend ends, a
// new AutoExtend resumes the extension, at once (before the ended ctx's
// clean-up may have run) or a moment later, cycle after cycle: the lock
// stays held for several TTLs. Replay with -seed N.
func TestAutoExtendResumesAfterCtx(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(testSeed(t), 0))
	_, clients := cluster(t, 3)
	ctx := context.Background()
	k := key(t)
	// With the 250ms per-node timeout a shorter lease survives no stall
	// of a loaded machine; a 2s one survives half a second
	// (survivableStall). The test is about resuming, not about stalls.
	const ttl = 2 * time.Second
	l, err := newClient(t, clients).TryLock(ctx, k, ttl)
	require.NoError(t, err)
	start := time.Now()
	for cycle := 0; cycle < 6 || time.Since(start) < 3*ttl; cycle++ {
		actx, cancel := context.WithCancel(ctx)
		require.NoError(t, l.AutoExtend(actx), "cycle %d: want auto-extension resumed", cycle)
		n := l.Extensions()
		eventually(t, 5*ttl, func() bool { return l.Extensions() > n || l.Err() != nil },
			"cycle %d: want an extension, got none", cycle)
		requireHeld(t, l, 0)
		cancel()
		if rng.IntN(2) == 0 {
			// Not a sync: some resumes come before the ended ctx's
			// clean-up has run, some after.
			time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
		}
	}
	requireHeld(t, l, 0)
	// A quorum, not every node: on a loaded machine one node's
	// extensions may time out for a TTL, and its copy expire.
	var ours []int
	for i, c := range clients {
		if get(t, c, k) == l.Token() {
			ours = append(ours, i)
		}
	}
	require.GreaterOrEqual(t, len(ours), 2, "want the key still ours on a quorum after %v, got nodes %v", time.Since(start), ours)
	require.NoError(t, l.Unlock(ctx))
}

// TestAutoExtendOneWinner: of two AutoExtends at once on one handle,
// exactly one wins and the other returns ErrAlreadyExtending while the
// winner's ctx is live; then both are cancelled and two more race, right
// after the cancellation or a moment later.
func TestAutoExtendOneWinner(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(testSeed(t), 0))
	_, clients := cluster(t, 3)
	ctx := context.Background()
	l, err := newClient(t, clients).TryLock(ctx, key(t), 2*time.Second)
	require.NoError(t, err)
	for round := range 30 {
		var ctxs [2]context.Context
		var cancels [2]context.CancelFunc
		for i := range ctxs {
			ctxs[i], cancels[i] = context.WithCancel(ctx)
		}
		var errs [2]error
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range ctxs {
			wg.Go(func() {
				<-gate
				errs[i] = l.AutoExtend(ctxs[i])
			})
		}
		close(gate)
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, redlock.ErrInvalid):
				t.Fatalf("round %d, call %d: want nil or ErrAlreadyExtending, got %v", round, i, err)
			}
		}
		require.Equal(t, 1, won, "round %d: want exactly one winner, got errors %v", round, errs)
		require.ErrorIs(t, l.AutoExtend(ctx), redlock.ErrInvalid, "round %d: the winner's ctx is live", round)
		for _, cancel := range cancels {
			cancel()
		}
		if rng.IntN(2) == 0 {
			time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond) // not a sync: vary the race
		}
	}
	requireHeld(t, l, 0)
	require.NoError(t, l.Unlock(ctx))
}

// TestAutoExtendAfterEnd: once its first ctx ended, AutoExtend does not
// resume a lock that was released (ErrReleased) or lost (Err, matching
// ErrLockLost); and a hold limit counts the extensions of every
// AutoExtend of the lock.
func TestAutoExtendAfterEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = time.Second
	cancelled := func() context.Context {
		c, cancel := context.WithCancel(ctx)
		cancel()
		return c
	}
	t.Run("released", func(t *testing.T) {
		_, clients := cluster(t, 3)
		l, err := newClient(t, clients).TryLock(ctx, key(t), ttl)
		require.NoError(t, err)
		require.NoError(t, l.AutoExtend(cancelled()))
		require.NoError(t, l.Unlock(ctx))
		require.ErrorIs(t, l.AutoExtend(ctx), redlock.ErrReleased)
	})
	t.Run("lost", func(t *testing.T) {
		_, clients := cluster(t, 3)
		k := key(t)
		l, err := newClient(t, clients).TryLock(ctx, k, ttl)
		require.NoError(t, err)
		require.NoError(t, l.AutoExtend(cancelled()))
		holdForeign(t, clients[0], k, ttl)
		holdForeign(t, clients[1], k, ttl)
		require.ErrorIs(t, l.Extend(ctx, ttl), redlock.ErrNotHeld)
		require.ErrorIs(t, l.AutoExtend(ctx), redlock.ErrLockLost)
	})
	t.Run("hold limit across resumes", func(t *testing.T) {
		_, clients := cluster(t, 3)
		l, err := newClient(t, clients, redlock.WithMaxExtensions(2)).TryLock(ctx, key(t), ttl)
		require.NoError(t, err)
		actx, cancel := context.WithCancel(ctx)
		require.NoError(t, l.AutoExtend(actx))
		eventually(t, 5*ttl, func() bool { return l.Extensions() >= 1 || l.Err() != nil }, "want an extension, got none")
		cancel()
		require.NoError(t, l.AutoExtend(ctx), "want auto-extension resumed")
		select {
		case <-l.Done():
		case <-time.After(10 * ttl):
			t.Fatal("auto-extension was not stopped by the limit")
		}
		require.ErrorIs(t, l.Err(), redlock.ErrHoldLimit)
		require.Equal(t, 2, l.Extensions(), "want the limit counted over both AutoExtends")
		require.ErrorIs(t, l.AutoExtend(ctx), redlock.ErrHoldLimit)
	})
}

type panicValue struct{ msg string }

// TestDoPanicReleases panics in Do's fn: the panic reaches the caller
// unchanged, and by then the lock is released on every node and its
// extender has stopped (goleak in TestMain): the extension must not go
// on until the caller's ctx ends, which with context.Background is
// never.
func TestDoPanicReleases(t *testing.T) {
	t.Parallel()
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	k := key(t)
	want := &panicValue{"boom"}
	var got any
	func() {
		defer func() { got = recover() }()
		_ = rl.Do(context.Background(), k, time.Second, func(ctx context.Context) error {
			panic(want)
		})
	}()
	require.Same(t, want, got, "want Do to re-panic with fn's value")
	// Unlock returned at its quorum; the last node follows at once.
	for i, c := range clients {
		eventually(t, 2*time.Second, func() bool { return get(t, c, k) == "" },
			"node %d still holds the key after Do's fn panicked", i+1)
	}
	l, err := rl.TryLock(context.Background(), k, time.Second)
	require.NoError(t, err, "want the key free after Do's fn panicked")
	require.NoError(t, l.Unlock(context.Background()))

	// runtime.Goexit (t.FailNow in fn) ends the call the same way.
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rl.Do(context.Background(), k, time.Second, func(context.Context) error {
			runtimeGoexit()
			return nil
		})
	}()
	<-done
	for i, c := range clients {
		eventually(t, 2*time.Second, func() bool { return get(t, c, k) == "" },
			"node %d still holds the key after Do's fn called Goexit", i+1)
	}
}

// TestDoneNeverAfterDeadline: with a 1ms node timeout, 20 auto-extended
// locks lose 3 of 5 nodes; each lock's Done must close before its
// Deadline, and Do's fn ctx too. A loss margin of the 1ms node timeout
// would be within timer jitter, so the margin has a floor
// (minLossMargin).
func TestDoneNeverAfterDeadline(t *testing.T) {
	t.Parallel()
	nodes, clients := cluster(t, 5)
	rl := newClient(t, clients, redlock.WithNodeTimeout(time.Millisecond), redlock.WithRetryDelay(5*time.Millisecond))
	const ttl = 400 * time.Millisecond
	const n = 20
	locks := make([]*redlock.Lock, n)
	for i := range locks {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := rl.Lock(ctx, key(t), ttl)
		cancel()
		require.NoError(t, err)
		locks[i] = l
		require.NoError(t, l.AutoExtend(context.Background()))
	}
	// Do's fn ctx, on a client with the same 1ms node timeout.
	doCtx := make(chan time.Time, 1)
	doErr := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		doErr <- rl.Do(ctx, key(t), ttl, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			doCtx <- time.Now()
			return nil
		})
	}()
	select {
	case <-started:
	case err := <-doErr:
		t.Fatalf("Do: want fn run, got %v", err)
	}
	for _, nd := range nodes[:3] {
		require.NoError(t, nd.Pause())
	}
	t.Cleanup(func() {
		for _, nd := range nodes[:3] {
			_ = nd.Resume()
		}
	})
	// Done closing is observed by a goroutine that a loaded machine may
	// run late: a lateness past the Deadline counts only beyond the
	// longest stall the process suffered meanwhile.
	stalls := watchStalls(t)
	var wg sync.WaitGroup
	late := make(chan string, n)
	for i, l := range locks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-l.Done():
			case <-time.After(10 * time.Second):
				late <- "lock " + string(rune('a'+i)) + ": Done never closed"
				return
			}
			if at, dl := time.Now(), deadlineOf(l); !at.Before(dl) && at.Sub(dl) > stalls.Longest() {
				late <- "lock " + string(rune('a'+i)) + ": Done closed " + at.Sub(dl).String() + " after Deadline, longest stall " + stalls.Longest().String()
			}
			require.ErrorIs(t, l.Err(), redlock.ErrLockLost)
		}()
	}
	wg.Wait()
	close(late)
	for msg := range late {
		t.Error(msg)
	}
	select {
	case <-doCtx:
	case <-time.After(10 * time.Second):
		t.Fatal("Do's fn ctx never ended after a majority was paused")
	}
	for _, nd := range nodes[:3] {
		require.NoError(t, nd.Resume())
	}
	require.ErrorIs(t, <-doErr, redlock.ErrLockLost)
}

func runtimeGoexit() { runtime.Goexit() }

// TestDoReleasesOnPanicAndGoexit: Do releases the lock when fn panics or
// calls runtime.Goexit, and the panic value reaches the caller.
func TestDoReleasesOnPanicAndGoexit(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	k := key(t)
	ctx := context.Background()
	func() {
		defer func() {
			p := recover()
			require.Equal(t, "boom", p)
		}()
		_ = rl.Do(ctx, k, time.Second, func(context.Context) error { panic("boom") })
	}()
	l, err := rl.TryLock(ctx, k, time.Second)
	require.NoError(t, err, "after a panicking Do the key must be free")
	require.NoError(t, l.Unlock(ctx))

	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rl.Do(ctx, k, time.Second, func(context.Context) error { runtime.Goexit(); return nil })
	}()
	<-done
	l, err = rl.TryLock(ctx, k, time.Second)
	require.NoError(t, err, "after a Goexit in Do the key must be free")
	require.NoError(t, l.Unlock(ctx))

	// Cancel at random instants.
	for i := 0; i < 30; i++ {
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			time.Sleep(time.Duration(i) * 300 * time.Microsecond) // an instant of Do, not synchronization
			cancel()
		}()
		_ = rl.Do(cctx, k, time.Second, func(c context.Context) error {
			<-c.Done()
			return c.Err()
		})
		cancel()
		l, err := rl.TryLock(ctx, k, time.Second)
		require.NoError(t, err, "iteration %d: key left held after a cancelled Do", i)
		require.NoError(t, l.Unlock(ctx))
	}
}

// TestCloseEndsAutoExtension: Close ends every auto-extension at once:
// auto-extended locks and leaderships close Done with an error matching
// ErrLockLost and ErrClosed and report no validity, and nothing extends
// their keys any more, which expire with their TTL; a lock that was not
// auto-extended keeps its validity. After Close, AutoExtend says
// ErrClosed, and Unlock and Resign still release, so that a candidate of
// another Client is elected at once.
func TestCloseEndsAutoExtension(t *testing.T) {
	t.Parallel()
	_, clients := cluster(t, 3)
	ctx := context.Background()
	rl, err := redlock.New(clients, redlock.WithNodeTimeout(testNodeTimeout))
	require.NoError(t, err)
	const ttl = 2 * time.Second
	k1, k2, k3 := key(t), key(t), key(t)
	auto, err := rl.TryLock(ctx, k1, ttl)
	require.NoError(t, err)
	require.NoError(t, auto.AutoExtend(ctx))
	plain, err := rl.TryLock(ctx, k2, time.Minute)
	require.NoError(t, err)
	name := key(t)
	lead, err := rl.Election(name).Campaign(ctx, "closing", ttl)
	require.NoError(t, err)
	did := make(chan error, 1)
	running := make(chan struct{})
	go func() {
		did <- rl.Do(ctx, k3, ttl, func(ctx context.Context) error {
			close(running)
			<-ctx.Done()
			return nil
		})
	}()
	// fn runs: Do holds its lock. Its key on a node is not enough: Do
	// may still be acquiring, and Close would then make Do return
	// ErrClosed without running fn.
	select {
	case <-running:
	case err := <-did:
		t.Fatalf("Do returned before running fn: %v", err)
	}

	require.NoError(t, rl.Close())
	for what, d := range map[string]interface {
		Done() <-chan struct{}
		Err() error
		Validity() time.Duration
	}{"auto-extended lock": auto, "leadership": lead.Lock()} {
		select {
		case <-d.Done():
		default:
			t.Fatalf("%s: want Done closed once Close returned", what)
		}
		require.ErrorIs(t, d.Err(), redlock.ErrLockLost, what)
		require.ErrorIs(t, d.Err(), redlock.ErrClosed, what)
		require.LessOrEqual(t, d.Validity(), time.Duration(0), what)
	}
	err = <-did
	require.ErrorIs(t, err, redlock.ErrLockLost, "want Do's fn told by its ctx")
	select {
	case <-plain.Done():
		t.Fatal("want a lock that was not auto-extended to keep its validity")
	default:
	}
	require.Positive(t, plain.Validity())
	require.ErrorIs(t, plain.AutoExtend(ctx), redlock.ErrClosed)

	// A leadership ended by Close is still released by Resign: another
	// Client's candidate is elected at once (hand-off), well before the
	// minute-long retry delay.
	other := newClient(t, clients, redlock.WithRetryDelay(time.Minute))
	got := make(chan error, 1)
	lead2 := make(chan *redlock.Leadership, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		l, err := other.Election(name).Campaign(cctx, "next", 10*time.Second)
		lead2 <- l
		got <- err
	}()
	require.ErrorIs(t, lead.Resign(ctx), redlock.ErrNotHeld, "want Resign to say the leadership was lost")
	require.NoError(t, <-got)
	require.NoError(t, (<-lead2).Resign(ctx))
	// Nothing extends the keys any more: they expire with their TTL.
	eventually(t, 2*ttl+5*time.Second, func() bool { return get(t, clients[0], k1) == "" && get(t, clients[0], k3) == "" },
		"want the auto-extended keys to expire once Close ended their extension")

	require.NoError(t, plain.Unlock(ctx), "want Unlock after Close to release")
	require.Equal(t, "", get(t, clients[0], k2))
}
