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

// Adversarial tests of the lock family: cancellation at random instants,
// tiny node timeouts, many goroutines on one tree, zero values and the
// key prefix.

// familyOps are one acquisition of each kind, on names under root.
func familyOps(rl *redlock.Client, root string) map[string]func(ctx context.Context, i int) (*redlock.Lock, error) {
	return map[string]func(ctx context.Context, i int) (*redlock.Lock, error){
		"path": func(ctx context.Context, i int) (*redlock.Lock, error) {
			return rl.TryLockPath(ctx, fmt.Sprintf("%s/p/%d/x", root, i), 30*time.Second)
		},
		"read": func(ctx context.Context, i int) (*redlock.Lock, error) {
			return rl.TryRLock(ctx, fmt.Sprintf("%s-r%d", root, i), 30*time.Second)
		},
		"permit": func(ctx context.Context, i int) (*redlock.Lock, error) {
			return rl.TryAcquire(ctx, fmt.Sprintf("%s-s%d", root, i), 2, 30*time.Second)
		},
	}
}

// nodeKeysLike returns the keys on the nodes that contain root, as
// "node i: key" strings; fence counters are not lock state.
func nodeKeysLike(t testing.TB, clients []redis.UniversalClient, root string) []string {
	t.Helper()
	var out []string
	for i, c := range clients {
		keys, err := c.Keys(context.Background(), "*"+root+"*").Result()
		require.NoError(t, err)
		for _, k := range keys {
			out = append(out, fmt.Sprintf("node %d: %s", i, k))
		}
	}
	return out
}

// TestFamilyCancelledLeavesNothing cancels acquisitions of every kind at
// random instants around their decision, with 30s TTLs; wins that stand
// are unlocked. Afterwards no key, intention record, readers entry or
// permit may be left on any node.
func TestFamilyCancelledLeavesNothing(t *testing.T) {
	_, clients := cluster(t, 5)
	rl := newClient(t, clients)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 2))
	root := key(t)
	tries := 600
	if testing.Short() {
		tries = 150
	}
	var wg sync.WaitGroup
	var won, cut atomic.Int64
	sem := make(chan struct{}, 4)
	for name, op := range familyOps(rl, root) {
		for i := range tries {
			delay := time.Duration(rng.Int64N(int64(1500 * time.Microsecond)))
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				ctx, cancel := context.WithCancel(context.Background())
				timer := time.AfterFunc(delay, cancel)
				defer timer.Stop()
				l, err := op(ctx, i%20)
				cancel()
				if err != nil {
					cut.Add(1)
					return
				}
				won.Add(1)
				if err := l.Unlock(context.Background()); err != nil {
					t.Errorf("%s: Unlock of a won lock: %v", name, err)
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("seed %d: %d won, %d cut or refused", seed, won.Load(), cut.Load())
	eventually(t, 5*time.Second, func() bool { return len(nodeKeysLike(t, clients, root)) == 0 },
		"seed %d: want nothing left on the nodes, got %v", seed, nodeKeysLike(t, clients, root))
}

// TestFamilyTinyTimeouts: 24 goroutines on one small tree, read-write
// keys and a semaphore, with a 1ms node timeout, for 2 seconds. Every
// returned lock is checked while held against the others: no two related
// paths, no writer beside a reader, never more than limit permits, all
// while both holders' Validity is positive.
func TestFamilyTinyTimeouts(t *testing.T) {
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
		wg.Add(1)
		go func() {
			defer wg.Done()
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
				time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
				mu.Lock()
				delete(held, h)
				mu.Unlock()
				_ = h.l.Unlock(context.Background())
			}
		}()
	}
	wg.Wait()
	t.Logf("%d acquisitions with a 1ms node timeout", acquired.Load())
	eventually(t, 5*time.Second, func() bool { return len(nodeKeysLike(t, clients, root)) == 0 },
		"want nothing left on the nodes, got %v", nodeKeysLike(t, clients, root))
}

