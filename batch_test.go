package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/stretchr/testify/require"
)

// TestBatchPerLockOutcome: locks extended in one batch are decided each
// on its own: a lock whose key was deleted, or replaced by a value of
// another type, is lost; the others in the same batch go on.
func TestBatchPerLockOutcome(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	// Long enough that a loaded machine's stalls lose none of the others:
	// their loss is not the subject.
	ttl := 2 * time.Second
	stalls := watchStalls(t)
	locks, _ := takeMany(t, rl, key(t), 30, 8, ttl, true)
	gone, typed := locks[3], locks[17]
	// The replacement is one transaction per node: between a DEL and the
	// ZADD an extension would heal the missing key as a string.
	for _, c := range clients {
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, typed.Key())
			p.ZAdd(ctx, typed.Key(), redis.Z{Score: 1, Member: "x"})
			return nil
		})
		require.NoError(t, err)
	}
	spoilUntilLost(t, gone, ttl/2, 5*ttl, func() {
		for _, c := range clients {
			require.NoError(t, c.Del(ctx, gone.Key()).Err())
		}
	})
	select {
	case <-typed.Done():
	case <-time.After(5 * ttl):
		t.Fatalf("lock %s: Done still open", typed.Key())
	}
	for _, l := range []*redlock.Lock{gone, typed} {
		require.ErrorIs(t, l.Err(), redlock.ErrLockLost, l.Key())
	}
	time.Sleep(ttl) // the others keep being extended: nothing to await
	if stalls.Survivable(t, ttl, testNodeTimeout, lossMargin(ttl, testNodeTimeout)) {
		for _, l := range locks {
			if l == gone || l == typed {
				continue
			}
			require.NoError(t, l.Err(), l.Key())
			require.GreaterOrEqual(t, l.Extensions(), 2, l.Key())
		}
	}
	unlockAll(locks, 8)
	for _, c := range clients {
		_ = c.Del(ctx, typed.Key())
	}
}

// TestBatchedFamilyAndPrefix: path, read and permit locks and key locks
// under a key prefix are extended by the same batches, and stay held
// unless the process stalled past what a lock survives by design (then
// every lost lock says so).
func TestBatchedFamilyAndPrefix(t *testing.T) {
	t.Parallel()
	clients, rl := threeNodes(t, redlock.WithKeyPrefix("pfx:"))
	ctx := context.Background()
	// Long enough to survive a stall of a few hundred ms: the test is
	// about the batches, not about stalls.
	ttl := 2 * time.Second
	stalls := watchStalls(t)
	k := key(t)
	var locks []*redlock.Lock
	must := func(l *redlock.Lock, err error) {
		t.Helper()
		require.NoError(t, err)
		require.NoError(t, l.AutoExtend(ctx))
		locks = append(locks, l)
	}
	must(rl.TryLock(ctx, k+"-key", ttl))
	must(rl.TryLockKeys(ctx, []string{"{" + k + "}a", "{" + k + "}b"}, ttl))
	must(rl.TryLockPath(ctx, k+"/a/b", ttl))
	must(rl.TryRLock(ctx, k+"-read", ttl))
	must(rl.TryRLock(ctx, k+"-read", ttl))
	must(rl.TryAcquire(ctx, k+"-sem", 3, ttl))
	time.Sleep(3 * ttl) // extensions happen in the background: nothing to await
	if stalls.Survivable(t, ttl, testNodeTimeout, lossMargin(ttl, testNodeTimeout)) {
		for _, l := range locks {
			require.NoError(t, l.Err(), l.Key())
			require.GreaterOrEqual(t, l.Extensions(), 4, l.Key())
		}
		// The writer is still kept out by the readers, the path by its lock.
		_, err := rl.TryLock(ctx, k+"-read", ttl)
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		_, err = rl.TryLockPath(ctx, k+"/a", ttl)
		require.ErrorIs(t, err, redlock.ErrNotObtained)
	}
	requireLossesSafe(t, locks)
	unlockAll(locks, 1)
	for i, c := range clients {
		eventually(t, 2*time.Second, func() bool { return c.DBSize(ctx).Val() == 0 }, "node %d keeps keys", i+1)
	}
}

// TestBatchCluster: on a Redis Cluster node the batches go per hash slot
// (a script's keys must share one). A MultiLock needs every node, the
// cluster too, so locks on keys of many slots survive several TTLs only
// if each slot's batch reached its master (or, when the process stalled
// past what a lock survives by design, every lost lock says so).
func TestBatchCluster(t *testing.T) {
	t.Parallel()
	cc := redisCluster(t, 3)
	_, plain := cluster(t, 2)
	ml := newMultiLock(t, []redis.UniversalClient{cc, plain[0], plain[1]})
	ctx := context.Background()
	// Long enough to survive a stall of a few hundred ms: the test is
	// about the batches' routing, not about stalls.
	ttl := 2 * time.Second
	stalls := watchStalls(t)
	var locks []*redlock.Lock
	for i := range 40 {
		l, err := ml.TryLock(ctx, fmt.Sprintf("%s-%d", key(t), i), ttl)
		require.NoError(t, err, "lock %d", i)
		require.NoError(t, l.AutoExtend(ctx))
		locks = append(locks, l)
	}
	time.Sleep(3 * ttl) // extensions run in the background: nothing to await
	if stalls.Survivable(t, ttl, testNodeTimeout, lossMargin(ttl, testNodeTimeout)) {
		for i, l := range locks {
			require.NoError(t, l.Err(), "lock %d (%s)", i, l.Key())
			require.GreaterOrEqual(t, l.Extensions(), 4, "lock %d", i)
		}
	}
	requireLossesSafe(t, locks)
	unlockAll(locks, 4)
}
