package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

// TestDirectPathStoppedNodeBounded: a Client of one node whose calls run
// on the caller's goroutine (the direct path) still returns within the
// per-node timeout when the node stops answering (SIGSTOP), with go-redis's
// default options (a 3s read timeout, retries on timeouts); and the acquire
// it cut short, which may land once the node resumes, is released.
func TestDirectPathStoppedNodeBounded(t *testing.T) {
	nodes := redistest.Nodes(t, 1)
	rc := redis.NewClient(&redis.Options{Addr: nodes[0].Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	const nodeTimeout = 60 * time.Millisecond
	const margin = 400 * time.Millisecond // a loaded 2-core machine under -race
	c := newClient(t, []redis.UniversalClient{rc}, redlock.WithNodeTimeout(nodeTimeout))
	t.Cleanup(func() { _ = nodes[0].Resume() })
	ctx := context.Background()

	// The direct path needs its connection, taken in the background, and
	// gives it back when idle: cycle until the stopped node's call takes
	// it (a call handed to the leader instead is bounded as well).
	var k string
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 50, "no call took the direct path")
		for range 20 {
			l, err := c.TryLock(ctx, key(t), 5*time.Second)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(ctx))
		}
		k = key(t)
		before := node.DirectRuns()
		require.NoError(t, nodes[0].Pause())
		start := time.Now()
		_, err := c.TryLock(ctx, k, 5*time.Second)
		took := time.Since(start)
		direct := node.DirectRuns() > before
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		require.Less(t, took, nodeTimeout+margin, "direct: %v", direct)
		require.NoError(t, nodes[0].Resume())
		if direct {
			break
		}
		// The round's clean-up and the node's slow mark: wait them out.
		time.Sleep(1100 * time.Millisecond)
	}
	// The SET may still have been in the stopped server's socket: the
	// failed acquire is released as possibly landed.
	require.Eventually(t, func() bool {
		n, err := rc.Exists(ctx, k).Result()
		return err == nil && n == 0
	}, 4*time.Second, 20*time.Millisecond, "the cut-short acquire left its key")
}

// TestDirectPathMixedWithLeader: goroutines of a one-node Client contend
// for a few keys, so that calls that find the node's pipe idle run their
// own requests while others queue behind them and go out on the leader:
// no two holders of a key at once, every lock released, and no request
// left behind (the keys are gone once every Unlock returned).
func TestDirectPathMixedWithLeader(t *testing.T) {
	nodes := redistest.Nodes(t, 1)
	rc := redis.NewClient(&redis.Options{Addr: nodes[0].Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	c := newClient(t, []redis.UniversalClient{rc}, redlock.WithNodeTimeout(time.Second))
	ctx := context.Background()
	const workers, keys, rounds = 16, 4, 200
	base := key(t)
	var holders [keys]atomic.Int32
	before := node.DirectRuns()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				k := (w + i) % keys
				l, err := c.TryLock(ctx, fmt.Sprintf("%s-%d", base, k), 10*time.Second)
				if errors.Is(err, redlock.ErrNotObtained) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if n := holders[k].Add(1); n != 1 {
					errs <- fmt.Errorf("key %d: %d holders at once", k, n)
					return
				}
				holders[k].Add(-1)
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Greater(t, node.DirectRuns(), before, "no call took the direct path")
	for k := range keys {
		n, err := rc.Exists(ctx, fmt.Sprintf("%s-%d", base, k)).Result()
		require.NoError(t, err)
		require.Zero(t, n, "key %d left behind", k)
	}
}
