package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
)

// requireAllNodes checks that err is a *QuorumError listing every node of
// clients, in order, with its address.
func requireAllNodes(t *testing.T, err error, clients []redis.UniversalClient) *redlock.QuorumError {
	t.Helper()
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Len(t, qe.Nodes, len(clients))
	for i, n := range qe.Nodes {
		if n.Node != i || n.Addr != clients[i].(*redis.Client).Options().Addr {
			t.Fatalf("want node %d at %s, got %v", i, clients[i].(*redis.Client).Options().Addr, n)
		}
	}
	return qe
}

// TestExtendUnlockErrorsListNodes: every error of Extend and Unlock on a
// lock reaches a *QuorumError that lists every node, and keeps matching
// its sentinels.
func TestExtendUnlockErrorsListNodes(t *testing.T) {
	_, clients := cluster(t, 3)
	c := newClient(t, clients)
	ctx := context.Background()
	pending := func(t *testing.T, qe *redlock.QuorumError) {
		t.Helper()
		for _, n := range qe.Nodes {
			require.Equal(t, "pending", n.Status, "nothing was sent: %v", n)
		}
	}

	t.Run("ctx done", func(t *testing.T) {
		l, err := c.TryLock(ctx, key(t), 10*time.Second)
		require.NoError(t, err)
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		err = l.Extend(cancelled, 10*time.Second)
		require.ErrorIs(t, err, context.Canceled)
		pending(t, requireAllNodes(t, err, clients))
		require.NoError(t, l.Unlock(ctx))
	})

	t.Run("expired", func(t *testing.T) {
		l, err := c.TryLock(ctx, key(t), 50*time.Millisecond)
		require.NoError(t, err)
		<-l.Done()
		eventually(t, time.Second, func() bool { return l.Validity() <= 0 }, "validity never ran out")
		err = l.Extend(ctx, 10*time.Second)
		require.ErrorIs(t, err, redlock.ErrNotHeld)
		require.ErrorIs(t, err, redlock.ErrExpired)
		pending(t, requireAllNodes(t, err, clients))
		for i, cl := range clients {
			eventually(t, time.Second, func() bool { return get(t, cl, l.Key()) == "" }, "node %d: key outlived its TTL", i)
		}
		err = l.Unlock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotHeld)
		requireAllNodes(t, err, clients)
	})

	t.Run("after Unlock", func(t *testing.T) {
		l, err := c.TryLock(ctx, key(t), 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(ctx))
		err = l.Extend(ctx, 10*time.Second)
		require.ErrorIs(t, err, redlock.ErrNotHeld)
		require.ErrorIs(t, err, redlock.ErrReleased)
		pending(t, requireAllNodes(t, err, clients))
	})
}

// TestLostLockErrorsMatchSentinels: a lost lock's errors match ErrLockLost, ErrNotHeld
// and, through errors.As, a *QuorumError; a hold limit adds ErrHoldLimit.
func TestLostLockErrorsMatchSentinels(t *testing.T) {
	t.Parallel()
	// Leases of seconds and the tests' generous per-node timeout: the
	// subject is how a loss reads, so no stall of a loaded machine may
	// lose the locks another way first (a 200ms lease with a 20ms node
	// timeout lost its first extension to a stall at load 4-6).
	clients, rl := threeNodes(t)
	ctx := context.Background()
	k := key(t)
	l, err := rl.TryLock(ctx, k, 2*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.AutoExtend(ctx))
	for _, c := range clients {
		require.NoError(t, c.Set(ctx, k, foreignToken, time.Minute).Err())
	}
	awaitDone(t, l, 10*time.Second, "Done never closed after the key was taken")
	e := l.Err()
	require.ErrorIs(t, e, redlock.ErrLockLost)
	require.ErrorIs(t, e, redlock.ErrNotHeld)
	var qe *redlock.QuorumError
	require.True(t, errors.As(e, &qe), "want a *QuorumError in %v", e)
	require.False(t, strings.Contains(e.Error(), "redlock: redlock:"), "message repeats its prefix: %q", e.Error())
	t.Logf("lost: %v", e)

	k2 := key(t)
	l2, err := rl.TryLock(ctx, k2, 2*time.Second, redlock.WithMaxExtensions(1))
	require.NoError(t, err)
	require.NoError(t, l2.AutoExtend(ctx))
	awaitDone(t, l2, 10*time.Second, "Done never closed after the hold limit")
	e2 := l2.Err()
	require.ErrorIs(t, e2, redlock.ErrLockLost)
	require.ErrorIs(t, e2, redlock.ErrHoldLimit)
	require.ErrorIs(t, e2, redlock.ErrNotHeld)
	t.Logf("limit: %v", e2)
	_ = l2.Unlock(ctx)
	_ = l.Unlock(ctx)
}
