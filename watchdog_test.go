package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
)

// TestDoOutlivesTTL: fn runs for several TTLs and holds the lock all along.
func TestDoOutlivesTTL(t *testing.T) {
	_, clients := cluster(t, 5)
	c := newClient(t, clients)
	other := newClient(t, clients)
	k := key(t)
	const ttl = 300 * time.Millisecond
	ctx := context.Background()
	ran := false
	err := c.Do(ctx, k, ttl, func(ctx context.Context) error {
		ran = true
		end := time.Now().Add(4 * ttl) // the work: 4 TTLs long
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
	nodes, clients := cluster(t, 3)
	c := newClient(t, clients)
	ctx := context.Background()
	l, err := c.TryLock(ctx, key(t), 600*time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, l.AutoExtend(ctx))
	require.ErrorIs(t, l.AutoExtend(ctx), redlock.ErrAlreadyExtending)
	require.NoError(t, nodes[0].Kill())
	require.NoError(t, nodes[1].Kill())
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done did not close within 5s of losing the majority")
	}
	closed := time.Now()
	require.False(t, closed.After(l.Deadline()), "Done closed %v after the deadline", closed.Sub(l.Deadline()))
	require.ErrorIs(t, l.Err(), redlock.ErrLockLost)
	require.Error(t, l.Unlock(ctx))
	require.ErrorIs(t, l.Err(), redlock.ErrLockLost, "the first cause stays")
}

// TestDoneFollowsEarlierDeadline: when an Extend moves the deadline
// earlier, with a smaller TTL or by failing on a majority after some
// nodes took the shorter TTL, Done closes before the new deadline, not at
// the old one.
func TestDoneFollowsEarlierDeadline(t *testing.T) {
	ctx := context.Background()
	const long, short = 10 * time.Second, 300 * time.Millisecond
	waitDone := func(t *testing.T, l *redlock.Lock) {
		t.Helper()
		select {
		case <-l.Done():
		case <-time.After(long / 2):
			t.Fatalf("Done did not close within %v; the deadline was %v away", long/2, time.Until(l.Deadline()))
		}
		closed := time.Now()
		require.False(t, closed.After(l.Deadline()), "Done closed %v after the deadline", closed.Sub(l.Deadline()))
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
	_, clients := cluster(t, 3)
	ctx := context.Background()
	const ttl = 200 * time.Millisecond
	t.Run("max extensions", func(t *testing.T) {
		c := newClient(t, clients, redlock.WithMaxExtensions(2))
		l, err := c.TryLock(ctx, key(t), ttl)
		require.NoError(t, err)
		require.NoError(t, l.AutoExtend(ctx))
		select {
		case <-l.Done():
		case <-time.After(10 * ttl):
			t.Fatal("auto-extension was not stopped by the limit")
		}
		require.ErrorIs(t, l.Err(), redlock.ErrLockLost)
		require.ErrorIs(t, l.Err(), redlock.ErrHoldLimit)
		require.Equal(t, 2, l.Extensions())
	})
	t.Run("max hold", func(t *testing.T) {
		const hold = 2*ttl + ttl/4
		c := newClient(t, clients, redlock.WithMaxHold(hold))
		start := time.Now()
		l, err := c.TryLock(ctx, key(t), ttl)
		require.NoError(t, err)
		require.NoError(t, l.AutoExtend(ctx))
		select {
		case <-l.Done():
		case <-time.After(10 * ttl):
			t.Fatal("auto-extension was not stopped by the limit")
		}
		require.ErrorIs(t, l.Err(), redlock.ErrHoldLimit)
		require.GreaterOrEqual(t, l.Extensions(), 1)
		require.LessOrEqual(t, l.Deadline().Sub(start), hold, "an extension carried the lock past the hold limit")
	})
}

// TestDoneAfterUnlock: Unlock ends the watch with ErrReleased.
func TestDoneAfterUnlock(t *testing.T) {
	_, clients := cluster(t, 3)
	c := newClient(t, clients)
	ctx := context.Background()
	l, err := c.TryLock(ctx, key(t), 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.AutoExtend(ctx))
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
