package redlock_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/node"
)

// An extension that still has its quorum puts the lock back on a node
// that lost it (a restart without persistence, an eviction): a heal.
// These tests pin, for every kind, that the heal restores what the
// holder had, never over another owner's, never resurrects a lock that
// lost its quorum, and leaves nothing behind once the lock is over.

// healKind is one lock kind: how to take it, and a foreign holder that
// must keep a node's copy from being healed.
type healKind struct {
	name string
	take func(t *testing.T, c *redlock.Client, k string, ttl time.Duration) *redlock.Lock
	// foreign makes node c's copy of the lock another owner's.
	foreign func(t *testing.T, c redis.UniversalClient, k string)
	// skip lists the suffixes of keys that a heal does not restore.
	skip []string
}

// healTTL is the TTL of the locks that Extend heals; autoTTL of those
// that auto-extension heals, which it extends at TTL/2 left.
const healTTL, autoTTL = 10 * time.Second, 2 * time.Second

// healTimeout: the tests judge which nodes answered what, so a node that
// a loaded machine keeps from answering within the default test timeout
// must not blur it.
var healTimeout = redlock.WithNodeTimeout(500 * time.Millisecond)

func healKinds() []healKind {
	ctx := context.Background()
	setForeign := func(t *testing.T, c redis.UniversalClient, k string) { holdForeign(t, c, k, time.Minute) }
	return []healKind{
		{name: "key", take: func(t *testing.T, c *redlock.Client, k string, ttl time.Duration) *redlock.Lock {
			return tryLock(t, c, k, ttl)
		}, foreign: setForeign},
		{name: "key with metadata", take: func(t *testing.T, c *redlock.Client, k string, ttl time.Duration) *redlock.Lock {
			l, err := c.TryLock(ctx, k, ttl, redlock.WithMetadata("host-a"))
			require.NoError(t, err)
			return l
		}, foreign: setForeign},
		{name: "keys", take: func(t *testing.T, c *redlock.Client, k string, ttl time.Duration) *redlock.Lock {
			l, err := c.TryLockKeys(ctx, []string{k, k + ":b"}, ttl)
			require.NoError(t, err)
			return l
		}, foreign: setForeign},
		{name: "fenced", take: func(t *testing.T, c *redlock.Client, k string, ttl time.Duration) *redlock.Lock {
			l, err := c.TryLock(ctx, k, ttl, redlock.WithFencing())
			require.NoError(t, err)
			return l
		}, foreign: setForeign},
		{name: "read", take: func(t *testing.T, c *redlock.Client, k string, ttl time.Duration) *redlock.Lock {
			return rlock(t, c, k, ttl)
		}, foreign: setForeign}, // a writer's key
		{name: "path", take: func(t *testing.T, c *redlock.Client, k string, ttl time.Duration) *redlock.Lock {
			l, err := c.TryLockPath(ctx, k+"/a/b", ttl)
			require.NoError(t, err)
			return l
		}, foreign: func(t *testing.T, c redis.UniversalClient, k string) {
			holdForeign(t, c, redlock.KeyName("path", k+"/a/b"), time.Minute)
		}},
		{name: "permit", take: func(t *testing.T, c *redlock.Client, k string, ttl time.Duration) *redlock.Lock {
			l, err := c.TryAcquire(ctx, k, 1, ttl)
			require.NoError(t, err)
			return l
		}, foreign: func(t *testing.T, c redis.UniversalClient, k string) {
			// The semaphore's one permit, another's: a heal must not
			// exceed the limit.
			require.NoError(t, c.ZAdd(ctx, k, redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: foreignToken},
				redis.Z{Score: math.Inf(1), Member: "redlock:limit=1"}).Err())
		}},
		{name: "leadership", take: func(t *testing.T, c *redlock.Client, k string, ttl time.Duration) *redlock.Lock {
			ld, err := c.Election(k).Campaign(ctx, "leader-a", ttl)
			require.NoError(t, err)
			require.NoError(t, ld.Proclaim(ctx, "leader-a, proclaimed"))
			return ld.Lock()
		}, foreign: func(t *testing.T, c redis.UniversalClient, k string) {
			holdForeign(t, c, redlock.KeyName("election", k), time.Minute)
		}, skip: []string{":terms"}}, // the history, which Observe reads from a quorum
	}
}

// snapshot returns what node c keeps under keys whose names begin with
// root: each key's type and value (a string's value, a sorted set's
// members), not its TTL or scores.
func snapshot(t *testing.T, c redis.UniversalClient, root string, skip []string) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := c.Keys(ctx, "*"+root+"*").Result()
	require.NoError(t, err)
	out := map[string]string{}
	for _, k := range keys {
		if slices.ContainsFunc(skip, func(s string) bool { return strings.HasSuffix(k, s) }) {
			continue
		}
		switch ty := c.Type(ctx, k).Val(); ty {
		case "string":
			out[k] = "string " + c.Get(ctx, k).Val()
		case "zset":
			ms := c.ZRange(ctx, k, 0, -1).Val()
			slices.Sort(ms)
			out[k] = "zset " + strings.Join(ms, ",")
		default:
			out[k] = ty
		}
	}
	return out
}

