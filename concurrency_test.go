package redlock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

// Adversarial tests of one handle used from several goroutines, of
// cancellation between decision and effect, of panicking callbacks, of
// tiny timeouts under load and of zero values: each one reproduces a
// defect an outside review found (see the comment on each).

// TestConcurrentExtendNeverOverpromises runs two Extends at once on one
// lock, one to 10s and one to 300ms, many times, and after each pair
// checks that Validity promises no more than a quorum of nodes grants:
// the quorum-th largest PTTL on the nodes. Before Extends were
// serialised, whichever call finished last set the deadline, so Validity
// could say ~9.4s while every node expired the key in 300ms.
func TestConcurrentExtendNeverOverpromises(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	k := key(t)
	l, err := rl.TryLock(context.Background(), k, 10*time.Second)
	require.NoError(t, err)
	defer func() { _ = l.Unlock(context.Background()) }()
	// A stall may end the lease; the loop then takes it again.

	ttls := [2]time.Duration{10 * time.Second, 300 * time.Millisecond}
	pairs := 400
	if testing.Short() {
		pairs = 100
	}
	for i := range pairs {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, ttl := range ttls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[j] = l.Extend(context.Background(), ttl)
			}()
		}
		wg.Wait()
		// Under load an Extend may fail (a node timeout); the promise
		// must hold whatever each call returned.
		granted := quorumPTTL(t, clients, k, rl.Quorum())
		v := l.Validity()
		if v > granted+2*time.Millisecond {
			t.Fatalf("pair %d (Extend(10s): %v; Extend(300ms): %v): want Validity <= %v (the quorum-th largest PTTL on the nodes), got %v", i, errs[0], errs[1], granted, v)
		}
		if v <= 0 {
			// A stall outlasted the 300ms lease: start again.
			_ = l.Unlock(context.Background())
			l, err = rl.TryLock(context.Background(), k, 10*time.Second)
			require.NoError(t, err)
		}
	}
}

// quorumPTTL returns the quorum-th largest PTTL of key over clients: how
// long at least a quorum of nodes still keeps it.
func quorumPTTL(t testing.TB, clients []redis.UniversalClient, key string, quorum int) time.Duration {
	t.Helper()
	var ds []time.Duration
	for _, c := range clients {
		d, err := c.PTTL(context.Background(), key).Result()
		require.NoError(t, err)
		ds = append(ds, d)
	}
	sort.Slice(ds, func(a, b int) bool { return ds[a] > ds[b] })
	return ds[quorum-1]
}

type panicValue struct{ msg string }

// TestDoPanicReleases panics in Do's fn: the panic reaches the caller
// unchanged, and by then the lock is released on every node and its
// extender has stopped (goleak in TestMain). Before, the lock was
// auto-extended until the caller's ctx ended: with context.Background,
// never.
func TestDoPanicReleases(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	k := key(t)
	want := &panicValue{"boom"}
	var got any
	func() {
		defer func() { got = recover() }()
		_ = rl.Do(context.Background(), k, time.Second, func(ctx context.Context) error {
			panic(want)
		})
	}()
	require.Same(t, want, got, "want Do to re-panic with fn's value")
	// Unlock returned at its quorum; the last node follows at once.
	for i, c := range clients {
		eventually(t, 2*time.Second, func() bool { return get(t, c, k) == "" },
			"node %d still holds the key after Do's fn panicked", i+1)
	}
	l, err := rl.TryLock(context.Background(), k, time.Second)
	require.NoError(t, err, "want the key free after Do's fn panicked")
	require.NoError(t, l.Unlock(context.Background()))

	// runtime.Goexit (t.FailNow in fn) ends the call the same way.
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rl.Do(context.Background(), k, time.Second, func(context.Context) error {
			runtimeGoexit()
			return nil
		})
	}()
	<-done
	for i, c := range clients {
		eventually(t, 2*time.Second, func() bool { return get(t, c, k) == "" },
			"node %d still holds the key after Do's fn called Goexit", i+1)
	}
}

// TestFirstRoundNeverReturnsExpired: a client's first round waits up to
// FirstContactTimeout for a stopped node's first contact after the quorum
// was won; with a 150ms TTL the lock has expired by then. It must be
// refused with ErrExpired (and released), never returned with
// Validity <= 0.
func TestFirstRoundNeverReturnsExpired(t *testing.T) {
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
// Unlock whose release failed on one node. Before, a failed clean-up
// release was not retried, and the key blocked its node for the TTL.
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
// Before, clean-up releases that missed the 5ms node timeout were never
// retried: keys ended up held by orphaned tokens for the whole TTL.
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
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				l, err := rl.TryLock(ctx, keys[g%len(keys)], ttl)
				if err != nil {
					continue
				}
				won.Add(1)
				_ = l.Unlock(context.Background())
			}
		}()
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

