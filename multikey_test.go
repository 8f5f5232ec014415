package redlock_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKeysAllOrNothing: on each node the keys are taken all or none. After
// a partial conflict, every node is read: a node where one key belongs to
// another holder has none of ours, the others have all of ours.
func TestKeysAllOrNothing(t *testing.T) {
	ctx := context.Background()
	t.Run("quorum", func(t *testing.T) {
		_, clients := cluster(t, 5)
		c := newClient(t, clients)
		fk := holdForeignKeys(t, clients, map[int]int{0: 1, 1: 2})
		keys := fk.keys

		l, err := c.TryLockKeys(ctx, keys, 10*time.Second)
		require.NoError(t, err, "nodes 2, 3 and 4 are a quorum")
		require.Equal(t, keys, lockKeys(l))
		for i := 0; i < 2; i++ {
			eventuallyValues(t, clients[i], keys, fk.only(i), fmt.Sprintf("node %d", i))
		}
		for i := 2; i < 5; i++ {
			require.Equal(t, repeat(l.Token(), 3), values(t, clients[i], keys), "node %d", i)
		}
		require.NoError(t, l.Unlock(ctx))
		for i := 2; i < 5; i++ {
			require.Equal(t, repeat("", 3), values(t, clients[i], keys), "node %d after Unlock", i)
		}

		fk.hold(t, clients, 2, 0)
		_, err = c.TryLockKeys(ctx, keys, 10*time.Second)
		fk.requireLost(t, clients, err, " after the lost attempt")
	})
	t.Run("multi", func(t *testing.T) {
		_, clients := cluster(t, 3)
		ml := newMultiLock(t, clients)
		fk := holdForeignKeys(t, clients, map[int]int{1: 2})
		_, err := ml.TryLockKeys(ctx, fk.keys, 10*time.Second)
		fk.requireLost(t, clients, err, "")
	})
}

// TestKeysOverlap: two locks whose key sets overlap never both win, for
// Client and MultiLock alike; disjoint sets both win; a refused attempt
// takes none of its keys, even those nobody holds.
func TestKeysOverlap(t *testing.T) {
	_, clients := cluster(t, 5)
	for _, tc := range []struct {
		name string
		a, b interface {
			TryLockKeys(context.Context, []string, time.Duration, ...redlock.LockOption) (*redlock.Lock, error)
			LockKeys(context.Context, []string, time.Duration, ...redlock.LockOption) (*redlock.Lock, error)
		}
	}{
		{"quorum", newClient(t, clients, redlock.WithRetryDelay(2*time.Millisecond)), newClient(t, clients, redlock.WithRetryDelay(2*time.Millisecond))},
		{"multi", newMultiLock(t, clients, redlock.WithRetryDelay(2*time.Millisecond)), newMultiLock(t, clients, redlock.WithRetryDelay(2*time.Millisecond))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			k := key(t)
			u := []string{k + ":0", k + ":1", k + ":2", k + ":3"}

			la, err := tc.a.TryLockKeys(ctx, u[0:2], 10*time.Second)
			require.NoError(t, err)
			_, err = tc.b.TryLockKeys(ctx, u[1:3], 10*time.Second)
			require.ErrorIs(t, err, redlock.ErrContended, "overlapping sets: the second must lose")
			for i, c := range clients {
				eventuallyValues(t, c, u[2:3], []string{""}, fmt.Sprintf("node %d: the refused attempt took a free key", i))
			}
			lb, err := tc.b.TryLockKeys(ctx, u[2:4], 10*time.Second)
			require.NoError(t, err, "disjoint sets both win")
			require.Positive(t, la.Validity())
			require.Positive(t, lb.Validity())
			require.NoError(t, la.Unlock(ctx))
			require.NoError(t, lb.Unlock(ctx))

			// Concurrent: worker w locks keys w%4 and (w+1)%4, so that
			// neighbours overlap, and holds them a few milliseconds; no
			// key is ever inside twice.
			const workers, iters = 6, 8
			set := func(w int) []int { return []int{w % 4, (w + 1) % 4} }
			var inside [4]atomic.Int32
			var overlaps atomic.Int32
			contend(t, workers, iters, 30*time.Second,
				func(ctx context.Context, w int) (*redlock.Lock, error) {
					lk := tc.a
					if w%2 == 1 {
						lk = tc.b
					}
					s := set(w)
					return lk.LockKeys(ctx, []string{u[s[0]], u[s[1]]}, 5*time.Second)
				},
				func(w int) (leave func()) {
					for _, s := range set(w) {
						if inside[s].Add(1) > 1 {
							overlaps.Add(1)
						}
					}
					return func() {
						for _, s := range set(w) {
							inside[s].Add(-1)
						}
					}
				},
				func(err error) { assert.NoError(t, err) })
			require.Zero(t, overlaps.Load(), "two holders of one key overlapped")
		})
	}
}

