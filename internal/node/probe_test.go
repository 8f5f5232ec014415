package node

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock/internal/redistest"
)

// TestProbe: a node that answers is identified from the probe's INFO,
// once; one that stalls is cut at the timeout with ErrNodeTimeout; one
// that is down reports its dial error and is not identified.
func TestProbe(t *testing.T) {
	nodes := redistest.Nodes(t, 1)
	var calls atomic.Int32
	h := &Host{Identified: func(n *Node, info string, err error) error {
		calls.Add(1)
		n.SetIdentified(InfoField(info, "run_id"))
		return err
	}}
	nd := New(0, redistest.Client(t, nodes[0]), h)
	ctx := context.Background()

	p := nd.Probe(ctx, time.Second)
	require.NoError(t, p.Err)
	require.NoError(t, p.InfoErr)
	require.NoError(t, p.SaveErr)
	require.Contains(t, p.Info, "run_id:")
	require.Equal(t, "", p.Save) // redistest: --save ""
	require.True(t, nd.Identified())
	require.Len(t, nd.RunID, 40)
	require.NoError(t, nd.Probe(ctx, time.Second).Err)
	require.Equal(t, int32(1), calls.Load(), "want one identification")

	require.NoError(t, nodes[0].Pause())
	start := time.Now()
	p = nd.Probe(ctx, 50*time.Millisecond)
	require.Less(t, time.Since(start), 5*time.Second, "want the probe cut at its timeout")
	require.True(t, errors.Is(p.Err, ErrNodeTimeout), "want ErrNodeTimeout, got %v", p.Err)
	require.NoError(t, nodes[0].Resume())

	require.NoError(t, nodes[0].Kill())
	down := New(1, redistest.Client(t, nodes[0]), h)
	p = down.Probe(ctx, time.Second)
	require.Error(t, p.Err)
	require.False(t, down.Identified())
	require.Equal(t, int32(1), calls.Load(), "want no identification from a failed probe")
}
