package minhold_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockgocron/internal/minhold"
	"github.com/seed543a70bd/redlock/redlocktest"
)

// newClients returns two Clients, two replicas, over 3 nodes.
func newClients(t *testing.T) (a, b *redlock.Client) {
	t.Helper()
	urls := redlocktest.URLs(redlocktest.Start(t, 3))
	var out [2]*redlock.Client
	for i := range out {
		c, err := redlock.Dial(urls)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		out[i] = c
	}
	return out[0], out[1]
}

// TestReleaseKeepsMinimumHold: a Release before the minimum hold returns
// at once and leaves the key held, so that another replica's attempt for
// the same tick is refused; the key is free once the minimum hold has
// passed. A second Release says ErrReleased.
func TestReleaseKeepsMinimumHold(t *testing.T) {
	a, b := newClients(t)
	ctx := context.Background()
	const minHold = time.Second
	start := time.Now()
	h, err := minhold.Acquire(ctx, "test", a, "tick", time.Second, minHold, nil)
	require.NoError(t, err)
	require.NoError(t, h.Release(ctx), "want a deferred release to report nothing")
	if time.Since(start) < minHold/2 { // still well inside the minimum hold (not on a stalled machine)
		_, err = b.TryLock(ctx, "tick", time.Second)
		require.ErrorIs(t, err, redlock.ErrContended, "want the key held until the minimum hold has passed")
	}
	require.ErrorIs(t, h.Release(ctx), redlock.ErrReleased)
	require.Eventually(t, func() bool {
		l, err := b.TryLock(ctx, "tick", time.Second)
		if err != nil {
			return false
		}
		return l.Unlock(ctx) == nil
	}, 10*time.Second, 20*time.Millisecond, "want the key free after the minimum hold")
}

// TestObtainRetriesWithinItsWindow: a contended first attempt is retried
// for a quarter of the minimum hold, so a holder that lets go inside that
// window is followed; one that does not leaves ErrContended, not a
// cancellation, once the window ends.
func TestObtainRetriesWithinItsWindow(t *testing.T) {
	a, b := newClients(t)
	ctx := context.Background()
	held, err := a.TryLock(ctx, "k", 10*time.Second)
	require.NoError(t, err)
	_, err = minhold.Obtain(ctx, b, "k", time.Second, 400*time.Millisecond, nil)
	require.ErrorIs(t, err, redlock.ErrContended)
	require.NoError(t, held.Unlock(ctx))

	held, err = a.TryLock(ctx, "k", 10*time.Second)
	require.NoError(t, err)
	go func() {
		time.Sleep(50 * time.Millisecond) // inside the 2s window
		_ = held.Unlock(ctx)
	}()
	l, err := minhold.Obtain(ctx, b, "k", time.Second, 8*time.Second, nil)
	require.NoError(t, err, "want the lock once its holder let go inside the window")
	require.NoError(t, l.Unlock(ctx))

	// Without a minimum hold there is one attempt.
	held, err = a.TryLock(ctx, "k", 10*time.Second)
	require.NoError(t, err)
	_, err = minhold.Obtain(ctx, b, "k", time.Second, 0, nil)
	require.ErrorIs(t, err, redlock.ErrContended)
	require.NoError(t, held.Unlock(ctx))
}

// TestIsNil: nil, and interfaces holding nil pointers, are nil; values
// are not.
func TestIsNil(t *testing.T) {
	var c *redlock.Client
	var l *redlock.Client = c
	for _, tc := range []struct {
		v    any
		want bool
	}{
		{nil, true}, {c, true}, {l, true}, {error(nil), true},
		{errors.New("x"), false}, {3, false}, {"", false},
	} {
		require.Equal(t, tc.want, minhold.IsNil(tc.v), "%#v", tc.v)
	}
}