// TestCancelledWinLeavesNothing cancels TryLock at random instants
// around its decision, on 5 nodes, many times; wins that stand are
// unlocked. Afterwards no key may be left. Before, a win cut short by ctx
// leaked the grants that arrived between the decision and the
// cancellation being seen: the 4th and 5th replies come right after the
// 3rd, which decides.
func TestCancelledWinLeavesNothing(t *testing.T) {
	_, clients := cluster(t, 5)
	rl := newClient(t, clients)
	tries := 3000
	if testing.Short() {
		tries = 500
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	var keys []string
	var wg sync.WaitGroup
	var cut, stood atomic.Int64
	sem := make(chan struct{}, 4)
	for range tries {
		k := key(t)
		keys = append(keys, k)
		delay := time.Duration(rng.Int64N(int64(1500 * time.Microsecond)))
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithCancel(context.Background())
			timer := time.AfterFunc(delay, cancel)
			defer timer.Stop()
			l, err := rl.TryLock(ctx, k, 30*time.Second)
			cancel()
			if err != nil {
				cut.Add(1)
				return
			}
			stood.Add(1)
			if err := l.Unlock(context.Background()); err != nil {
				t.Errorf("Unlock of a won lock: %v", err)
			}
		}()
	}
	wg.Wait()
	t.Logf("seed %d: %d attempts cut by cancellation, %d won", seed, cut.Load(), stood.Load())
	eventually(t, 5*time.Second, func() bool { return leftKeys(t, clients, keys) == "" },
		"seed %d: want no key left after cancelled wins, got %s", seed, leftKeys(t, clients, keys))
}

// TestDoneNeverAfterDeadline: with a 1ms node timeout, 20 auto-extended
// locks lose 3 of 5 nodes; each lock's Done must close before its
// Deadline, and Do's fn ctx too. Before, the loss margin was the 1ms
// node timeout, within timer jitter: Done closed after Deadline in some
// runs. The margin now has a floor (MinLossMargin).
func TestDoneNeverAfterDeadline(t *testing.T) {
	nodes, clients := cluster(t, 5)
	rl := newClient(t, clients, redlock.WithNodeTimeout(time.Millisecond), redlock.WithRetryDelay(5*time.Millisecond))
	const ttl = 400 * time.Millisecond
	const n = 20
	locks := make([]*redlock.Lock, n)
	for i := range locks {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := rl.Lock(ctx, key(t), ttl)
		cancel()
		require.NoError(t, err)
		locks[i] = l
		require.NoError(t, l.AutoExtend(context.Background()))
	}
	// Do's fn ctx, on a client with the same 1ms node timeout.
	doCtx := make(chan time.Time, 1)
	doErr := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		doErr <- rl.Do(ctx, key(t), ttl, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			doCtx <- time.Now()
			return nil
		})
	}()
	select {
	case <-started:
	case err := <-doErr:
		t.Fatalf("Do: want fn run, got %v", err)
	}
	for _, nd := range nodes[:3] {
		require.NoError(t, nd.Pause())
	}
	t.Cleanup(func() {
		for _, nd := range nodes[:3] {
			_ = nd.Resume()
		}
	})
	var wg sync.WaitGroup
	late := make(chan string, n)
	for i, l := range locks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-l.Done():
			case <-time.After(10 * time.Second):
				late <- "lock " + string(rune('a'+i)) + ": Done never closed"
				return
			}
			if at, dl := time.Now(), l.Deadline(); !at.Before(dl) {
				late <- "lock " + string(rune('a'+i)) + ": Done closed " + at.Sub(dl).String() + " after Deadline"
			}
			require.ErrorIs(t, l.Err(), redlock.ErrLockLost)
		}()
	}
	wg.Wait()
	close(late)
	for msg := range late {
		t.Error(msg)
	}
	select {
	case <-doCtx:
	case <-time.After(10 * time.Second):
		t.Fatal("Do's fn ctx never ended after a majority was paused")
	}
	for _, nd := range nodes[:3] {
		require.NoError(t, nd.Resume())
	}
	require.ErrorIs(t, <-doErr, redlock.ErrLockLost)
}