// TestKeysLockHandle: a multi-key lock's handle covers every key: Key,
// Keys, Extend and Unlock act on all of them, the caller's slice may be
// reused, and Extend is all or nothing on each node.
func TestKeysLockHandle(t *testing.T) {
	_, clients := cluster(t, 3)
	ctx := context.Background()
	c := newClient(t, clients)
	ml := newMultiLock(t, clients)
	k := key(t)
	keys := []string{k + ":a", k + ":b"}
	arg := slices.Clone(keys)

	l, err := c.TryLockKeys(ctx, arg, 10*time.Second)
	require.NoError(t, err)
	arg[0] = "changed"
	require.Equal(t, keys, lockKeys(l), "the lock keeps its own copy")
	require.Equal(t, keys[0]+","+keys[1], l.Key())
	lockKeys(l)[0] = "changed"
	require.Equal(t, keys, lockKeys(l))

	for i, cl := range clients { // the third grant may land after the win
		eventuallyValues(t, cl, keys, repeat(l.Token(), 2), fmt.Sprintf("node %d", i))
	}
	// Node 0 loses one key: it does not count towards Extend's quorum
	// (2 of 3 is one), and Extend puts the key back there (a heal), so
	// that node 0 holds every key again, with the new TTL.
	require.NoError(t, clients[0].Del(ctx, keys[1]).Err())
	require.NoError(t, l.Extend(ctx, time.Minute))
	for _, key := range keys {
		eventually(t, 2*time.Second, func() bool { return clients[0].PTTL(ctx, key).Val() > 50*time.Second }, "node 0: %s not healed", key)
	}
	eventuallyValues(t, clients[0], keys, repeat(l.Token(), 2), "node 0 after the heal")
	for i := 1; i < 3; i++ {
		for _, key := range keys {
			eventually(t, 2*time.Second, func() bool { return clients[i].PTTL(ctx, key).Val() > 50*time.Second }, "node %d: %s not extended", i, key)
		}
	}
	require.NoError(t, l.Unlock(ctx))
	for i, cl := range clients {
		eventuallyValues(t, cl, keys, repeat("", 2), fmt.Sprintf("node %d after Unlock", i))
	}

	// The same loss fails MultiLock's Extend, naming the node.
	l, err = ml.TryLockKeys(ctx, keys, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, clients[0].Del(ctx, keys[1]).Err())
	err = l.Extend(ctx, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, "absent", qe.Nodes[0].Status, "%v", err)
	require.Equal(t, keys, qe.Keys)
	// The lost extension put node 0's key back (a heal) and, the lock
	// being lost, releases it again: Unlock may find it there or not.
	if err := l.Unlock(ctx); err != nil {
		require.ErrorIs(t, err, redlock.ErrNotHeld)
	}
	for i, cl := range clients {
		eventuallyValues(t, cl, keys, repeat("", 2), fmt.Sprintf("node %d after Unlock", i))
	}
}

