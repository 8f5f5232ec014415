package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
)

// TestNewRejects: New names what is wrong with its input.
func TestNewRejects(t *testing.T) {
	_, clients := cluster(t, 3)
	other := redis.NewClient(&redis.Options{Addr: clients[0].(*redis.Client).Options().Addr})
	t.Cleanup(func() { _ = other.Close() })
	for _, tc := range []struct {
		name  string
		nodes []redis.UniversalClient
		opts  []redlock.Option
		want  string
		dup   bool
	}{
		{"no nodes", nil, nil, "no nodes", false},
		{"nil node", []redis.UniversalClient{clients[0], nil}, nil, "node 2 is nil", false},
		{"typed nil", []redis.UniversalClient{(*redis.Client)(nil)}, nil, "node 1 is nil", false},
		{"same client", []redis.UniversalClient{clients[0], clients[1], clients[0]}, nil, "nodes 1 and 3 are the same client", true},
		{"same address", []redis.UniversalClient{clients[0], other}, nil, "nodes 1 and 2 both address", true},
		{"drift", clients, []redlock.Option{redlock.WithDriftFactor(0.5)}, "drift factor", false},
		{"negative drift", clients, []redlock.Option{redlock.WithDriftFactor(-1)}, "drift factor", false},
		{"node timeout", clients, []redlock.Option{redlock.WithNodeTimeout(0)}, "node timeout", false},
		{"retry delay", clients, []redlock.Option{redlock.WithRetryDelay(-time.Second)}, "retry delay", false},
		{"max tries", clients, []redlock.Option{redlock.WithMaxTries(-1)}, "max tries", false},
		{"nil option", clients, []redlock.Option{nil}, "nil Option", false},
		{"token on client", clients, []redlock.Option{redlock.WithToken("0123456789abcdef")}, "per-call option", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redlock.New(tc.nodes, tc.opts...)
			require.Nil(t, c)
			require.ErrorIs(t, err, redlock.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
			if tc.dup {
				require.ErrorIs(t, err, redlock.ErrDuplicateNode)
			}
		})
	}
}

// TestCallRejects: calls name what is wrong with their input, send
// nothing, and never panic.
func TestCallRejects(t *testing.T) {
	_, clients := cluster(t, 3)
	c := newClient(t, clients)
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	var nilCtx context.Context
	for _, tc := range []struct {
		name string
		call func() error
		want []error
		msg  string
	}{
		{"empty key", func() error { _, err := c.TryLock(ctx, "", time.Second); return err }, []error{redlock.ErrInvalid}, "empty key"},
		{"empty key Lock", func() error { _, err := c.Lock(ctx, "", time.Second); return err }, []error{redlock.ErrInvalid}, "empty key"},
		{"zero ttl", func() error { _, err := c.TryLock(ctx, "k", 0); return err }, []error{redlock.ErrInvalid}, "ttl must be positive, got 0s"},
		{"negative ttl", func() error { _, err := c.Lock(ctx, "k", -time.Second); return err }, []error{redlock.ErrInvalid}, "ttl must be positive, got -1s"},
		{"tiny ttl", func() error { _, err := c.TryLock(ctx, "k", 2*time.Millisecond); return err }, []error{redlock.ErrInvalid}, "leaves no validity"},
		{"nil ctx", func() error { _, err := c.TryLock(nilCtx, "k", time.Second); return err }, []error{redlock.ErrInvalid}, "nil context"},
		{"cancelled ctx", func() error { _, err := c.TryLock(cancelled, "k", time.Second); return err }, []error{redlock.ErrNotObtained, context.Canceled}, "canceled"},
		{"cancelled ctx Lock", func() error { _, err := c.Lock(cancelled, "k", time.Second); return err }, []error{redlock.ErrNotObtained, context.Canceled}, "canceled"},
		{"bad call option", func() error { _, err := c.TryLock(ctx, "k", time.Second, redlock.WithNodeTimeout(-1)); return err }, []error{redlock.ErrInvalid}, "node timeout"},
		{"short token", func() error { _, err := c.TryLock(ctx, "k", time.Second, redlock.WithToken("abc")); return err }, []error{redlock.ErrInvalid}, "token of 3 bytes"},
		{"nil lock Unlock", func() error { return (*redlock.Lock)(nil).Unlock(ctx) }, []error{redlock.ErrInvalid}, "nil *Lock"},
		{"nil lock Extend", func() error { return (*redlock.Lock)(nil).Extend(ctx, time.Second) }, []error{redlock.ErrInvalid}, "nil *Lock"},
		{"nil client", func() error { _, err := (*redlock.Client)(nil).TryLock(ctx, "k", time.Second); return err }, []error{redlock.ErrInvalid}, "nil *Client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			for _, w := range tc.want {
				require.ErrorIs(t, err, w)
			}
			require.ErrorContains(t, err, tc.msg)
		})
	}
	var nl *redlock.Lock
	require.Empty(t, nl.Key())
	require.Empty(t, nl.Token())
	require.Zero(t, nl.Validity())

	l, err := c.TryLock(ctx, key(t), time.Second)
	require.NoError(t, err)
	require.ErrorIs(t, l.Extend(nilCtx, time.Second), redlock.ErrInvalid)
	require.ErrorIs(t, l.Extend(ctx, 0), redlock.ErrInvalid)
	require.ErrorIs(t, l.Unlock(nilCtx), redlock.ErrInvalid)
	require.NoError(t, l.Unlock(ctx))
	for _, cl := range clients {
		require.Empty(t, get(t, cl, "k"), "a rejected call sent nothing")
	}
}

