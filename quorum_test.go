package redlock_test

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
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

// TestQuorumSubsets walks every assignment of the states down, held by
// another token, and healthy over 5 real nodes (3^5 = 243 cases): the lock
// is won if and only if at least 3 nodes are healthy, a lost attempt
// leaves none of our keys, the reason names contention or outage, and
// neither Lock nor Unlock touches another holder's key.
func TestQuorumSubsets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	everyNodeState(t, 5, func(c redis.UniversalClient, k string) {
		holdForeign(t, c, k, time.Minute)
	}, func(sc subsetCase) {
		name, k, states, live := sc.name, sc.key, sc.states, sc.live
		c := newClient(t, sc.clients, redlock.WithNodeTimeout(time.Second))
		l, err := c.TryLock(ctx, k, 10*time.Second)
		if sc.healthy >= 3 {
			require.NoError(t, err, name)
			require.Positive(t, l.Validity(), name)
			holding := 0
			for i, s := range states {
				if s == nodeHealthy && get(t, live[i], k) == l.Token() {
					holding++
				}
			}
			require.GreaterOrEqual(t, holding, 3, "%s: a won lock is held on a quorum", name)
			require.NoError(t, l.Unlock(ctx), name)
		} else {
			qe := requireNotObtained(t, l, err, name)
			require.Len(t, qe.Nodes, 5, name)
			// The round decides on the replies it has: a majority
			// of refusals is contention, of failures an outage, a mix
			// is both.
			if sc.taken >= 3 {
				require.ErrorIs(t, err, redlock.ErrContended, name)
			}
			if sc.down >= 3 {
				require.ErrorIs(t, err, redlock.ErrUnreachable, name)
			}
			if sc.down == 0 {
				require.NotErrorIs(t, err, redlock.ErrUnreachable, name)
			}
			if sc.taken == 0 {
				require.NotErrorIs(t, err, redlock.ErrContended, name)
			}
			for _, r := range qe.Nodes {
				switch states[r.Node] {
				case nodeDown:
					if r.Status != "pending" {
						require.Equal(t, "failed", r.Status, "%s: %v", name, r)
						require.Error(t, r.Err, name)
					}
				case nodeTaken:
					if r.Status != "pending" {
						require.Equal(t, "taken", r.Status, "%s: %v", name, r)
					}
				}
			}
		}
		for i, s := range states {
			switch s {
			case nodeHealthy: // released by Unlock or the lost attempt, late replies too
				eventually(t, 2*time.Second, func() bool { return get(t, live[i], k) == "" }, "%s: node %d keeps a key", name, i)
			case nodeTaken: // never touched
				require.Equal(t, foreignToken, get(t, live[i], k), "%s: node %d lost the other holder's key", name, i)
			}
		}
	})
}

// TestFirstRoundNeverReturnsExpired: a client's first round waits up to
// firstContactTimeout for a stopped node's first contact after the quorum
// was won; with a 150ms TTL the lock has expired by then. It must be
// refused with ErrExpired (and released), never returned with
// Validity <= 0.
func TestFirstRoundNeverReturnsExpired(t *testing.T) {
	t.Parallel()
	nodes, clients := cluster(t, 3)
	require.NoError(t, nodes[2].Pause())
	t.Cleanup(func() { _ = nodes[2].Resume() })
	rl, err := redlock.New(clients) // default options: the first round waits for first contact
	require.NoError(t, err)
	t.Cleanup(func() { _ = rl.Close() })
	k := key(t)
	l, err := rl.TryLock(context.Background(), k, 150*time.Millisecond)
	if err == nil {
		v := l.Validity()
		_ = l.Unlock(context.Background())
		t.Fatalf("want ErrExpired or a lock with Validity > 0, got a lock with Validity %v", v)
	}
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrExpired)
	for i, c := range clients[:2] {
		require.Empty(t, get(t, c, k), "node %d keeps the key of an expired win", i)
	}
}

// TestCancelledWinLeavesNothing cancels TryLock at random instants
// around its decision, on 5 nodes, many times; wins that stand are
// unlocked. Afterwards no key may be left: a win cut short by ctx must
// also release the grants that arrive between the decision and the
// cancellation being seen (the 4th and 5th replies come right after the
// 3rd, which decides).
func TestCancelledWinLeavesNothing(t *testing.T) {
	t.Parallel()
	_, clients := cluster(t, 5)
	rl := newClient(t, clients)
	tries := 3000
	if testing.Short() {
		tries = 500
	}
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	keys := make([]string, tries)
	for i := range keys {
		keys[i] = key(t)
	}
	won, cut := cancelAround(t, rng, tries, "TryLock", func(ctx context.Context, i int) (*redlock.Lock, error) {
		return rl.TryLock(ctx, keys[i], 30*time.Second)
	})
	t.Logf("seed %d: %d attempts cut by cancellation, %d won", seed, cut, won)
	eventually(t, 5*time.Second, func() bool { return leftKeys(t, clients, keys) == "" },
		"seed %d: want no key left after cancelled wins, got %s", seed, leftKeys(t, clients, keys))
}

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

