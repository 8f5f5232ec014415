package node_test

// Tests of internal/node's direct path (direct.go: a call that finds its
// node's pipe idle runs its own request on the caller's goroutine),
// through a one-node Client (helpers: client_helpers_test.go).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
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
	c := newTestClient(t, []redis.UniversalClient{rc}, redlock.WithNodeTimeout(nodeTimeout))
	t.Cleanup(func() { _ = nodes[0].Resume() })
	ctx := context.Background()

	// The direct path needs its connection, taken in the background, and
	// gives it back when idle: cycle until the stopped node's call takes
	// it (a call handed to the leader instead is bounded as well).
	var k string
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 50, "no call took the direct path")
		for range 20 {
			l, err := c.TryLock(ctx, key0(t), 5*time.Second)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(ctx))
		}
		k = key0(t)
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
		// The node's slow mark bars the direct path for a second
		// (internal/node's directSlowFor): a window of time that no
		// event ends, waited out so that the next attempt may take it.
		time.Sleep(1100 * time.Millisecond)
	}
	// The SET may still have been in the stopped server's socket: the
	// failed acquire is released as possibly landed.
	require.Eventually(t, func() bool {
		n, err := rc.Exists(ctx, k).Result()
		return err == nil && n == 0
	}, 4*time.Second, 20*time.Millisecond, "the cut-short acquire left its key")
}

// TestOneNodeCallReturnsAtCtxEnd: a Client of one node whose calls may
// run on the caller's goroutine (the direct path) returns at ctx's end
// when the node stops answering, as a Client of many does, though its
// per-node timeout is far longer: the direct path, which cannot be cut
// short, is not taken for a ctx that can end with a per-node timeout
// that long. Several attempts, each after back-to-back calls that make
// the direct path ready.
func TestOneNodeCallReturnsAtCtxEnd(t *testing.T) {
	nodes := redistest.Nodes(t, 1)
	rc := redis.NewClient(&redis.Options{Addr: nodes[0].Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	const nodeTimeout = 12 * time.Second // a direct request may wait 2s a read
	const ctxFor = 50 * time.Millisecond
	const bound = 1500 * time.Millisecond // ctxFor on a loaded 2-core machine, under -race
	c := newTestClient(t, []redis.UniversalClient{rc}, redlock.WithNodeTimeout(nodeTimeout))
	t.Cleanup(func() { _ = nodes[0].Resume() })
	ctx := context.Background()
	for range 3 {
		for range 20 {
			l, err := c.TryLock(ctx, key0(t), 30*time.Second)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(ctx))
		}
		require.NoError(t, nodes[0].Pause())
		cctx, cancel := context.WithTimeout(ctx, ctxFor)
		start := time.Now()
		_, err := c.TryLock(cctx, key0(t), 30*time.Second)
		took := time.Since(start)
		cancel()
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Less(t, took, bound, "want TryLock to return at its ctx's end")
		require.NoError(t, nodes[0].Resume())
	}
}

// TestDirectPathCancellableCtx: with a short per-node timeout, calls
// whose ctx can end (a cancellable one, or a deadline further away than
// that timeout) take the direct path, and a call with a nearer deadline
// does not; a cancellation during a direct call on a stopped node is
// felt within the per-node timeout.
func TestDirectPathCancellableCtx(t *testing.T) {
	nodes := redistest.Nodes(t, 1)
	rc := redis.NewClient(&redis.Options{Addr: nodes[0].Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	const nodeTimeout = 200 * time.Millisecond // the longest that allows it
	const margin = 900 * time.Millisecond      // a loaded 2-core machine under -race
	c := newTestClient(t, []redis.UniversalClient{rc}, redlock.WithNodeTimeout(nodeTimeout))
	t.Cleanup(func() { _ = nodes[0].Resume() })
	cycle := func(ctx context.Context) {
		t.Helper()
		l, err := c.TryLock(ctx, key0(t), 30*time.Second)
		if err != nil {
			// A direct request's read is bounded by a third of the
			// timeout, which a stalled machine may miss: a failed
			// attempt, which is not what this test is about.
			require.ErrorIs(t, err, redlock.ErrNotObtained)
			return
		}
		require.NoError(t, l.Unlock(context.Background()))
	}
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	far, cancelFar := context.WithTimeout(context.Background(), time.Minute)
	defer cancelFar()
	for name, ctx := range map[string]context.Context{"cancellable": cctx, "far deadline": far} {
		before := node.DirectRuns()
		for range 50 {
			cycle(ctx)
		}
		require.Greater(t, node.DirectRuns(), before, "%s: want calls on the direct path", name)
	}
	// A deadline nearer than the per-node timeout stays on the leader.
	for range 20 {
		cycle(cctx) // makes the direct path ready
	}
	near, cancelNear := context.WithTimeout(context.Background(), nodeTimeout/2)
	before := node.DirectRuns()
	l, err := c.TryLock(near, key0(t), 30*time.Second)
	cancelNear()
	require.Equal(t, before, node.DirectRuns(), "want a deadline nearer than the per-node timeout kept on the leader")
	if err == nil {
		require.NoError(t, l.Unlock(context.Background()))
	}

	// Cancelled mid-call on a stopped node: back within the timeout.
	for range 20 {
		cycle(cctx)
	}
	require.NoError(t, nodes[0].Pause())
	ctx, stop := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, stop)
	start := time.Now()
	_, err = c.TryLock(ctx, key0(t), 30*time.Second)
	took := time.Since(start)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.Less(t, took, nodeTimeout+margin, "want the call back within its per-node timeout of the cancellation")
	require.NoError(t, nodes[0].Resume())
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
	c := newTestClient(t, []redis.UniversalClient{rc}, redlock.WithNodeTimeout(time.Second))
	ctx := context.Background()
	const workers, keys, rounds = 16, 4, 200
	base := key0(t)
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