// TestDuplicateByRunID: one server reached under two addresses is caught
// by its run_id on first contact, and counted once.
func TestDuplicateByRunID(t *testing.T) {
	nodes, clients := cluster(t, 3)
	alias := redis.NewClient(&redis.Options{Addr: strings.Replace(nodes[0].Addr(), "127.0.0.1", "localhost", 1)})
	t.Cleanup(func() { _ = alias.Close() })
	c, err := redlock.New([]redis.UniversalClient{clients[0], clients[1], alias})
	require.NoError(t, err, "New does no I/O")
	k := key(t)
	_, err = c.TryLock(context.Background(), k, time.Second)
	require.ErrorIs(t, err, redlock.ErrDuplicateNode)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorContains(t, err, "same server (run_id")
	_, err = c.Lock(context.Background(), k, time.Second)
	require.ErrorIs(t, err, redlock.ErrDuplicateNode, "the client stays refused")
	for _, cl := range clients {
		eventually(t, time.Second, func() bool { return get(t, cl, k) == "" }, "the refused attempt left a key")
	}
}

// TestZeroLock: a zero Lock and a nil *Client answer with errors or zero
// values, never a panic.
func TestZeroLock(t *testing.T) {
	ctx := context.Background()
	var l redlock.Lock
	require.ErrorIs(t, l.Unlock(ctx), redlock.ErrInvalid)
	require.ErrorIs(t, l.Extend(ctx, time.Second), redlock.ErrInvalid)
	require.ErrorContains(t, l.Extend(ctx, time.Second), "zero Lock")
	require.Empty(t, l.Key())
	require.Empty(t, l.Keys())
	require.Empty(t, l.Token())
	require.LessOrEqual(t, l.Validity(), time.Duration(0))
	require.Zero(t, l.TTL())
	require.Zero(t, l.Fence())
	require.Zero(t, l.Extensions())
	<-l.Done()
	require.ErrorIs(t, l.Err(), redlock.ErrNotHeld)
	require.Error(t, l.AutoExtend(ctx))

	var c *redlock.Client
	require.Zero(t, c.Nodes())
	require.Zero(t, c.Quorum())
}

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
			require.Equal(t, redlock.NodePending, n.Status, "nothing was sent: %v", n)
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