// TestFamilyConcurrentExtend: two Extends at once on one read lock and
// on one permit, 10s and 300ms, many times: Validity never promises more
// than a quorum of nodes still grants the lease (its expiry on the node,
// read from the readers set or the semaphore).
func TestFamilyConcurrentExtend(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	k := key(t)
	r, err := rl.TryRLock(ctx, k+"-r", 10*time.Second)
	require.NoError(t, err)
	p, err := rl.TryAcquire(ctx, k+"-s", 2, 10*time.Second)
	require.NoError(t, err)
	for _, tc := range []struct {
		l        *redlock.Lock
		set, tok string
	}{{r, redlock.ReadersKey(k + "-r"), r.Token()}, {p, k + "-s", p.Token()}} {
		for i := range 150 {
			var wg sync.WaitGroup
			for _, ttl := range []time.Duration{10 * time.Second, 300 * time.Millisecond} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_ = tc.l.Extend(ctx, ttl) // may fail under load; the promise must hold anyway
				}()
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

// TestFamilyKeyPrefix: with WithKeyPrefix every key the family writes
// is under the prefix, and hand-off still wakes waiters.
func TestFamilyKeyPrefix(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients, redlock.WithKeyPrefix("app1:"))
	ctx := context.Background()
	root := key(t)
	var held []*redlock.Lock
	for _, op := range familyOps(rl, root) {
		l, err := op(ctx, 0)
		require.NoError(t, err)
		held = append(held, l)
	}
	for _, k := range nodeKeysLike(t, clients, root) {
		_, name, _ := strings.Cut(k, ": ")
		require.True(t, strings.HasPrefix(name, "app1:"), "want every key under the prefix, got %q", name)
	}
	// A writer waiting on the read lock wakes on the reader's release.
	r := held[0]
	for _, l := range held {
		if strings.HasSuffix(l.Key(), "-r0") {
			r = l
		}
	}
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		w, err := rl.Lock(wctx, r.Key(), time.Second, redlock.WithRetryDelay(5*time.Second))
		if err == nil {
			err = w.Unlock(ctx)
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	for _, l := range held {
		require.NoError(t, l.Unlock(ctx))
	}
	require.NoError(t, <-got)
	require.Less(t, time.Since(start), 2*time.Second, "want the writer woken by the release under the prefix")
	eventually(t, 2*time.Second, func() bool { return len(nodeKeysLike(t, clients, root)) == 0 },
		"want nothing left on the nodes, got %v", nodeKeysLike(t, clients, root))
}

// TestFamilyZeroAndBadInput: a zero or nil Client, bad TTLs, cancelled
// contexts and reserved tokens fail at once with the documented error.
func TestFamilyZeroAndBadInput(t *testing.T) {
	ctx := context.Background()
	var zero redlock.Client
	var nilc *redlock.Client
	for _, c := range []*redlock.Client{&zero, nilc} {
		_, err := c.TryLockPath(ctx, "a/b", time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = c.LockPath(ctx, "a/b", time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = c.TryRLock(ctx, "k", time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = c.RLock(ctx, "k", time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = c.TryAcquire(ctx, "k", 2, time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = c.Acquire(ctx, "k", 2, time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
	}
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	for _, ttl := range []time.Duration{0, -time.Second, time.Millisecond} {
		_, err := rl.TryRLock(ctx, key(t), ttl)
		require.ErrorIs(t, err, redlock.ErrInvalid, "ttl %v", ttl)
		_, err = rl.TryAcquire(ctx, key(t), 1, ttl)
		require.ErrorIs(t, err, redlock.ErrInvalid, "ttl %v", ttl)
		_, err = rl.TryLockPath(ctx, key(t), ttl)
		require.ErrorIs(t, err, redlock.ErrInvalid, "ttl %v", ttl)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err := rl.RLock(done, key(t), time.Second)
	require.ErrorIs(t, err, context.Canceled)
	_, err = rl.Acquire(done, key(t), 1, time.Second)
	require.ErrorIs(t, err, context.Canceled)
	_, err = rl.LockPath(done, key(t), time.Second)
	require.ErrorIs(t, err, context.Canceled)
	_, err = rl.TryRLock(ctx, key(t), time.Second, redlock.WithToken("redlock:readers-and-more"))
	require.ErrorIs(t, err, redlock.ErrInvalid, "want tokens in the library's namespace refused")
	_, err = rl.TryRLock(ctx, "", time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = rl.TryRLock(ctx, key(t), time.Second, redlock.WithFencing())
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = rl.TryAcquire(ctx, key(t), 2, time.Second, redlock.WithFencing())
	require.ErrorIs(t, err, redlock.ErrInvalid)
}

// TestFamilyWrongType: a lock on a semaphore's key, and a permit or a
// read lock on a plain lock's key, are refused as contention (the key is
// someone else's), not reported as an outage.
func TestFamilyWrongType(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
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
