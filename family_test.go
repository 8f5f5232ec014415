package redlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
)

// storedValue is a value of one Redis type that put writes at key k on
// node c.
type storedValue struct {
	name string
	put  func(ctx context.Context, c redis.UniversalClient, k string) error
}

// foreignTypes put at a key a value of a type that none of the lock
// kinds writes: the application's own data under a lock's name.
var foreignTypes = []storedValue{
	{"set", func(ctx context.Context, c redis.UniversalClient, k string) error { return c.SAdd(ctx, k, "m").Err() }},
	{"list", func(ctx context.Context, c redis.UniversalClient, k string) error { return c.RPush(ctx, k, "m").Err() }},
	{"hash", func(ctx context.Context, c redis.UniversalClient, k string) error {
		return c.HSet(ctx, k, "f", "v").Err()
	}},
	{"stream", func(ctx context.Context, c redis.UniversalClient, k string) error {
		return c.XAdd(ctx, &redis.XAddArgs{Stream: k, Values: []any{"f", "v"}}).Err()
	}},
}

// kindAttempt is one lock kind's attempt on names derived from base, and
// where on the nodes its keys are.
type kindAttempt struct {
	name string
	try  func(ctx context.Context, rl *redlock.Client, base string) (*redlock.Lock, error)
	wait func(ctx context.Context, rl *redlock.Client, base string) (*redlock.Lock, error)
	// keys are the attempt's keys on the nodes that a foreign value is
	// put at, one case each.
	keys func(base string) []string
}

func kindAttempts() []kindAttempt {
	path := func(base string) string { return base + "/x/y" }
	return []kindAttempt{
		{"key",
			func(ctx context.Context, rl *redlock.Client, b string) (*redlock.Lock, error) {
				return rl.TryLock(ctx, b, 10*time.Second)
			},
			func(ctx context.Context, rl *redlock.Client, b string) (*redlock.Lock, error) {
				return rl.Lock(ctx, b, 10*time.Second)
			},
			func(b string) []string { return []string{b} }},
		{"fenced",
			func(ctx context.Context, rl *redlock.Client, b string) (*redlock.Lock, error) {
				return rl.TryLock(ctx, b, 10*time.Second, redlock.WithFencing())
			},
			func(ctx context.Context, rl *redlock.Client, b string) (*redlock.Lock, error) {
				return rl.Lock(ctx, b, 10*time.Second, redlock.WithFencing())
			},
			func(b string) []string { return []string{b, redlock.KeyName("fence", b)} }},
		{"keys",
			func(ctx context.Context, rl *redlock.Client, b string) (*redlock.Lock, error) {
				return rl.TryLockKeys(ctx, []string{"{" + b + "}1", "{" + b + "}2"}, 10*time.Second)
			},
			func(ctx context.Context, rl *redlock.Client, b string) (*redlock.Lock, error) {
				return rl.LockKeys(ctx, []string{"{" + b + "}1", "{" + b + "}2"}, 10*time.Second)
			},
			func(b string) []string { return []string{"{" + b + "}1", "{" + b + "}2"} }},
		{"read",
			func(ctx context.Context, rl *redlock.Client, b string) (*redlock.Lock, error) {
				return rl.TryRLock(ctx, b, 10*time.Second)
			},
			func(ctx context.Context, rl *redlock.Client, b string) (*redlock.Lock, error) {
				return rl.RLock(ctx, b, 10*time.Second)
			},
			func(b string) []string { return []string{b, redlock.KeyName("readers", b)} }},
		{"path",
			func(ctx context.Context, rl *redlock.Client, b string) (*redlock.Lock, error) {
				return rl.TryLockPath(ctx, path(b), 10*time.Second)
			},
			func(ctx context.Context, rl *redlock.Client, b string) (*redlock.Lock, error) {
				return rl.LockPath(ctx, path(b), 10*time.Second)
			},
			func(b string) []string {
				p, parent := redlock.KeyName("path", path(b)), redlock.KeyName("path", b+"/x")
				// The holder keys of the path and of an ancestor, and
				// the intention records of both.
				return []string{p, parent, p + "/", parent + "/"}
			}},
		{"permit",
			func(ctx context.Context, rl *redlock.Client, b string) (*redlock.Lock, error) {
				return rl.TryAcquire(ctx, b, 1, 10*time.Second)
			},
			func(ctx context.Context, rl *redlock.Client, b string) (*redlock.Lock, error) {
				return rl.Acquire(ctx, b, 1, 10*time.Second)
			},
			func(b string) []string { return []string{b} }},
	}
}