// TestFamilyCancelledLeavesNothing cancels acquisitions of every kind at
// random instants around their decision, with 30s TTLs; wins that stand
// are unlocked. Afterwards no key, intention record, readers entry or
// permit may be left on any node.
func TestFamilyCancelledLeavesNothing(t *testing.T) {
	_, clients := cluster(t, 5)
	rl := newClient(t, clients)
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	root := key(t)
	tries := 600
	if testing.Short() {
		tries = 150
	}
	var won, cut int64
	for name, op := range familyOps(rl, root) {
		w, c := cancelAround(t, rng, tries, name, func(ctx context.Context, i int) (*redlock.Lock, error) {
			return op(ctx, i%20)
		})
		won, cut = won+w, cut+c
	}
	t.Logf("seed %d: %d won, %d cut or refused", seed, won, cut)
	eventually(t, 5*time.Second, func() bool { return len(nodeKeys(t, clients, root)) == 0 },
		"seed %d: want nothing left on the nodes, got %v", seed, nodeKeys(t, clients, root))
}

// failReleases is a go-redis hook that fails the first n release
// requests without sending them: a release lost before it reaches the
// node, as under load with a tiny node timeout. A release is a script
// whose source says "compare-and-delete" (release.lua, release_one.lua):
// EVAL shows the source, and the SHA-1 of each such source seen names it
// in EVALSHA. A release never sent as EVAL through the hook is not cached
// on the node, so its EVALSHA fails with NOSCRIPT and is sent as EVAL.
type failReleases struct {
	shas sync.Map // SHA-1 (hex) of each release source seen -> true
	left atomic.Int64
}

func (f *failReleases) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failReleases) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.isRelease(cmd) && f.left.Add(-1) >= 0 {
			err := errors.New("test: release dropped before it reached the node")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (f *failReleases) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (f *failReleases) isRelease(cmd redis.Cmder) bool {
	a := cmd.Args()
	if len(a) < 2 {
		return false
	}
	name, _ := a[0].(string)
	arg, _ := a[1].(string)
	if strings.EqualFold(name, "eval") && strings.Contains(arg, "compare-and-delete") {
		sum := sha1.Sum([]byte(arg))
		f.shas.Store(hex.EncodeToString(sum[:]), true)
		return true
	}
	_, ok := f.shas.Load(arg)
	return ok && strings.EqualFold(name, "evalsha")
}

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

// leftKeys describes which of keys remain on which node, "" for none.
func leftKeys(t testing.TB, clients []redis.UniversalClient, keys []string) string {
	t.Helper()
	var out []string
	for i, c := range clients {
		for _, k := range keys {
			if v := get(t, c, k); v != "" {
				out = append(out, "node "+string(rune('0'+i))+": "+k+"="+v)
			}
		}
	}
	return strings.Join(out, "; ")
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

// nodeAnswer is an observer for one call's options (and the Lock it
// returns), and a channel that gets node i's first answer (or failure)
// to a request of op.
func nodeAnswer(i int, op string) (redlock.SharedOption, <-chan redlock.Event) {
	ch := make(chan redlock.Event, 1)
	var once sync.Once
	return redlock.WithObserver(func(e redlock.Event) {
		if e.Kind == "node" && e.Node == i && e.Op == op {
			once.Do(func() { ch <- e })
		}
	}), ch
}

// monitor runs MONITOR on addr and returns a function that stops it and
// returns the lines seen.
func monitor(t *testing.T, addr, password string) func() []string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	if password != "" {
		_, err = conn.Write([]byte("AUTH " + password + "\r\n"))
		require.NoError(t, err)
	}
	_, err = conn.Write([]byte("MONITOR\r\n"))
	require.NoError(t, err)
	var mu sync.Mutex
	var lines []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReader(conn)
		for {
			ln, err := r.ReadString('\n')
			if err != nil {
				return
			}
			mu.Lock()
			lines = append(lines, strings.TrimSpace(ln))
			mu.Unlock()
		}
	}()
	return func() []string {
		_ = conn.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return lines
	}
}
