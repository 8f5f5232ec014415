package redlock_test

import (
	"context"
	"testing"

	"github.com/seed543a70bd/redlock"
	"github.com/stretchr/testify/require"
)

// TestElectionLeaderSaysWhichError pins Leader's errors: ErrNoLeader when
// a quorum answered and nobody leads, ErrUnreachable (not ErrNoLeader)
// when too few nodes answered.
func TestElectionLeaderSaysWhichError(t *testing.T) {
	nodes, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	e := rl.Election(key(t))
	_, err := e.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrNoLeader)
	require.NotErrorIs(t, err, redlock.ErrUnreachable)

	require.NoError(t, nodes[0].Kill())
	_, err = e.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrNoLeader, "want a quorum of 2 of 3 enough to tell")
	require.NoError(t, nodes[1].Kill())
	_, err = e.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrUnreachable)
	require.NotErrorIs(t, err, redlock.ErrNoLeader)
	require.Contains(t, err.Error(), "1 of 3 nodes answered")
	require.Contains(t, err.Error(), ": node 1: ", "want nodes counted from 1, as in every message")
}