// forEachKind runs f in a subtest for each lock kind, with a fresh base
// name and at, the first of the kind's keys on the nodes.
func forEachKind(t *testing.T, f func(t *testing.T, ka kindAttempt, base, at string)) {
	t.Helper()
	for _, ka := range kindAttempts() {
		t.Run(ka.name, func(t *testing.T) {
			base := key(t)
			f(t, ka, base, ka.keys(base)[0])
		})
	}
}

// forEachKeyValue runs f in a subtest for each lock kind, each of the
// kind's keys on the nodes and each of values, with a fresh base name and
// at, that key, once the value is put at it on every node.
func forEachKeyValue(t *testing.T, clients []redis.UniversalClient, values []storedValue, f func(t *testing.T, ka kindAttempt, base, at string, v storedValue)) {
	t.Helper()
	ctx := context.Background()
	for _, ka := range kindAttempts() {
		for ki := range ka.keys("b") {
			for _, v := range values {
				t.Run(fmt.Sprintf("%s/key%d/%s", ka.name, ki+1, v.name), func(t *testing.T) {
					base := key(t)
					at := ka.keys(base)[ki]
					for _, c := range clients {
						require.NoError(t, v.put(ctx, c, at))
					}
					f(t, ka, base, at, v)
				})
			}
		}
	}
}

// putSet puts a set, a type that no lock kind writes, at key k on every
// node, in place of whatever was there. It replaces in one transaction:
// an acquisition returns at its quorum, and the last node's grant may
// land between a DEL and an SADD sent apart.
func putSet(t *testing.T, clients []redis.UniversalClient, k string) {
	t.Helper()
	ctx := context.Background()
	for _, c := range clients {
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, k)
			p.SAdd(ctx, k, "m")
			return nil
		})
		require.NoError(t, err)
	}
}

// requireForeignFailure checks that err is a round lost to values of a
// foreign type: more nodes failed with the server's WRONGTYPE error, a
// redis.Error, than the quorum can spare, and ErrUnreachable, not
// ErrContended, is the reason.
func requireForeignFailure(t *testing.T, err error, reason error) {
	t.Helper()
	require.ErrorIs(t, err, reason)
	require.ErrorIs(t, err, redlock.ErrUnreachable, "want a node error, got %v", err)
	require.NotErrorIs(t, err, redlock.ErrContended, "a foreign value read as another owner")
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	n := 0
	for _, r := range qe.Nodes {
		if r.Status != "failed" {
			continue
		}
		var re redis.Error
		require.ErrorAs(t, r.Err, &re, "node %d: want the server's error, got %v", r.Node, r.Err)
		require.True(t, redis.HasErrorPrefix(r.Err, "WRONGTYPE"), "node %d: want WRONGTYPE, got %v", r.Node, r.Err)
		n++
	}
	require.Greater(t, n, len(qe.Nodes)-qe.Quorum, "want a quorum lost to WRONGTYPE: %v", err)
}

// requireOnlyKey checks that, of the keys containing base, each node
// holds only want, of type typ: a failed attempt wrote nothing.
func requireOnlyKey(t *testing.T, clients []redis.UniversalClient, base, want, typ string) {
	t.Helper()
	ctx := context.Background()
	for i, c := range clients {
		keys, err := c.Keys(ctx, "*"+base+"*").Result()
		require.NoError(t, err)
		require.Equal(t, []string{want}, keys, "node %d", i+1)
		got, err := c.Type(ctx, want).Result()
		require.NoError(t, err)
		require.Equal(t, typ, got, "node %d", i+1)
	}
}

// TestForeignValueFailsNode: a value of a type none of the lock kinds
// writes, at any key of any kind's lock, fails the node with the
// server's WRONGTYPE error (ErrUnreachable for the round), not
// contention, and the attempt writes nothing. On one node of three, the
// other two outvote it.
func TestForeignValueFailsNode(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	forEachKeyValue(t, clients, foreignTypes, func(t *testing.T, ka kindAttempt, base, at string, ft storedValue) {
		_, err := ka.try(ctx, rl, base)
		requireForeignFailure(t, err, redlock.ErrNotObtained)
		requireOnlyKey(t, clients, base, at, ft.name)

		// Only on node 1: the others outvote it.
		for _, c := range clients[1:] {
			require.NoError(t, c.Del(ctx, at).Err())
		}
		l, err := ka.try(ctx, rl, base)
		require.NoError(t, err)
		_ = l.Unlock(ctx) // node 1 fails the release (WRONGTYPE): not asserted here
	})
}

