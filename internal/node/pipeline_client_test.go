package node_test

// Tests of internal/node that drive a whole Client (helpers:
// client_helpers_test.go). The pipeline: queued requests batched in
// order, leaders that park and end.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
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

// pipelineCounter counts the pipelines of more than one command that a
// client sends.
type pipelineCounter struct{ batches, cmds atomic.Int64 }

func (h *pipelineCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 1 {
			h.batches.Add(1)
			h.cmds.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}

// hammer runs workers goroutines that each lock and at once unlock n
// distinct keys, and fails the test on any error. During the run, fault
// (if not nil) is called once.
func hammer(t *testing.T, c *redlock.Client, workers, n int, fault func()) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed atomic.Int64
	var first atomic.Pointer[error]
	for w := range workers {
		wg.Go(func() {
			for i := range n {
				l, err := c.TryLock(ctx, fmt.Sprintf("%s-%d-%d", t.Name(), w, i), 10*time.Second)
				if err == nil {
					err = l.Unlock(ctx)
				}
				if err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	if fault != nil {
		fault()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		t.Fatalf("%d of %d lock+unlock cycles failed; first: %v", failed.Load(), workers*n, *p)
	}
}

// requireNoKeys waits (bounded) until every node is empty: the keys live
// 10 s, so a key left behind by a release that overtook its acquire
// outlives the wait. The wait is long because Unlock returns at a
// quorum, and the other nodes' releases (retried in the background when
// they time out on a loaded machine) may land seconds later.
func requireNoKeys(t *testing.T, clients []redis.UniversalClient) {
	t.Helper()
	deadline := time.Now().Add(8 * time.Second)
	for {
		left := 0
		for _, cl := range clients {
			n, err := cl.DBSize(context.Background()).Result()
			require.NoError(t, err)
			left += int(n)
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keys left on the nodes 8s after every Unlock returned: a release ran before its acquire", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPipelineBatchesInOrder: under concurrency, requests queued for a busy
// node go out in pipelines of several commands, and a node still runs
// each lock's release after its acquire: nothing is left behind, although
// Unlock no longer sends a second release for grants that arrive after
// it started.
func TestPipelineBatchesInOrder(t *testing.T) {
	nodes := redistest.Nodes(t, 5)
	clients := redistest.Clients(t, nodes)
	h := new(pipelineCounter)
	for _, cl := range clients {
		cl.(*redis.Client).AddHook(h)
	}
	// A per-node timeout of seconds: the subject is batching and order,
	// and the default (200ms for these 10s locks) failed cycles at load
	// 25 and more.
	c, err := redlock.New(clients, redlock.WithNodeTimeout(2*time.Second))
	require.NoError(t, err)

	hammer(t, c, 32, 100, nil)
	requireNoKeys(t, clients)
	require.Positive(t, h.batches.Load(), "32 goroutines never produced a pipeline of more than one command")
	t.Logf("%d pipelines of %.1f commands on average", h.batches.Load(), float64(h.cmds.Load())/float64(h.batches.Load()))
}

// TestPipelineNoScriptInBatch: nodes that lose their script cache while
// batches are in flight (SCRIPT FLUSH, as after a restart) answer NOSCRIPT
// in the middle of pipelines. Requests are run again with EVAL in their
// place, or failed when a later request of the same lock already ran, so
// no acquire lands after its own release: nothing is left behind.
func TestPipelineNoScriptInBatch(t *testing.T) {
	nodes := redistest.Nodes(t, 5)
	clients := redistest.Clients(t, nodes)
	c, err := redlock.New(clients)
	require.NoError(t, err)

	lp := newLoops(t)
	var flushes atomic.Int64
	lp.run(func(int) {
		for _, cl := range clients {
			if cl.ScriptFlush(context.Background()).Err() == nil {
				flushes.Add(1)
			}
		}
		time.Sleep(time.Millisecond)
	})
	ctx := context.Background()
	var n, lost atomic.Int64
	var workers sync.WaitGroup
	for w := range 16 {
		workers.Go(func() {
			for i := range 100 {
				l, err := c.TryLock(ctx, fmt.Sprintf("%s-%d-%d", t.Name(), w, i), 10*time.Second)
				n.Add(1)
				if err != nil {
					lost.Add(1) // NOSCRIPT failures may cost a vote
					continue
				}
				_ = l.Unlock(ctx)
			}
		})
	}
	workers.Wait()
	lp.stop()
	require.Positive(t, flushes.Load())
	require.Less(t, lost.Load(), n.Load()/2, "most attempts must still win")
	requireNoKeys(t, clients)
}

// TestPipelineLeaderParksThenEnds: a node's leader serves the requests of
// back-to-back rounds without a new goroutine per request (the same
// parked goroutines before and after), and ends node.LeaderLinger after the
// last request although the client is never closed.
//
// The count is of the whole process, so the test first waits for the
// leaders of earlier tests' clients to end. A stall longer than
// node.LeaderLinger (on a loaded machine the leaders may end before the
// first look) ends the leaders between two looks, so the check is made up to 5 times and must hold once; a
// leader per request, or one that never parks, fails all 5.
func TestPipelineLeaderParksThenEnds(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	c, err := redlock.New(redistest.Clients(t, nodes))
	require.NoError(t, err)
	ctx := context.Background()
	cycle := func() {
		t.Helper()
		l, err := c.TryLock(ctx, t.Name(), 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(ctx))
	}
	// parked polls for want parked leaders for up to d.
	parked := func(want int, d time.Duration) ([]string, bool) {
		var ids []string
		for deadline := time.Now().Add(d); ; time.Sleep(time.Millisecond) {
			ids = parkedLeaders()
			if len(ids) == want {
				return ids, true
			}
			if time.Now().After(deadline) {
				return ids, false
			}
		}
	}
	ids, ok := parked(0, 5*time.Second)
	require.True(t, ok, "leaders of earlier tests still parked after 5s: %v", ids)
	var why string
	for attempt := 1; attempt <= 5; attempt++ {
		cycle()
		first, ok := parked(3, node.LeaderLinger/2)
		if !ok {
			why = fmt.Sprintf("after one cycle, %d parked leaders, want 3", len(first))
			_, _ = parked(0, 5*time.Second)
			continue
		}
		for range 20 {
			cycle()
		}
		again, ok := parked(3, node.LeaderLinger/2)
		if ok && slices.Equal(first, again) {
			why = ""
			break
		}
		why = fmt.Sprintf("want the same 3 leader goroutines after 20 cycles: %v, then %v", first, again)
		_, _ = parked(0, 5*time.Second)
	}
	require.Empty(t, why, "in 5 attempts")
	ids, ok = parked(0, 5*time.Second) // node.LeaderLinger after the last request, with no Close
	require.True(t, ok, "leaders still parked 5s after the last request: %v", ids)
}

// parkedLeaders returns the ids of the goroutines parked in a pipe
// leader's wait, sorted.
func parkedLeaders() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var ids []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "node.(*Node).park(") {
			id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestPipelineLeadersEndAfterChurn: after a while of 16 clients contending
// for 4 keys (leaders parking and woken all the time, some just as their
// linger ends), every leader ends node.LeaderLinger after its last request.
// It pins a leader whose wait timer was spent by a linger that ended at
// the instant new work came: that leader must not park for good.
func TestPipelineLeadersEndAfterChurn(t *testing.T) {
	nodes := redistest.Nodes(t, 5)
	var cs []*redlock.Client
	for range 16 {
		c, err := redlock.New(redistest.Clients(t, nodes))
		require.NoError(t, err)
		cs = append(cs, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			for ctx.Err() == nil {
				lctx, stop := context.WithTimeout(ctx, time.Second)
				l, err := c.Lock(lctx, fmt.Sprintf("%s-%d", t.Name(), rand.IntN(4)), 10*time.Second)
				stop()
				if err == nil {
					time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
					_ = l.Unlock(context.Background())
				}
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(2 * time.Second)
	for n := len(parkedLeaders()); n > 0; n = len(parkedLeaders()) {
		if time.Now().After(deadline) {
			t.Fatalf("want every leader ended %v after the load, got %d still parked", node.LeaderLinger, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
