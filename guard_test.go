package redlock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
)

// restartedNodes returns the indexes of the nodes refused by the restart
// guard in err.
func restartedNodes(err error) []int {
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return nil
	}
	var out []int
	for _, r := range qe.Nodes {
		if errors.Is(r.Err, redlock.ErrNodeRestarted) {
			out = append(out, r.Node)
		}
	}
	return out
}

// requireVotes waits until c wins a lock that only the given nodes can
// grant: the others hold the key for someone else.
func requireVotes(t *testing.T, c *redlock.Client, clients []redis.UniversalClient, wait time.Duration, nodes ...int) {
	t.Helper()
	ctx := context.Background()
	eventually(t, wait, func() bool {
		k := key(t)
		for i, cl := range clients {
			if !slices.Contains(nodes, i) {
				holdForeign(t, cl, k, time.Minute)
			}
		}
		l, err := c.TryLock(ctx, k, 10*time.Second)
		if err != nil {
			return false
		}
		require.NoError(t, l.Unlock(ctx))
		return true
	}, "nodes %v never voted together", nodes)
}

// TestRestartGuard is the scenario. A holds the lock on nodes
// {0,1,2} of 5; node 0 is killed and restarted at once with empty memory.
// Without the guard B wins on {0,3,4} while A's lock is still valid: two
// holders. With the guard node 0's vote does not count and B cannot win,
// even for a client that knew node 0 from before the restart and has
// seen no error since. Once node 0 has been up for the guard's duration
// it votes again.
func TestRestartGuard(t *testing.T) {
	nodes, clients := cluster(t, 5)
	ctx := context.Background()
	const guard = 1500 * time.Millisecond
	guarded := newClient(t, clients, redlock.WithRestartGuard(guard))

	// The nodes have just started: none may vote yet.
	_, err := guarded.TryLock(ctx, key(t), 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrUnreachable)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	for _, r := range qe.Nodes {
		if r.Status != redlock.NodePending { // the round stops at 3 refusals
			require.ErrorIs(t, r.Err, redlock.ErrNodeRestarted, "fresh nodes are refused: %v", r)
		}
	}
	require.GreaterOrEqual(t, len(restartedNodes(err)), 3)

	// Once they are old enough the guarded client locks on {0,1,2} and
	// on {2,3,4}: it has seen every node as old.
	requireVotes(t, guarded, clients, guard+3*time.Second, 0, 1, 2)
	requireVotes(t, guarded, clients, guard+3*time.Second, 2, 3, 4)

	// A wins on {0,1,2}: nodes 3 and 4 are busy during its attempt.
	k := key(t)
	holdForeign(t, clients[3], k, time.Minute)
	holdForeign(t, clients[4], k, time.Minute)
	a, err := newClient(t, clients).TryLock(ctx, k, 30*time.Second)
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		require.Equal(t, a.Token(), get(t, clients[i], k), "node %d", i)
	}
	for _, cl := range clients[3:] {
		require.NoError(t, cl.Del(ctx, k).Err())
	}

	require.NoError(t, nodes[0].Restart())
	require.Empty(t, get(t, clients[0], k), "node 0 forgot A's key")

	// With the guard: node 0 does not count, so B gets 2 votes of 3.
	_, err = guarded.TryLock(ctx, k, 30*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained, "B won while A holds the lock")
	require.Equal(t, []int{0}, restartedNodes(err), "%v", err)
	require.Positive(t, a.Validity())
	eventually(t, 2*time.Second, func() bool { return get(t, clients[0], k) == "" }, "the refused grant on node 0 was not released")

	// Without the guard: B wins on {0,3,4} while A's lock is valid.
	b, err := newClient(t, clients).TryLock(ctx, k, 30*time.Second)
	require.NoError(t, err, "the violation the guard prevents")
	require.Positive(t, a.Validity())
	require.Positive(t, b.Validity())
	require.Equal(t, b.Token(), get(t, clients[0], k))
	require.Equal(t, a.Token(), get(t, clients[1], k), "A still holds node 1: two holders")
	require.NoError(t, b.Unlock(ctx))

	// The guard is time-bound: once node 0 has been up for the guard's
	// duration, it votes again.
	requireVotes(t, guarded, clients, guard+3*time.Second, 0, 3, 4)
	require.ErrorIs(t, a.Unlock(ctx), redlock.ErrNotHeld, "A lost its majority with node 0's memory")
}