// settled returns once every node of c has run the requests handed to
// it so far: an Inspect, which waits for every node's answer, runs after
// them in each node's queue (a round decides on its quorum, and the last
// node's extension may still be in flight).
func settled(t *testing.T, c *redlock.Client) {
	t.Helper()
	poll(t, 5*time.Second, 10*time.Millisecond, func() bool {
		h, err := c.Inspect(context.Background(), "settled")
		if err != nil {
			return false
		}
		for _, n := range h.Nodes {
			if n.Err != nil {
				return false
			}
		}
		return true
	}, "not every node answered an Inspect")
}

// TestExtendHealsEveryKind: for every lock kind, a node that lost
// everything (FLUSHALL, as a restart without persistence) gets back,
// from the next Extend, exactly what the other nodes keep of the lock:
// its keys with the holder's token and metadata (a leadership's value as
// proclaimed), its fence counter, a reader's lease, a path's intention
// records, a permit. The healed node does not count: Extend succeeds on
// the other two. Then, where another owner holds the lock's key on that
// node, Extend leaves it as it is.
func TestExtendHealsEveryKind(t *testing.T) {
	ctx := context.Background()
	for _, kind := range healKinds() {
		t.Run(kind.name, func(t *testing.T) {
			_, clients := cluster(t, 3)
			c := newClient(t, clients, healTimeout)
			k := key(t)
			l := kind.take(t, c, k, healTTL)
			settled(t, c) // every request of the acquisition ran
			want := snapshot(t, clients[1], k, kind.skip)
			require.NotEmpty(t, want)

			require.NoError(t, clients[0].FlushAll(ctx).Err())
			require.NoError(t, l.Extend(ctx, healTTL))
			settled(t, c)
			require.Equal(t, want, snapshot(t, clients[0], k, kind.skip), "node 0 after the heal")
			for key := range want {
				// A fence counter never expires; the rest expire.
				want, got := clients[1].PTTL(ctx, key).Val() > 0, clients[0].PTTL(ctx, key).Val() > 0
				require.Equal(t, want, got, "%s: want an expiry %v, got %v", key, want, got)
			}

			// Another owner's copy on node 0 is never overwritten.
			require.NoError(t, clients[0].FlushAll(ctx).Err())
			kind.foreign(t, clients[0], k)
			theirs := snapshot(t, clients[0], k, kind.skip)
			require.NoError(t, l.Extend(ctx, healTTL), "2 of 3 nodes still hold the lock")
			settled(t, c)
			require.Equal(t, theirs, snapshot(t, clients[0], k, kind.skip), "node 0: another owner's copy changed")

			require.NoError(t, l.Unlock(ctx))
		})
	}
}

// TestAutoExtendHealsEveryKind: auto-extension (the scheduler's batched
// extensions) heals as Extend does, for every kind.
func TestAutoExtendHealsEveryKind(t *testing.T) {
	ctx := context.Background()
	for _, kind := range healKinds() {
		t.Run(kind.name, func(t *testing.T) {
			_, clients := cluster(t, 3)
			c := newClient(t, clients, healTimeout)
			k := key(t)
			l := kind.take(t, c, k, autoTTL)
			settled(t, c) // every request of the acquisition ran
			want := snapshot(t, clients[1], k, kind.skip)
			require.NotEmpty(t, want)
			require.NoError(t, clients[0].FlushAll(ctx).Err())
			// The leadership is auto-extended already (Campaign).
			if err := l.AutoExtend(ctx); err != nil {
				require.ErrorIs(t, err, redlock.ErrInvalid)
			}
			// Auto-extension runs at TTL/2 left.
			eventually(t, 2*autoTTL, func() bool {
				return fmt.Sprint(snapshot(t, clients[0], k, kind.skip)) == fmt.Sprint(want)
			}, "node 0 not healed: want %v, got %v", want, snapshot(t, clients[0], k, kind.skip))
			require.NoError(t, l.Err())
			require.NoError(t, l.Unlock(ctx))
		})
	}
}

