package redlock_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
)

// TestCleanupReleaseRetried loses an attempt (3 of 5 nodes hold another
// token) on a node whose first releases fail: the key must still be gone
// from that node soon after, long before its 30s TTL. The same for an
// Unlock whose release failed on one node. A clean-up release that
// fails is retried in the background: otherwise the key would block its
// node for the whole TTL.
func TestCleanupReleaseRetried(t *testing.T) {
	nodes := redistest.Nodes(t, 5)
	clients := make([]redis.UniversalClient, 5)
	hook := &failReleases{}
	for i, nd := range nodes {
		c := redistest.Client(t, nd)
		if i == 3 {
			c.AddHook(hook)
		}
		clients[i] = c
	}
	rl := newClient(t, clients)
	const ttl = 30 * time.Second

	t.Run("lost attempt", func(t *testing.T) {
		k := key(t)
		for _, c := range clients[:3] {
			holdForeign(t, c, k, ttl)
		}
		hook.left.Store(3)
		_, err := rl.TryLock(context.Background(), k, ttl)
		require.ErrorIs(t, err, redlock.ErrContended)
		eventually(t, 5*time.Second, func() bool { return get(t, clients[3], k) == "" },
			"want node 3's clean-up release retried until it lands, key still %q", get(t, clients[3], k))
		require.Empty(t, get(t, clients[4], k))
		require.LessOrEqual(t, hook.left.Load(), int64(0), "want the hook to have failed releases")
	})
	t.Run("unlock", func(t *testing.T) {
		k := key(t)
		l, err := rl.TryLock(context.Background(), k, ttl)
		require.NoError(t, err)
		hook.left.Store(2)
		require.NoError(t, l.Unlock(context.Background()))
		eventually(t, 5*time.Second, func() bool { return get(t, clients[3], k) == "" },
			"want node 3's failed release retried until it lands, key still %q", get(t, clients[3], k))
	})
}

// TestNoOrphansUnderLoad: 32 goroutines on 3 keys with a 5ms node
// timeout and a 30s TTL, each looping TryLock and Unlock. Once they stop,
// every key must be gone from every node within a few seconds (the
// background release retries), and a new client must win every key.
// A clean-up release that misses the 5ms node timeout must be retried,
// or its key stays held by an orphaned token for the whole TTL.
func TestNoOrphansUnderLoad(t *testing.T) {
	_, clients := cluster(t, 5)
	rl := newClient(t, clients, redlock.WithNodeTimeout(5*time.Millisecond))
	keys := []string{key(t), key(t), key(t)}
	const ttl = 30 * time.Second
	d := 3 * time.Second
	if testing.Short() {
		d = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	var won atomic.Int64
	for g := range 32 {
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := rl.TryLock(ctx, keys[g%len(keys)], ttl)
				if err != nil {
					continue
				}
				won.Add(1)
				_ = l.Unlock(context.Background())
			}
		})
	}
	wg.Wait()
	t.Logf("%d locks won by 32 goroutines in %v", won.Load(), d)
	eventually(t, 5*time.Second, func() bool { return leftKeys(t, clients, keys) == "" },
		"want no key left on any node once the workload stopped, got %s", leftKeys(t, clients, keys))
}

// TestReleaseRetryOutlastsLongestTTL: an Extend to 30s that failed
// overall still set 30s on node 3; node 3 is down when Unlock runs, and
// comes back (append-only: the key survives). The background retry of
// its release must last as long as the key may, not the lock's last
// won TTL (300ms), and delete it. The randomized stress test found this.
func TestReleaseRetryOutlastsLongestTTL(t *testing.T) {
	t.Parallel()
	nodes := redistest.NodesWith(t, 3, redisnode.Options{AppendOnly: true})
	clients := redistest.Clients(t, nodes)
	rl := newClient(t, clients, redlock.WithNodeTimeout(50*time.Millisecond))
	ctx := context.Background()
	k := key(t)
	l, err := rl.TryLock(ctx, k, time.Second)
	require.NoError(t, err)
	for _, nd := range nodes[:2] {
		require.NoError(t, nd.Pause())
	}
	require.Error(t, l.Extend(ctx, 30*time.Second), "want the Extend lost with 2 of 3 nodes paused")
	for _, nd := range nodes[:2] {
		require.NoError(t, nd.Resume())
	}
	pttl, err := clients[2].PTTL(ctx, k).Result()
	require.NoError(t, err)
	require.Greater(t, pttl, 10*time.Second, "want node 3 extended to 30s by the lost Extend")
	require.NoError(t, nodes[2].Kill())
	_ = l.Unlock(ctx)                   // node 3 down: its release fails and is retried
	time.Sleep(1500 * time.Millisecond) // longer than the lock's last won TTL: the retry must still be queued
	require.NoError(t, nodes[2].Restart())
	eventually(t, 5*time.Second, func() bool { return get(t, clients[2], k) == "" },
		"want node 3's key (PTTL %v when set) released once it is back", pttl)
}