// TestZeroValues: a zero Client, MultiLock and Lock fail at once with
// ErrInvalid, never hang or panic. Before, a zero Client's Lock retried
// forever over its empty node list.
func TestZeroValues(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var c redlock.Client
	start := time.Now()
	_, err := c.Lock(ctx, "k", time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = c.TryLock(ctx, "k", time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = c.LockKeys(ctx, []string{"a", "b"}, time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = c.TryLockKeys(ctx, []string{"a", "b"}, time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorIs(t, c.Do(ctx, "k", time.Second, func(context.Context) error { return nil }), redlock.ErrInvalid)
	require.NoError(t, c.Close())
	require.Zero(t, c.Nodes())

	var m redlock.MultiLock
	_, err = m.Lock(ctx, "k", time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = m.TryLock(ctx, "k", time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorIs(t, m.Do(ctx, "k", time.Second, func(context.Context) error { return nil }), redlock.ErrInvalid)
	require.NoError(t, m.Close())
	require.Zero(t, m.Nodes())

	var l redlock.Lock
	require.ErrorIs(t, l.AutoExtend(ctx), redlock.ErrInvalid)
	require.ErrorIs(t, l.Extend(ctx, time.Second), redlock.ErrInvalid)
	require.ErrorIs(t, l.Unlock(ctx), redlock.ErrInvalid)
	require.LessOrEqual(t, l.Validity(), time.Duration(0))
	select {
	case <-l.Done():
	default:
		t.Fatal("want a zero Lock's Done closed")
	}
	require.Error(t, l.Err())
	require.Less(t, time.Since(start), time.Second, "want zero values refused at once")
}

// TestUnlockWaitsForEveryReachableNode: Unlock returns at its quorum,
// and Close waits for the releases still in flight: once Close returns,
// a node that was stopped during the Unlock and resumed 100ms later has
// released too, so that a process that exits after Close leaves nothing
// behind. Before, nothing waited for the nodes beyond the quorum.
func TestUnlockWaitsForEveryReachableNode(t *testing.T) {
	nodes, clients := cluster(t, 5)
	rl, err := redlock.New(clients, redlock.WithNodeTimeout(testNodeTimeout))
	require.NoError(t, err)
	k := key(t)
	l, err := rl.TryLock(context.Background(), k, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, nodes[4].Pause())
	resumed := make(chan error, 1)
	time.AfterFunc(100*time.Millisecond, func() { resumed <- nodes[4].Resume() })
	require.NoError(t, l.Unlock(context.Background()))
	require.NoError(t, rl.Close())
	require.NoError(t, <-resumed)
	for i, c := range clients {
		require.Empty(t, get(t, c, k), "node %d still holds the key when Close returned", i+1)
	}
}

func runtimeGoexit() { runtime.Goexit() }

// TestCloseBounded: Close returns within its bound even when a stopped
// node holds a release of a go-redis client with no read timeout (which
// honours no context deadline either). The stuck request's goroutine
// ends once the node resumes.
func TestCloseBounded(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	clients := make([]redis.UniversalClient, 3)
	for i, nd := range nodes {
		c := redis.NewClient(&redis.Options{Addr: nd.Addr(), ReadTimeout: -1, WriteTimeout: -1, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	rl, err := redlock.New(clients, redlock.WithNodeTimeout(testNodeTimeout))
	require.NoError(t, err)
	k := key(t)
	l, err := rl.TryLock(context.Background(), k, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, nodes[2].Pause())
	t.Cleanup(func() { _ = nodes[2].Resume() })
	require.NoError(t, l.Unlock(context.Background()))
	start := time.Now()
	require.NoError(t, rl.Close())
	took := time.Since(start)
	require.Less(t, took, 3*time.Second, "want Close bounded (about 750ms) with a stopped node and no read timeout, took %v", took)
	require.NoError(t, nodes[2].Resume())
	eventually(t, 5*time.Second, func() bool { return get(t, clients[2], k) == "" },
		"want the stuck release to land once node 3 resumes")
}

// TestReleaseRetryOutlastsLongestTTL: an Extend to 30s that failed
// overall still set 30s on node 3; node 3 is down when Unlock runs, and
// comes back (append-only: the key survives). The background retry of
// its release must last as long as the key may, not the lock's last
// won TTL (300ms), and delete it. The randomized stress test found this.
func TestReleaseRetryOutlastsLongestTTL(t *testing.T) {
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

// burst calls f(0) .. f(n-1) at once, each on a goroutine of its own,
// and returns their errors and the longest call.
func burst(n int, f func(i int) error) ([]error, time.Duration) {
	errs := make([]error, n)
	took := make([]time.Duration, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			errs[i] = f(i)
			took[i] = time.Since(t0)
		}()
	}
	close(start)
	wg.Wait()
	return errs, slices.Max(took)
}

// countErrs returns how many of errs are not nil, and the first.
func countErrs(errs []error) (int, error) {
	n := 0
	var first error
	for _, err := range errs {
		if err != nil {
			if n++; n == 1 {
				first = err
			}
		}
	}
	return n, first
}

// TestBurstOnBusyNodesSucceeds: 10 000 TryLocks at once on distinct
// keys, then 10 000 Unlocks at once, on 3 healthy nodes with a 20s
// per-node timeout: every call succeeds, and no key is left. A node
// that answers, however many requests wait for it, never counts as
// failed. Before, a request that found 4096 others queued for its node
// failed at once as if the node were down: about half of each burst
// failed, TryLock with ErrUnreachable and Unlock with ErrNotHeld.
func TestBurstOnBusyNodesSucceeds(t *testing.T) {
	const n = 10000
	_, clients := cluster(t, 3)
	rl := newClient(t, clients, redlock.WithNodeTimeout(20*time.Second))
	ctx := context.Background()
	warm, err := rl.TryLock(ctx, key(t), 10*time.Second) // dial and identify the nodes first
	require.NoError(t, err)
	require.NoError(t, warm.Unlock(ctx))

	prefix := key(t)
	locks := make([]*redlock.Lock, n)
	errs, took := burst(n, func(i int) error {
		var err error
		locks[i], err = rl.TryLock(ctx, fmt.Sprintf("%s-%d", prefix, i), time.Minute)
		return err
	})
	failed, first := countErrs(errs)
	t.Logf("TryLock burst: %d failed, longest call %v", failed, took)
	require.Zero(t, failed, "want every TryLock of the burst won (first error: %v)", first)

	errs, took = burst(n, func(i int) error { return locks[i].Unlock(ctx) })
	failed, first = countErrs(errs)
	t.Logf("Unlock burst: %d failed, longest call %v", failed, took)
	require.Zero(t, failed, "want every Unlock of the burst to succeed (first error: %v)", first)
	for i, c := range clients {
		eventually(t, 10*time.Second, func() bool { return c.DBSize(ctx).Val() == 0 },
			"want no key left on node %d, got %d", i+1, c.DBSize(ctx).Val())
	}
}

// TestSilentNodeFailsWithinNodeTimeout: a node stopped (SIGSTOP) behind
// a go-redis client with no read timeout never answers, so its queue
// fills. Waiting for room in it must not turn a silent node into a
// hang: with 1 of 3 nodes stopped, a burst of 10 000 TryLocks is won on
// the other two, each call as soon as they answered, not after the
// per-node timeout; with 2 of 3 stopped, each call of a second burst
// ends with ErrUnreachable within about the per-node timeout.
func TestSilentNodeFailsWithinNodeTimeout(t *testing.T) {
	const n = 10000
	// Long enough for the two nodes that answer to answer a burst of
	// 10 000 under -race on a loaded machine.
	const nodeTimeout = 3 * time.Second
	nodes := redistest.Nodes(t, 3)
	clients := make([]redis.UniversalClient, 3)
	for i, nd := range nodes {
		c := redis.NewClient(&redis.Options{Addr: nd.Addr(), ReadTimeout: -1, WriteTimeout: -1, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	rl := newClient(t, clients, redlock.WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	warm, err := rl.TryLock(ctx, key(t), 10*time.Second) // dial and identify the nodes first
	require.NoError(t, err)
	require.NoError(t, warm.Unlock(ctx))

	for _, nd := range nodes[1:] {
		t.Cleanup(func() { _ = nd.Resume() }) // before Close (cleanups run last first)
	}
	require.NoError(t, nodes[2].Pause())
	prefix := key(t)
	errs, took := burst(n, func(i int) error {
		_, err := rl.TryLock(ctx, fmt.Sprintf("%s-a%d", prefix, i), time.Minute)
		return err
	})
	failed, first := countErrs(errs)
	t.Logf("1 of 3 stopped: %d failed, longest call %v", failed, took)
	require.Zero(t, failed, "want every TryLock won on the 2 nodes that answer (first error: %v)", first)
	require.Less(t, took, nodeTimeout, "want each TryLock decided by the nodes that answer, not waiting for the stopped one")

	require.NoError(t, nodes[1].Pause())
	errs, took = burst(n, func(i int) error {
		_, err := rl.TryLock(ctx, fmt.Sprintf("%s-b%d", prefix, i), time.Minute)
		return err
	})
	t.Logf("2 of 3 stopped: longest call %v", took)
	for i, err := range errs {
		require.ErrorIs(t, err, redlock.ErrUnreachable, "TryLock %d with 2 of 3 nodes stopped", i)
	}
	// A call waits nodeTimeout for the stopped nodes, and its lost
	// round's clean-up release of the node that granted up to as long
	// again; the rest is a loaded machine running 10 000 goroutines
	// under -race.
	require.Less(t, took, 2*nodeTimeout+3*time.Second, "want each TryLock bounded by its per-node timeout")
}