// TestOwnKindsAtKeyAreContention: a value that one of the lock kinds
// writes, at any key of any kind's lock, is never a node failure: a
// string (another owner's token, or a key lock on a readers key or on a
// path's intention records) is contention; a sorted set (a semaphore's
// permits, another reader, an intention record) is contention or, where
// the kind reads it as such (a reader beside ours, a lock below a
// sibling), no obstacle.
func TestOwnKindsAtKeyAreContention(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	own := []storedValue{
		{"token", func(ctx context.Context, c redis.UniversalClient, k string) error {
			return c.Set(ctx, k, foreignToken, time.Minute).Err()
		}},
		{"zset", func(ctx context.Context, c redis.UniversalClient, k string) error {
			return c.ZAdd(ctx, k, redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: foreignToken}).Err()
		}},
	}
	forEachKeyValue(t, clients, own, func(t *testing.T, ka kindAttempt, base, at string, o storedValue) {
		if at == redlock.KeyName("fence", base) {
			t.Skip("a fence counter holds a number: FencedSet's and the counter's own tests cover it")
		}
		l, err := ka.try(ctx, rl, base)
		if err == nil && o.name == "zset" {
			require.NoError(t, l.Unlock(ctx))
			return
		}
		require.ErrorIs(t, err, redlock.ErrContended, "%s at %s", o.name, at)
		require.NotErrorIs(t, err, redlock.ErrUnreachable, "the nodes answered")
	})
}

// TestForeignValueOnUnlockAndExtend: a set put in place of a held lock's
// key on every node. Unlock fails each node with the server's WRONGTYPE
// error (ErrNotHeld, ErrUnreachable), neither panicking nor claiming a
// release; the set stays. Extend finds the lock not ours on every node
// (NodeTaken, or NodeAbsent for a permit): the lock cannot be held
// there, so it is lost, not unreachable.
func TestForeignValueOnUnlockAndExtend(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	forEachKind(t, func(t *testing.T, ka kindAttempt, base, at string) {
		l, err := ka.try(ctx, rl, base)
		require.NoError(t, err)
		putSet(t, clients, at)
		err = l.Extend(ctx, 10*time.Second)
		require.ErrorIs(t, err, redlock.ErrNotHeld)
		require.NotErrorIs(t, err, redlock.ErrUnreachable)
		var qe *redlock.QuorumError
		require.ErrorAs(t, err, &qe)
		for _, r := range qe.Nodes {
			if r.Status != "pending" {
				require.Contains(t, []string{"taken", "absent"}, r.Status, "node %d: %v", r.Node, r)
			}
		}
		for _, c := range clients {
			require.NoError(t, c.Del(ctx, ka.keys(base)...).Err())
		}

		l, err = ka.try(ctx, rl, base)
		require.NoError(t, err)
		putSet(t, clients, at)
		requireForeignFailure(t, l.Unlock(ctx), redlock.ErrNotHeld)
		for i, c := range clients {
			typ, err := c.Type(ctx, at).Result()
			require.NoError(t, err)
			require.Equal(t, "set", typ, "node %d", i+1)
			require.NoError(t, c.Del(ctx, at).Err())
		}
	})
}

// TestLockStopsOnForeignValue: a waiting acquisition of each kind on a
// key that holds a foreign value on every node returns the nodes'
// WRONGTYPE errors (ErrUnreachable) instead of retrying until its ctx
// ends: no retry can win until someone removes the values. With such a
// value on one node of three, it retries as for a failed node, and wins
// once another owner's key on a second node expires.
func TestLockStopsOnForeignValue(t *testing.T) {
	t.Parallel()
	clients, rl := threeNodes(t)
	ctx := context.Background()
	forEachKind(t, func(t *testing.T, ka kindAttempt, base, at string) {
		putSet(t, clients, at)
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		_, err := ka.wait(wctx, rl, base)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "retried until ctx ended")
		requireForeignFailure(t, err, redlock.ErrNotObtained)

		for _, c := range clients[1:] {
			require.NoError(t, c.Del(ctx, at).Err())
		}
		// Another owner's value on node 2, gone after 300ms: only
		// then can nodes 2 and 3 outvote node 1.
		if ka.name == "permit" {
			// Another holder's permit, expiring with its key.
			require.NoError(t, clients[1].ZAdd(ctx, at, redis.Z{Score: float64(time.Now().Add(300 * time.Millisecond).UnixMilli()), Member: foreignToken}).Err())
			require.NoError(t, clients[1].PExpire(ctx, at, 300*time.Millisecond).Err())
		} else {
			holdForeign(t, clients[1], at, 300*time.Millisecond)
		}
		l, err := ka.wait(wctx, rl, base)
		require.NoError(t, err, "one foreign node of three stopped the wait")
		_ = l.Unlock(ctx) // node 1 fails the release (WRONGTYPE)
	})
}

