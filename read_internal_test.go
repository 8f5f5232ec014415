package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/seed543a70bd/redlock/internal/wire"
	"github.com/stretchr/testify/require"
)

// TestQuorumCount: what k of the answered nodes hold is on a quorum
// surely when k alone makes it, possibly when the unanswered could make
// up the rest, and neither otherwise.
func TestQuorumCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		k, answered, n, need int
		sure, may            bool
	}{
		{3, 5, 5, 3, true, true},
		{2, 5, 5, 3, false, false},
		{2, 4, 5, 3, false, true},
		{0, 0, 5, 3, false, true},
		{0, 3, 5, 3, false, false},
		{1, 1, 1, 1, true, true},
		{0, 1, 1, 1, false, false},
		{0, 0, 0, 0, true, true}, // no nodes: nothing to miss
	} {
		sure, may := quorumCount(tc.k, tc.answered, tc.n, tc.need)
		require.Equal(t, tc.sure, sure, "%+v: sure", tc)
		require.Equal(t, tc.may, may, "%+v: may", tc)
		require.False(t, sure && !may, "%+v: sure but not possible", tc)
	}
}

// inspectReq is a read of key k for a client of n nodes.
func inspectReq(n int, k string) *wire.Request {
	return wire.InspectRequest(n, [3]string{k, fenceKey(k), readersKey(k)})
}

// requireSettledReplies fails t when a reply of reps is still pending:
// readAll fails every node that did not answer.
func requireSettledReplies(t *testing.T, reps []wire.Reply) {
	t.Helper()
	for i, rep := range reps {
		require.NotEqual(t, wire.StatusPending, rep.St, "node %d: pending after readAll returned", i)
		if rep.St == wire.StatusFailed {
			require.Error(t, rep.Err, "node %d: failed without an error", i)
		}
	}
}

// requireEndedByCtx checks a read whose ctx was cancelled: it says so,
// or every node failed first, each with ctx's error.
func requireEndedByCtx(t *testing.T, reps []wire.Reply, err error) {
	t.Helper()
	requireSettledReplies(t, reps)
	if err != nil {
		require.ErrorIs(t, err, context.Canceled)
		return
	}
	for i, rep := range reps {
		require.ErrorIs(t, rep.Err, context.Canceled, "node %d", i)
	}
}

// TestReadAllWaitsForSilentNodeOnlyUntilTimeout: a read of three nodes,
// one paused, returns the two answers and fails the silent node with
// errNodeTimeout, within its timeout (bounded loosely: a loaded machine
// adds seconds, a wait for the node would add forever).
func TestReadAllWaitsForSilentNodeOnlyUntilTimeout(t *testing.T) {
	t.Parallel()
	nodes := redistest.Nodes(t, 3)
	c := newTestClient(t, nodeClients(t, nodes, nil))
	ctx := context.Background()
	k := "read-silent"
	reps, _, err := readAll(ctx, c, inspectReq(3, k), time.Second) // every node contacted once
	require.NoError(t, err)
	requireSettledReplies(t, reps)
	require.NoError(t, nodes[2].Pause())
	t.Cleanup(func() { _ = nodes[2].Resume() })
	start := time.Now()
	reps, lats, err := readAll(ctx, c, inspectReq(3, k), 200*time.Millisecond)
	took := time.Since(start)
	require.NoError(t, err)
	require.Less(t, took, 10*time.Second, "a read waited for a paused node")
	require.Equal(t, wire.StatusOK, reps[0].St, "node 0: %v", reps[0].Err)
	require.Equal(t, wire.StatusOK, reps[1].St, "node 1: %v", reps[1].Err)
	require.Equal(t, wire.StatusFailed, reps[2].St)
	require.ErrorIs(t, reps[2].Err, errNodeTimeout)
	require.GreaterOrEqual(t, lats[2], 200*time.Millisecond, "the silent node failed before the timeout")
}

// TestReadAllEndsWithCtx: a read whose ctx ends, before it starts or
// while a node is silent, returns ctx's error at once rather than at its
// timeout (an hour here), on three nodes and on the one-node direct path.
func TestReadAllEndsWithCtx(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprint(n, " nodes"), func(t *testing.T) {
			t.Parallel()
			nodes := redistest.Nodes(t, n)
			c := newTestClient(t, nodeClients(t, nodes, nil))
			k := "read-ctx"
			_, _, err := readAll(context.Background(), c, inspectReq(n, k), time.Second)
			require.NoError(t, err)

			done, cancel := context.WithCancel(context.Background())
			cancel()
			reps, _, err := readAll(done, c, inspectReq(n, k), time.Hour)
			requireEndedByCtx(t, reps, err)

			last := nodes[n-1]
			require.NoError(t, last.Pause())
			t.Cleanup(func() { _ = last.Resume() })
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel) // while the read waits for the paused node
			type result struct {
				reps []wire.Reply
				err  error
			}
			res := make(chan result, 1)
			go func() {
				reps, _, err := readAll(ctx, c, inspectReq(n, k), time.Hour)
				res <- result{reps, err}
			}()
			select {
			case r := <-res:
				requireEndedByCtx(t, r.reps, r.err)
				require.Equal(t, wire.StatusFailed, r.reps[n-1].St, "the paused node answered")
			case <-time.After(10 * time.Second):
				t.Fatal("a read whose ctx ended still waits for a paused node")
			}
		})
	}
}

// TestReadAllConcurrentAndTiny: reads from many goroutines on one
// Client, with timeouts from 1ns to 1s, each return every node's answer
// or failure, never a pending reply or an error other than a timeout.
func TestReadAllConcurrentAndTiny(t *testing.T) {
	t.Parallel()
	nodes := redistest.Nodes(t, 3)
	c := newTestClient(t, nodeClients(t, nodes, nil))
	timeouts := []time.Duration{1, time.Microsecond, time.Millisecond, 10 * time.Millisecond, time.Second}
	var wg sync.WaitGroup
	errs := make(chan error, 64*len(timeouts))
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, to := range timeouts {
				k := fmt.Sprintf("read-many-%d", (g+j)%4)
				reps, _, err := readAll(context.Background(), c, inspectReq(3, k), to)
				if err != nil {
					errs <- fmt.Errorf("timeout %v: %w", to, err)
					continue
				}
				for i, rep := range reps {
					switch {
					case rep.St == wire.StatusPending:
						errs <- fmt.Errorf("timeout %v, node %d: pending", to, i)
					case rep.St == wire.StatusFailed && !errors.Is(rep.Err, errNodeTimeout) && !errors.Is(rep.Err, context.DeadlineExceeded):
						errs <- fmt.Errorf("timeout %v, node %d: %w", to, i, rep.Err)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The 1s reads of a loaded machine's quiet nodes: most were answered.
	reps, _, err := readAll(context.Background(), c, inspectReq(3, "read-many-0"), 5*time.Second)
	require.NoError(t, err)
	for i, rep := range reps {
		require.Equal(t, wire.StatusOK, rep.St, "node %d: %v", i, rep.Err)
	}
}