// TestReleaseRetrySparesRelockWithSameToken: a lock with WithToken(T) is
// unlocked while node 3 is paused, so its release there fails. The
// holder then takes the lock back with the same token, and node 3
// resumes. MONITOR must not show the new lock's SET on node 3 followed by
// a release of the same token deleting it: a background retry of the
// old release would do exactly that, which is why releases of WithToken
// locks are not retried.
func TestReleaseRetrySparesRelockWithSameToken(t *testing.T) {
	t.Parallel()
	nodes, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	const token = "reused-token-0123456789abcdef"
	for round := 0; round < 4; round++ {
		k := key(t)
		mon := monitor(t, nodes[2].Addr(), nodes[2].Password())
		watch1, released := nodeAnswer(2, "unlock")
		l1, err := rl.TryLock(ctx, k, 60*time.Second, redlock.WithToken(token), watch1)
		require.NoError(t, err)
		require.NoError(t, nodes[2].Pause())
		require.NoError(t, l1.Unlock(ctx)) // nodes 1 and 2; node 3's release in flight
		// The release fails at the go-redis timeouts: a retry of it
		// would be due from then on.
		select {
		case e := <-released:
			require.Equal(t, "failed", e.Status, "round %d: node 3's release on a paused node", round)
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: node 3's release neither answered nor failed within 10s", round)
		}
		watch2, set3 := nodeAnswer(2, "lock")
		l2, err := rl.TryLock(ctx, k, 20*time.Second, redlock.WithToken(token), watch2)
		require.NoError(t, err) // nodes 1 and 2
		require.NoError(t, nodes[2].Resume())
		var set3Status string
		select {
		case e := <-set3:
			set3Status = e.Status
			t.Logf("round %d: node 3 answered the new lock: %s %v", round, e.Status, e.Err)
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: node 3 did not answer the new lock within 10s of resuming", round)
		}
		// A negative check: the window in which a retry of the old
		// release (retry delays up to 500ms, then rechecks) would
		// reach node 3 after the new lock's SET. No event marks that
		// it did not come.
		time.Sleep(1500 * time.Millisecond)
		lines := mon()
		// The new lock's SET (PX 20000) on node 3, then a DEL of k;
		// either in a script (upper case) or sent as is (lower case).
		set, del := -1, -1
		for i, ln := range lines {
			ln = strings.ToLower(ln)
			switch {
			case strings.Contains(ln, `"set" "`+strings.ToLower(k)+`"`) && strings.Contains(ln, `"20000"`):
				set = i
			case set >= 0 && strings.Contains(ln, `"del" "`+strings.ToLower(k)+`"`):
				del = i
			}
		}
		valid := l2.Validity()
		_ = l2.Unlock(ctx)
		if set3Status == "ok" && set < 0 {
			t.Fatalf("round %d: node 3 took the new lock, but MONITOR did not show its SET: the check below would be blind", round)
		}
		if set >= 0 && del > set {
			t.Fatalf("round %d: after TryLock(WithToken) returned, a retry of the earlier release of the same token deleted the new lock's key on node 3 (new lock Validity %v, never unlocked):\n%s",
				round, valid, strings.Join(lines[set:del+1], "\n"))
		}
		t.Logf("round %d: no witness (set %d, del %d)", round, set, del)
	}
}