// TestFamilyTinyTimeouts: 24 goroutines on one small tree, read-write
// keys and a semaphore, with a 1ms node timeout, for 2 seconds. Every
// returned lock is checked while held against the others: no two related
// paths, no writer beside a reader, never more than limit permits, all
// while both holders' Validity is positive.
func TestFamilyTinyTimeouts(t *testing.T) {
	t.Parallel()
	_, clients := cluster(t, 5)
	rl := newClient(t, clients, redlock.WithNodeTimeout(time.Millisecond))
	root := key(t)
	paths := []string{"a", "a/b", "a/b/c", "a/bc", "a/b-1", "a/.b", "d", "d/e"}
	d := 2 * time.Second
	if testing.Short() {
		d = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	// hold is one lock counted as held: its kind ("path", "read",
	// "write", "permit") and path.
	type hold struct {
		kind, path string
		l          *redlock.Lock
	}
	var mu sync.Mutex
	held := map[*hold]struct{}{}
	related := func(a, b string) bool {
		return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
	}
	// conflict names a live hold that h may not be beside, or "".
	conflict := func(h *hold) string {
		permits := 0
		for o := range held {
			if o.l.Validity() <= 0 {
				continue // expired: no longer holding
			}
			switch {
			case h.kind == "path" && o.kind == "path" && related(h.path, o.path):
				return fmt.Sprintf("path %q beside related %q", h.path, o.path)
			case h.kind == "write" && (o.kind == "read" || o.kind == "write"),
				h.kind == "read" && o.kind == "write":
				return fmt.Sprintf("%s beside a %s", h.kind, o.kind)
			case h.kind == "permit" && o.kind == "permit":
				permits++
			}
		}
		if permits >= 2 {
			return fmt.Sprintf("permit beside %d of limit 2", permits)
		}
		return ""
	}
	var acquired atomic.Int64
	var wg sync.WaitGroup
	for g := range 24 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for ctx.Err() == nil {
				h := &hold{}
				var err error
				switch rng.IntN(4) {
				case 0:
					h.kind, h.path = "path", paths[rng.IntN(len(paths))]
					h.l, err = rl.TryLockPath(ctx, root+"/"+h.path, 200*time.Millisecond)
				case 1:
					h.kind = "read"
					h.l, err = rl.TryRLock(ctx, root+"-rw", 200*time.Millisecond)
				case 2:
					h.kind = "write"
					h.l, err = rl.TryLock(ctx, root+"-rw", 200*time.Millisecond)
				default:
					h.kind = "permit"
					h.l, err = rl.TryAcquire(ctx, root+"-sem", 2, 200*time.Millisecond)
				}
				if err != nil {
					continue
				}
				acquired.Add(1)
				mu.Lock()
				if msg := conflict(h); msg != "" && h.l.Validity() > 0 {
					t.Errorf("%s (validity %v)", msg, h.l.Validity())
				}
				held[h] = struct{}{}
				mu.Unlock()
				time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // the holder's work
				mu.Lock()
				delete(held, h)
				mu.Unlock()
				_ = h.l.Unlock(context.Background())
			}
		})
	}
	wg.Wait()
	t.Logf("%d acquisitions with a 1ms node timeout", acquired.Load())
	eventually(t, 5*time.Second, func() bool { return len(nodeKeys(t, clients, root)) == 0 },
		"want nothing left on the nodes, got %v", nodeKeys(t, clients, root))
}

