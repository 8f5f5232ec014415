package redistest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNodesAndClients(t *testing.T) {
	ctx := context.Background()
	nodes := Nodes(t, 3)
	clients := Clients(t, nodes)
	require.Len(t, clients, 3)
	for i, c := range clients {
		require.NoError(t, c.Set(ctx, "k", i, 0).Err())
		v, err := c.Get(ctx, "k").Int()
		require.NoError(t, err)
		require.Equal(t, i, v)
	}

	// A killed node fails fast, and works again after Restart.
	require.NoError(t, nodes[0].Kill())
	require.Error(t, clients[0].Ping(ctx).Err())
	require.NoError(t, nodes[0].Restart())
	require.NoError(t, clients[0].Ping(ctx).Err())
}