// TestRestartGuardExtend: an Extend does not count a node that restarted
// since the lock was taken either.
func TestRestartGuardExtend(t *testing.T) {
	nodes, clients := cluster(t, 3)
	ctx := context.Background()
	const guard = time.Second
	c := newClient(t, clients, redlock.WithRestartGuard(guard))
	requireVotes(t, c, clients, guard+3*time.Second, 0, 1)
	requireVotes(t, c, clients, guard+3*time.Second, 1, 2)
	l, err := c.TryLock(ctx, key(t), 30*time.Second)
	require.NoError(t, err)
	require.NoError(t, nodes[0].Restart())
	// Re-create the key on node 0, as a grant by its new incarnation
	// would: only the guard can refuse it.
	require.NoError(t, clients[0].Set(ctx, l.Key(), l.Token(), 30*time.Second).Err())
	require.NoError(t, nodes[1].Kill())
	err = l.Extend(ctx, 30*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	require.Equal(t, []int{0}, restartedNodes(err), "%v", err)
}

// TestRestartGuardOptions: the guard needs plain *redis.Client nodes, and
// a non-negative duration.
func TestRestartGuardOptions(t *testing.T) {
	_, clients := cluster(t, 1)
	type wrapped struct{ *redis.Client }
	_, err := redlock.New([]redis.UniversalClient{wrapped{clients[0].(*redis.Client)}}, redlock.WithRestartGuard(time.Second))
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = redlock.New(clients, redlock.WithRestartGuard(-time.Second))
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = redlock.New(clients, redlock.WithRestartGuard(0))
	require.NoError(t, err, "0 turns the guard off")
}

// TestRestartGuardRefusesWithTimeoutClone: a go-redis WithTimeout clone
// shares its parent's pools, whose dials run the parent's hooks, so the
// guard's dial count on the clone never moves and a node restarted a
// moment before would vote. New refuses such a node (ErrInvalid, naming
// it), whether or not the parent is guarded itself, without connecting
// anywhere; the plain client is accepted and refuses the restarted node.
func TestRestartGuardRefusesWithTimeoutClone(t *testing.T) {
	nodes, clients := cluster(t, 3)
	ctx := context.Background()
	const guard = time.Second
	plain := clients[1].(*redis.Client)
	connections := func() string {
		info, err := plain.Info(ctx, "stats").Result()
		require.NoError(t, err)
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(line, "total_connections_received:"); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatalf("INFO stats has no total_connections_received")
		return ""
	}

	refused := func(nodes []redis.UniversalClient, node string) {
		t.Helper()
		_, err := redlock.New(nodes, redlock.WithRestartGuard(guard))
		require.ErrorIs(t, err, redlock.ErrInvalid, "a clone's dials are not seen by its hooks")
		require.ErrorContains(t, err, node)
		require.ErrorContains(t, err, "WithTimeout")
	}
	before := connections()
	refused([]redis.UniversalClient{clients[0], plain.WithTimeout(time.Second), clients[2]}, "node 2 ")
	refused([]redis.UniversalClient{plain.WithTimeout(time.Second).WithTimeout(2 * time.Second)}, "node 1 ")

	// The plain client passes, and its guard works through the probe.
	c := newClient(t, []redis.UniversalClient{plain}, redlock.WithRestartGuard(guard))
	require.Equal(t, before, connections(), "New connected to the node")
	// A clone made after the parent's hook was installed is refused too.
	refused([]redis.UniversalClient{clients[0], plain.WithTimeout(time.Second), clients[2]}, "node 2 ")
	require.NoError(t, plain.WithTimeout(time.Second).Ping(ctx).Err(), "the clone works after the probe")

	requireVotes(t, c, []redis.UniversalClient{plain}, guard+3*time.Second, 0)
	require.NoError(t, nodes[1].Restart())
	_, err := c.TryLock(ctx, key(t), 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained, "a node restarted a moment ago voted")
	require.Equal(t, []int{0}, restartedNodes(err), "%v", err)
}
