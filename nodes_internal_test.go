package redlock

// The one test of internal/node's leader connection that stays in the
// root: it waits for requests to queue on the Client's node, which only
// the root's in-package tests can see. The rest of internal/node's tests
// that need a whole Client are in internal/node (*_client_test.go).

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
)

// gateHook holds the SET of one key (a lock's acquire) until open is
// closed, after signalling entered.
type gateHook struct {
	key     string
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); cmd.Name() == "set" && len(a) > 1 && a[1] == h.key {
			h.once.Do(func() { close(h.entered) })
			<-h.open
		}
		return next(ctx, cmd)
	}
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLeaderConnBatchAfterDrop: in one batch on the leader's own connection,
// a request that fails on the node (a permit refused for its limit)
// drops the connection; a later request of the same batch that must send
// a second command (a refused SET NX of a lock runs the acquire script)
// must send it on a live connection, not on the Tx just given back
// ("redis: client is closed"): the lock is taken by another holder, not
// a node failure.
func TestLeaderConnBatchAfterDrop(t *testing.T) {
	nodes := redistest.Nodes(t, 1)
	gate := &gateHook{key: t.Name() + "-gate", entered: make(chan struct{}), open: make(chan struct{})}
	cl := nodeClient(t, nodes[0], nil)
	cl.AddHook(gate)
	c, err := New([]redis.UniversalClient{cl}, WithNodeTimeout(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()

	// First contact, and a permit held under limit 2.
	sem := t.Name() + "-sem"
	p, err := c.TryAcquire(ctx, sem, 2, 10*time.Second)
	require.NoError(t, err)
	held := t.Name() + "-held"
	require.NoError(t, cl.Set(ctx, held, "someone-else-0123456789", 10*time.Second).Err())

	queued := func(n int) func() bool {
		return func() bool {
			return c.nodes[0].Queued() == n
		}
	}
	gateErr := make(chan error, 1)
	go func() {
		l, err := c.TryLock(ctx, gate.key, 10*time.Second)
		if err == nil {
			err = l.Unlock(ctx)
		}
		gateErr <- err
	}()
	select {
	case <-gate.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the gate's SET never went out")
	}
	semErr := make(chan error, 1)
	go func() {
		_, err := c.TryAcquire(ctx, sem, 3, 10*time.Second)
		semErr <- err
	}()
	eventually(t, 5*time.Second, queued(1), "the permit's request never queued")
	lockErr := make(chan error, 1)
	go func() {
		_, err := c.TryLock(ctx, held, 10*time.Second)
		lockErr <- err
	}()
	eventually(t, 5*time.Second, queued(2), "the lock's request never queued")
	close(gate.open)

	require.NoError(t, <-gateErr)
	err = <-semErr
	require.ErrorIs(t, err, ErrInvalid, "a permit under another limit")
	err = <-lockErr
	require.ErrorIs(t, err, ErrNotObtained)
	var qe *QuorumError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, statusTaken, qe.Nodes[0].Status, "want the key taken by its holder, got %v", qe.Nodes[0].Err)
	require.NoError(t, p.Unlock(ctx))
	require.NoError(t, c.Close())
	requireSettled(t, []redis.UniversalClient{cl})
}
