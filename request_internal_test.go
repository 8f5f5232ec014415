package redlock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/seed543a70bd/redlock/internal/wire"
	"github.com/stretchr/testify/require"
)

// TestLowerFloor: a floor only ever goes down, 0 (none) is replaced by
// the first TTL, and lowerings from many goroutines at once end at the
// least of them.
func TestLowerFloor(t *testing.T) {
	t.Parallel()
	var f atomic.Int64
	lowerFloor(&f, 5*time.Second)
	require.Equal(t, int64(5*time.Second), f.Load())
	lowerFloor(&f, 9*time.Second)
	require.Equal(t, int64(5*time.Second), f.Load(), "a floor went up")
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				lowerFloor(&f, time.Duration(1000+(g*100+i)*7%5000)*time.Millisecond)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(time.Second), f.Load())
}

// argStrings returns node i's command of w as strings.
func argStrings(w *wire.Request, i int) []string {
	var out []string
	for _, a := range w.Args(i) {
		out = append(out, fmt.Sprint(a))
	}
	return out
}

// TestRequestPrepare: what prepare puts on the wire for every node: the
// keys with the key prefix, a fenced lock's counters beside them, and an
// announced release's channel under the prefix.
func TestRequestPrepare(t *testing.T) {
	t.Parallel()
	acq := &request{w: wire.Request{Op: opAcquire, Token: "tok", TTL: time.Second, Fenced: true}, keys: []string{"a", "b"}, prefix: "p:"}
	acq.prepare(3)
	for i := range 3 {
		args := argStrings(&acq.w, i)
		for _, k := range []string{"p:a", "p:b", fenceKey("p:a"), fenceKey("p:b")} {
			require.Contains(t, args, k, "node %d", i)
		}
		require.NotContains(t, args, "a", "node %d: a key without its prefix", i)
	}
	rel := &request{w: wire.Request{Op: opRelease, Token: "tok", Notify: true}, keys: []string{"a"}, prefix: "p:"}
	rel.prepare(3)
	args := argStrings(&rel.w, 0)
	require.Contains(t, args, "p:a")
	require.True(t, slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "p:"+releasePrefix) }),
		"want the release channel under the prefix in %q", args)
}

// TestExecOneNode: exec runs a request on one node, preparing it for one
// when it was not; a cancelled ctx fails it with ctx's error and takes
// nothing.
func TestExecOneNode(t *testing.T) {
	t.Parallel()
	nodes := redistest.Nodes(t, 3)
	clients := nodeClients(t, nodes, nil)
	c := newTestClient(t, clients)
	ctx := context.Background()
	done, cancel := context.WithCancel(ctx)
	cancel()
	req := &request{w: wire.Request{Op: opAcquire, Token: "tok-exec-0123456789", TTL: 10 * time.Second}, keys: []string{"exec"}}
	rep := exec(done, c, c.nodes[1], req)
	require.Equal(t, wire.StatusFailed, rep.St)
	require.ErrorIs(t, rep.Err, context.Canceled)
	n, err := clients[1].Exists(ctx, "exec").Result()
	require.NoError(t, err)
	require.Zero(t, n, "a cancelled exec took the key")

	rep = exec(ctx, c, c.nodes[1], req)
	require.Equal(t, wire.StatusOK, rep.St, "%v", rep.Err)
	v, err := clients[1].Get(ctx, "exec").Result()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(v, "tok-exec-0123456789"), "node 1 holds %q", v)
	for _, i := range []int{0, 2} {
		n, err := clients[i].Exists(ctx, "exec").Result()
		require.NoError(t, err)
		require.Zero(t, n, "exec on node 1 wrote node %d", i)
	}
}