// TestFamilyConcurrentExtend: two Extends at once on one read lock and
// on one permit, 10s and 300ms, many times: Validity never promises more
// than a quorum of nodes still grants the lease (its expiry on the node,
// read from the readers set or the semaphore).
func TestFamilyConcurrentExtend(t *testing.T) {
	t.Parallel()
	clients, rl := threeNodes(t)
	ctx := context.Background()
	k := key(t)
	r := rlock(t, rl, k+"-r", 10*time.Second)
	p, err := rl.TryAcquire(ctx, k+"-s", 2, 10*time.Second)
	require.NoError(t, err)
	for _, tc := range []struct {
		l        *redlock.Lock
		set, tok string
	}{{r, redlock.KeyName("readers", k+"-r"), r.Token()}, {p, k + "-s", p.Token()}} {
		for i := range 150 {
			var wg sync.WaitGroup
			for _, ttl := range []time.Duration{10 * time.Second, 300 * time.Millisecond} {
				wg.Go(func() {
					_ = tc.l.Extend(ctx, ttl) // may fail under load; the promise must hold anyway
				})
			}
			wg.Wait()
			var left []time.Duration
			for _, c := range clients {
				score, err := c.ZScore(ctx, tc.set, tc.tok).Result()
				if err == redis.Nil {
					left = append(left, 0) // the lease is gone from this node
					continue
				}
				require.NoError(t, err)
				now, err := c.Time(ctx).Result()
				require.NoError(t, err)
				left = append(left, time.Duration(score*float64(time.Millisecond))-time.Duration(now.UnixNano()))
			}
			// The 2nd largest of 3 is what a quorum grants.
			a, b, c := left[0], left[1], left[2]
			q := max(min(a, b), min(max(a, b), c))
			v := tc.l.Validity()
			if v > q+2*time.Millisecond {
				t.Fatalf("%s pair %d: want Validity <= %v (the quorum's lease on the nodes), got %v", tc.l.Key(), i, q, v)
			}
			if v <= 0 {
				break // a stall outlasted the short lease
			}
		}
		_ = tc.l.Unlock(ctx)
	}
}

// TestFamilyWrongType: a lock on a semaphore's key, and a permit or a
// read lock on a plain lock's key, are refused as contention (the key is
// someone else's), not reported as an outage.
func TestFamilyWrongType(t *testing.T) {
	_, rl := threeNodes(t)
	ctx := context.Background()
	sem, lk := key(t), key(t)
	p, err := rl.TryAcquire(ctx, sem, 2, 10*time.Second)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Unlock(ctx)) }()
	_, err = rl.TryLock(ctx, sem, time.Second)
	require.ErrorIs(t, err, redlock.ErrContended)
	_, err = rl.TryRLock(ctx, sem, time.Second)
	require.ErrorIs(t, err, redlock.ErrContended)
	l, err := rl.TryLock(ctx, lk, 10*time.Second)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Unlock(ctx)) }()
	_, err = rl.TryAcquire(ctx, lk, 2, time.Second)
	require.ErrorIs(t, err, redlock.ErrContended)
}

// TestFamilyOnForeignTypeDeletesNothing: family locks on keys of another type fail cleanly
// (no panic, an error, nothing deleted).
func TestFamilyOnForeignTypeDeletesNothing(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	k := key(t)
	for _, c := range clients {
		require.NoError(t, c.HSet(ctx, k, "f", "v").Err())
		require.NoError(t, c.HSet(ctx, redlock.KeyName("readers", k+"r"), "f", "v").Err())
		require.NoError(t, c.Set(ctx, k+"s", "plain", time.Minute).Err())
	}
	within(t, 5*time.Second, "wrongtype", func() {
		_, err := rl.TryLock(ctx, k, time.Second)
		require.Error(t, err)
		_, err = rl.TryRLock(ctx, k, time.Second)
		require.Error(t, err)
		_, err = rl.TryAcquire(ctx, k, 3, time.Second)
		require.Error(t, err)
		_, err = rl.TryAcquire(ctx, k+"s", 3, time.Second)
		require.Error(t, err)
		_, err = rl.TryRLock(ctx, k+"r", time.Second)
		require.Error(t, err)
		t.Logf("rlock on a hash readers key: %v", err)
		// A semaphore key, then a plain lock and a read lock on it.
		p, err := rl.TryAcquire(ctx, k+"sem", 2, time.Second)
		require.NoError(t, err)
		_, err = rl.TryLock(ctx, k+"sem", time.Second)
		require.Error(t, err)
		_, err = rl.TryRLock(ctx, k+"sem", time.Second)
		require.Error(t, err)
		require.NoError(t, p.Unlock(ctx))
	})
	for i, c := range clients {
		typ, err := c.Type(ctx, k).Result()
		require.NoError(t, err)
		require.Equal(t, "hash", typ, "node %d", i+1)
		require.Equal(t, "plain", get(t, c, k+"s"), "node %d", i+1)
	}
}