// TestKeysCluster: when a node is a Redis Cluster client, a multi-key lock
// needs its keys in one hash slot; a common {tag} does it. Keys in two
// slots are refused up front with ErrInvalid naming the key (the cluster
// itself would answer CROSSSLOT), for Client and MultiLock, and nothing is
// sent. The node here is a real 3-master cluster next to two plain nodes.
func TestKeysCluster(t *testing.T) {
	t.Parallel()
	cc := redisCluster(t, 3)
	_, plain := cluster(t, 2)
	nodes := []redis.UniversalClient{cc, plain[0], plain[1]}
	c := newClient(t, nodes)
	ml := newMultiLock(t, nodes)
	ctx := context.Background()
	k := key(t)
	tagged := []string{"{" + k + "}:items", "{" + k + "}:stock"}

	// MultiLock wins only once every node, the cluster too, granted.
	l, err := ml.TryLockKeys(ctx, tagged, 10*time.Second)
	require.NoError(t, err)
	for i, n := range nodes {
		require.Equal(t, repeat(l.Token(), 2), values(t, n, tagged), "node %d", i)
	}
	_, err = c.TryLockKeys(ctx, []string{tagged[1], "{" + k + "}:other"}, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrContended, "overlapping sets exclude each other on a cluster node too")
	require.NoError(t, l.Extend(ctx, 20*time.Second))
	require.NoError(t, l.Unlock(ctx))
	for i, n := range nodes {
		require.Equal(t, repeat("", 2), values(t, n, tagged), "node %d after Unlock", i)
	}
	// A quorum Client returns once 2 of 3 agreed: the third reply may
	// still be on its way.
	l, err = c.TryLockKeys(ctx, tagged, 10*time.Second)
	require.NoError(t, err)
	for i, n := range nodes {
		eventuallyValues(t, n, tagged, repeat(l.Token(), 2), fmt.Sprintf("node %d", i))
	}
	require.NoError(t, l.Unlock(ctx))
	for i, n := range nodes {
		eventuallyValues(t, n, tagged, repeat("", 2), fmt.Sprintf("node %d after Unlock", i))
	}

	// "foo" is in slot 12182, "bar" in 5061.
	twoSlots := []string{"foo", "bar"}
	require.ErrorContains(t, cc.Eval(ctx, "return 1", twoSlots).Err(), "CROSSSLOT", "the cluster refuses one script over two slots")
	for _, call := range []func() error{
		func() error { _, err := c.TryLockKeys(ctx, twoSlots, time.Second); return err },
		func() error { _, err := c.LockKeys(ctx, twoSlots, time.Second); return err },
		func() error { _, err := ml.TryLockKeys(ctx, twoSlots, time.Second); return err },
		func() error { _, err := ml.LockKeys(ctx, twoSlots, time.Second); return err },
	} {
		err := call()
		require.ErrorIs(t, err, redlock.ErrInvalid)
		require.NotErrorIs(t, err, redlock.ErrNotObtained, "refused before any I/O")
		require.ErrorContains(t, err, `key "bar" is in hash slot 5061 but key "foo" in slot 12182`)
		require.ErrorContains(t, err, "same hash tag")
	}
	for i, n := range nodes {
		require.Equal(t, repeat("", 2), values(t, n, twoSlots), "node %d: a refused call sent something", i)
	}

	// Keys without a tag that happen to share a slot are accepted: our
	// slot function agrees with the cluster's, which would refuse them
	// otherwise.
	oneSlot := []string{"bar", "k3544"} // both slot 5061
	l, err = ml.TryLockKeys(ctx, oneSlot, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, repeat(l.Token(), 2), values(t, cc, oneSlot))
	require.NoError(t, l.Unlock(ctx))

	// With fencing, a key and its counter (key + ":fence") go in one
	// script: an untagged key is refused up front (the cluster would
	// answer CROSSSLOT on every attempt), a tagged one works.
	fc := newClient(t, nodes, redlock.WithFencing())
	_, err = fc.TryLock(ctx, "foo", time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorContains(t, err, "fenced lock")
	_, err = fc.Lock(ctx, "foo", time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	l, err = fc.TryLock(ctx, tagged[0], 10*time.Second)
	require.NoError(t, err)
	require.Positive(t, l.Fence())
	require.NoError(t, l.Unlock(ctx))
}