// TestHealNeverResurrects: a lock that lost its quorum (two of three
// nodes flushed) is lost, by Extend as by auto-extension: the nodes that
// its last extension healed do not count, and they are released, so
// that nothing of the lock is left on them.
func TestHealNeverResurrects(t *testing.T) {
	ctx := context.Background()
	for _, auto := range []bool{false, true} {
		for _, kind := range healKinds() {
			t.Run(fmt.Sprintf("%s auto=%v", kind.name, auto), func(t *testing.T) {
				_, clients := cluster(t, 3)
				c := newClient(t, clients, healTimeout)
				k := key(t)
				ttl := healTTL
				if auto {
					ttl = autoTTL
				}
				l := kind.take(t, c, k, ttl)
				settled(t, c) // every request of the acquisition ran
				require.NoError(t, clients[0].FlushAll(ctx).Err())
				require.NoError(t, clients[1].FlushAll(ctx).Err())
				if auto {
					if err := l.AutoExtend(ctx); err != nil {
						require.ErrorIs(t, err, redlock.ErrInvalid)
					}
					awaitDone(t, l, 2*autoTTL, "auto-extension did not find the lock lost")
				} else {
					require.ErrorIs(t, l.Extend(ctx, healTTL), redlock.ErrNotHeld)
				}
				require.ErrorIs(t, l.Err(), redlock.ErrLockLost)
				require.LessOrEqual(t, l.Validity(), time.Duration(0))
				for i := range 2 {
					eventually(t, 2*time.Second, func() bool {
						return len(snapshot(t, clients[i], k, append(kind.skip, ":fence"))) == 0
					}, "node %d keeps the lost lock's healed keys: %v", i, snapshot(t, clients[i], k, kind.skip))
				}
			})
		}
	}
}

// TestHealRacingUnlock: Extends of a lock racing its Unlock, on nodes
// that lost the lock, never leave a healed key behind: an extension that
// runs on a node after the release there heals it after Lock.over was
// set, and its round releases it again.
func TestHealRacingUnlock(t *testing.T) {
	ctx := context.Background()
	_, clients := cluster(t, 3)
	c := newClient(t, clients, healTimeout)
	root := key(t)
	const n = 40
	for round := range 5 {
		locks := make([]*redlock.Lock, n)
		for i := range locks {
			locks[i] = tryLock(t, c, fmt.Sprintf("%s-%d-%d", root, round, i), healTTL)
		}
		for i := range 3 {
			eventually(t, 2*time.Second, func() bool { return clients[i].DBSize(ctx).Val() == n }, "node %d: not every lock", i)
		}
		require.NoError(t, clients[0].FlushAll(ctx).Err())
		var wg sync.WaitGroup
		for _, l := range locks {
			wg.Go(func() { _ = l.Extend(ctx, healTTL) })
			wg.Go(func() { _ = l.Extend(ctx, healTTL) })
			wg.Go(func() { _ = l.Unlock(ctx) })
		}
		wg.Wait()
		for i := range 3 {
			eventually(t, 3*time.Second, func() bool { return clients[i].DBSize(ctx).Val() == 0 },
				"round %d: node %d keeps %d keys after every Unlock", round, i, clients[i].DBSize(ctx).Val())
		}
	}
}

// TestHealOnGuardedNode: a node inside its restart-guard window does not
// vote, but an extension heals it all the same. With five nodes, node 0
// restarted empty is healed by the next Extend; once nodes 1 and 2 lose
// the lock too, node 0 holds it but is still young, so the next Extend
// has two votes of three needed and the lock is lost.
//
// The last Extend decides on node 0's reply only if nodes 3 and 4 both
// answer, and node 0 must still be young then: so a node timeout no
// loaded machine reaches, and a guard longer than every wait of the
// test after the restart.
func TestHealOnGuardedNode(t *testing.T) {
	nodes, clients := cluster(t, 5)
	ctx := context.Background()
	const guard = 5 * time.Second
	c := newClient(t, clients, redlock.WithNodeTimeout(3*time.Second), redlock.WithRestartGuard(guard))
	k := key(t)
	var l *redlock.Lock
	poll(t, guard+3*time.Second, 50*time.Millisecond, func() bool {
		var err error
		l, err = c.TryLock(ctx, k, healTTL)
		return err == nil
	}, "the guarded client never locked")
	// A node still young at the acquire was not asked; an extension
	// heals it.
	poll(t, 3*time.Second, 20*time.Millisecond, func() bool {
		_ = l.Extend(ctx, healTTL)
		for i := range clients {
			if get(t, clients[i], k) != l.Token() {
				return false
			}
		}
		return true
	}, "the lock is not on every node")
	require.NoError(t, nodes[0].Restart())
	restarted := time.Now()
	require.Equal(t, "", get(t, clients[0], k), "the restart kept the key")
	// Node 0's first reply shows the new run_id: it is young from then.
	poll(t, 3*time.Second, 20*time.Millisecond, func() bool {
		_ = l.Extend(ctx, healTTL)
		return get(t, clients[0], k) == l.Token()
	}, "node 0 not healed")
	require.NoError(t, clients[1].FlushAll(ctx).Err())
	require.NoError(t, clients[2].FlushAll(ctx).Err())
	err := l.Extend(ctx, healTTL)
	require.ErrorIs(t, err, redlock.ErrNotHeld, "the young node 0 voted, %v after its restart", time.Since(restarted))
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.ErrorIs(t, qe.Nodes[0].Err, node.ErrNodeRestarted, "every node: %v", qe.Nodes)
}
