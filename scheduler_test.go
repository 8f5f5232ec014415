package redlock_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
)

// Many auto-extended locks on one client, extended by one scheduler in
// batches.

// takeMany takes n locks on distinct keys from g goroutines with TryLock
// (and AutoExtend at once when auto) and returns them in key order, with
// the rate achieved.
func takeMany(t testing.TB, rl *redlock.Client, prefix string, n, g int, ttl time.Duration, auto bool) ([]*redlock.Lock, float64) {
	t.Helper()
	ctx := context.Background()
	locks := make([]*redlock.Lock, n)
	start := time.Now()
	err := inParallel(n, g, func(i int) error {
		var l *redlock.Lock
		var err error
		// A loaded machine (-race, 256 goroutines on 2 cores) may time
		// nodes out: try again, backing off, for up to 30s.
		for try, end := 0, time.Now().Add(30*time.Second); ; try++ {
			if l, err = rl.TryLock(ctx, fmt.Sprintf("%s-%d", prefix, i), ttl); err == nil || time.Now().After(end) {
				break
			}
			time.Sleep(time.Duration(min(try+1, 10)) * 5 * time.Millisecond) // backing off, not synchronizing
		}
		if err == nil && auto {
			err = l.AutoExtend(ctx)
		}
		if err != nil {
			return fmt.Errorf("lock %d: %w", i, err)
		}
		locks[i] = l
		return nil
	})
	rate := float64(n) / time.Since(start).Seconds()
	require.NoError(t, err)
	return locks, rate
}

// unlockAll unlocks locks from g goroutines.
func unlockAll(locks []*redlock.Lock, g int) {
	_ = inParallel(len(locks), g, func(i int) error {
		_ = locks[i].Unlock(context.Background())
		return nil
	})
}

// inParallel runs f(0) .. f(n-1) on g goroutines; a goroutine stops at
// its first error, and the first error is returned.
func inParallel(n, g int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Value
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	err, _ := first.Load().(error)
	return err
}

// heapNow returns the live heap after a collection.
func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestManyAutoExtendedLocks holds 2 000 auto-extended locks (TTL 2s) for
// six TTLs on 5 nodes, under -race in make test: the goroutines must not
// grow with the locks (one scheduler per client, not one goroutine per
// lock), and a held lock must cost under 2 KiB of heap.
//
// A lock may be lost when the process cannot run for a good part of its
// TTL. So what the test asserts about losses follows from the stalls
// that a stallMonitor measured. A lock survives by design any stall
// shorter than survivableStall (its extension falls due at TTL/2 left
// and it is lost at the loss margin), provided the process runs long
// enough in that time to extend every lock due: here, at least half of
// every TTL/2 (a machine that runs the process in short slices shows
// short stalls that add up to most of a second, and thousands of locks
// fall due in that time with none of them extended).
// Done closes before the deadline after any stall shorter than the loss
// margin. With stalls past those, the test asserts only that no lock
// whose validity ran out still claims to be held. How many locks a
// client holds on an unloaded machine is make hold's figure.
func TestManyAutoExtendedLocks(t *testing.T) {
	// Enough locks that a goroutine or a heap object per lock would
	// show, few enough that extending them under -race fits a slow
	// machine with other jobs on its 2 cores: the test checks what a
	// lock costs, not how many a client can hold (make hold's figure).
	n, ttl := 2000, 2*time.Second
	_, clients := cluster(t, 5)
	obs, ended := lossTimes()
	rl, err := redlock.New(clients, redlock.WithObserver(observeWith(obs))) // defaults: the per-node timeout for 2s is what users get
	require.NoError(t, err)
	t.Cleanup(func() { _ = rl.Close() })
	ctx := context.Background()
	// Warm up: connections dialled, nodes identified.
	warm, _ := takeMany(t, rl, key(t)+"-warm", 512, 256, ttl, false)
	unlockAll(warm, 256)

	stalls := watchStalls(t)
	baseG := runtime.NumGoroutine()
	locks, rate := takeMany(t, rl, key(t), n, 256, ttl, true)
	t.Logf("took %d locks (TryLock + AutoExtend) from 256 goroutines at %.0f locks/s", n, rate)
	// The live heap also holds the extension rounds in flight, many more
	// of them on a loaded machine, where they can double the measure:
	// the least of a sample a second is the locks' own cost.
	heap := heapNow()

	// Hold for six TTLs; watch the goroutines and sample the heap.
	hold := time.NewTimer(6 * ttl)
	defer hold.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	sample := time.NewTicker(time.Second)
	defer sample.Stop()
	peakG := 0
	for waiting := true; waiting; {
		select {
		case <-hold.C:
			waiting = false
		case <-tick.C:
			peakG = max(peakG, runtime.NumGoroutine())
		case <-sample.C:
			heap = min(heap, heapNow())
		}
	}
	longest := stalls.Longest()
	lost, firstErr := lostLocks(locks)
	minExt := 1 << 30
	for _, l := range locks {
		if l.Err() == nil {
			minExt = min(minExt, l.Extensions())
		}
	}
	lateDone, firstLate := lateLosses(locks, ended)
	margin := lossMargin(ttl, defaultNodeTimeout(ttl))
	t.Logf("goroutines: %d before, peak %d while holding; lost %d (Done after the deadline: %d); fewest extensions of a held lock %d",
		baseG, peakG, lost, lateDone, minExt)
	require.Less(t, peakG-baseG, 300, "goroutines grew with the locks held")
	if longest < margin {
		require.Zero(t, lateDone, "lost locks whose Done closed after their deadline, with no stall over %v (first: %s)", margin, firstLate)
	}
	if stalls.Survivable(t, ttl, defaultNodeTimeout(ttl), lossMargin(ttl, defaultNodeTimeout(ttl))) {
		require.Zero(t, lost, "locks lost with every node up and survivable stalls (first: %v)", firstErr)
		require.GreaterOrEqual(t, minExt, 6, "a lock was extended fewer than 6 times in 6 TTLs")
		// Every lock is still on a quorum of nodes.
		for _, i := range []int{0, n / 2, n - 1} {
			held := 0
			for _, c := range clients {
				if get(t, c, locks[i].Key()) == locks[i].Token() {
					held++
				}
			}
			require.GreaterOrEqual(t, held, rl.Quorum(), "lock %d on the nodes", i)
		}
	} else {
		t.Logf("stalls past what a lock survives: losses allowed")
	}
	// Whatever the stalls, a lock whose validity ran out says so.
	requireLossesSafe(t, locks)

	// What holding costs: the heap while holding against the heap once
	// every lock is unlocked and dropped. Not against the heap before
	// taking them: on a loaded machine the pools open more connections
	// meanwhile (tens of KiB of buffers each), which stay open and are
	// no lock's cost.
	unlockAll(locks, 256)
	clear(locks)
	perLock := float64(int64(heap)-int64(heapNow())) / float64(n)
	t.Logf("heap per held auto-extended lock: %.0f B", perLock)
	if lost == 0 {
		// A lost lock keeps its error, with every node's outcome.
		require.Less(t, perLock, 2048.0, "heap per held auto-extended lock")
	}

	eventually(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= baseG+20 },
		"goroutines after every lock was released: %d, before %d", runtime.NumGoroutine(), baseG)
	for i, c := range clients {
		eventually(t, 5*time.Second, func() bool { return c.DBSize(ctx).Val() == 0 }, "node %d keeps keys", i+1)
	}
}

// pausedNodeTimeout is holdPaused's per-node timeout: Done closes that
// long before the deadline, a margin wide enough for a loaded machine's
// stalls.
const pausedNodeTimeout = 200 * time.Millisecond

// holdPaused holds m auto-extended locks on 5 nodes, pauses the first
// `paused` nodes for d, and returns the locks (still auto-extended).
// Before the pause, watch (when not nil) is given the locks. opts go to
// New.
func holdPaused(t *testing.T, m, paused int, ttl, d time.Duration, watch func([]*redlock.Lock), opts ...redlock.Option) ([]*redlock.Lock, *redlock.Client) {
	nodes, clients := cluster(t, 5)
	rl, err := redlock.New(clients, append([]redlock.Option{redlock.WithNodeTimeout(pausedNodeTimeout)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rl.Close() })
	warm, _ := takeMany(t, rl, key(t)+"-warm", 64, 64, ttl, false) // dial and identify the nodes first
	unlockAll(warm, 64)
	locks, _ := takeMany(t, rl, key(t), m, 64, ttl, true)
	if watch != nil {
		watch(locks)
	}
	for _, nd := range nodes[:paused] {
		require.NoError(t, nd.Pause())
		t.Cleanup(func() { _ = nd.Resume() })
	}
	time.Sleep(d) // the fault lasts d: nothing to await
	for _, nd := range nodes[:paused] {
		require.NoError(t, nd.Resume())
	}
	return locks, rl
}

// lossTimes returns an observer that records when each lock's loss was
// reported, as Done closed (under the lock's state lock: the instant is
// exact, and no sweep loads the machine), and the map it records in,
// from the lock's first key to the time.Time.
func lossTimes() (eventObserver, *sync.Map) {
	var ended sync.Map
	return lossObserver(func(e redlock.Event) {
		if e.Lost {
			ended.Store(e.Keys[0], time.Now())
		}
	}), &ended
}

// lateLosses counts the locks whose loss was reported (in ended) after
// their deadline, and describes the first.
func lateLosses(locks []*redlock.Lock, ended *sync.Map) (late int, first string) {
	for i, l := range locks {
		if v, ok := ended.Load(l.Key()); ok && v.(time.Time).After(deadlineOf(l)) {
			if late++; late == 1 {
				first = fmt.Sprintf("lock %d: Done closed %v after its deadline", i, v.(time.Time).Sub(deadlineOf(l)))
			}
		}
	}
	return late, first
}

// TestManyLocksMinorityPaused: with 2 of 5 nodes paused for two TTLs, no
// held lock is lost. A lock may be lost when the process itself cannot
// run for a good part of its TTL, so the test asserts no loss only when
// the stalls stayed within what a lock survives by design
// (stallMonitor.Survivable); whatever the stalls, every lost lock says
// so, and Done closes before the deadline after any stall shorter than
// the loss margin.
func TestManyLocksMinorityPaused(t *testing.T) {
	ttl := 2 * time.Second
	obs, ended := lossTimes()
	stalls := watchStalls(t)
	locks, _ := holdPaused(t, 2000, 2, ttl, 2*ttl, nil, redlock.WithObserver(observeWith(obs)))
	lost, first := lostLocks(locks)
	late, firstLate := lateLosses(locks, ended)
	t.Logf("lost %d of %d (Done after the deadline: %d)", lost, len(locks), late)
	if margin := lossMargin(ttl, pausedNodeTimeout); stalls.Longest() < margin {
		require.Zero(t, late, "lost locks whose Done closed after their deadline, with no stall over %v (first: %s)", margin, firstLate)
	}
	if stalls.Survivable(t, ttl, pausedNodeTimeout, lossMargin(ttl, pausedNodeTimeout)) {
		require.Zero(t, lost, "locks lost with a minority paused and survivable stalls (first: %v)", first)
	} else {
		t.Logf("stalls past what a lock survives: losses allowed")
	}
	requireLossesSafe(t, locks)
	unlockAll(locks, 64)
}

// TestManyLocksMajorityPaused: with 3 of 5 nodes paused, every lock is
// lost, and each one's Done closes before its deadline unless the process
// stalled for longer than the loss margin.
func TestManyLocksMajorityPaused(t *testing.T) {
	ttl := time.Second
	obs, ended := lossTimes()
	stalls := watchStalls(t)
	locks, _ := holdPaused(t, 2000, 3, ttl, 2*ttl, nil, redlock.WithObserver(observeWith(obs)))
	for i, l := range locks {
		_, ok := ended.Load(l.Key())
		require.True(t, ok, "lock %d: no loss observed", i)
	}
	late, first := lateLosses(locks, ended)
	margin, longest := lossMargin(ttl, pausedNodeTimeout), stalls.Longest()
	t.Logf("Done after the deadline: %d; longest stall %v (Done is on time after %v)", late, longest, margin)
	if longest < margin {
		require.Zero(t, late, "locks whose Done closed after their deadline (first: %s)", first)
	}
	for i, l := range locks {
		select {
		case <-l.Done():
		default:
			t.Fatalf("lock %d: Done still open after a majority was paused for 2 TTLs", i)
		}
		require.ErrorIs(t, l.Err(), redlock.ErrLockLost, "lock %d", i)
	}
	unlockAll(locks, 64)
}

// TestAutoExtendWithConcurrentExtend: the caller's Extends racing the
// scheduler's never make Validity promise more than a quorum holds. The
// caller's TTLs (800ms, 900ms) keep the lock below the point (TTL/2 =
// 1s left) where auto-extension (2s) is due, so that the two interleave
// all the time; only auto-extension can land between the Validity read
// and the PTTL reads after it, and it can only raise the PTTLs. The
// TTLs are long enough that a stall of a loaded machine does not end
// the lock between two rounds (a caller's Extend of 150ms fails after a
// 150ms stall): the test is about Validity, not about stalls.
func TestAutoExtendWithConcurrentExtend(t *testing.T) {
	t.Parallel()
	clients, rl := threeNodes(t)
	ctx := context.Background()
	l := autoExtended(t, rl, 2*time.Second)
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		ttl := 800 * time.Millisecond
		if i%2 == 1 {
			ttl = 900 * time.Millisecond
		}
		require.NoError(t, l.Extend(ctx, ttl), "round %d", i)
		t1 := time.Now()
		v := l.Validity()
		var pttls []time.Duration
		for _, c := range clients {
			pttls = append(pttls, c.PTTL(ctx, l.Key()).Val())
		}
		// A PTTL read at t2 is what the node held at t1, less t2-t1
		// (more if extended since), to the millisecond.
		slack := time.Since(t1) + time.Millisecond
		sortDesc(pttls)
		require.LessOrEqual(t, v, pttls[rl.Quorum()-1]+slack, "round %d: Validity %v, PTTLs %v", i, v, pttls)
	}
	require.NoError(t, l.Err())
	require.Greater(t, l.Extensions(), 10)
	require.NoError(t, l.Unlock(ctx))
}

func sortDesc(d []time.Duration) {
	for i := range d {
		for j := i + 1; j < len(d); j++ {
			if d[j] > d[i] {
				d[i], d[j] = d[j], d[i]
			}
		}
	}
}

// lossObserver is an Observer that hears only ObserveLock.
type lossObserver func(redlock.Event)

func (lossObserver) ObserveNode(redlock.Event)     {}
func (lossObserver) ObserveRound(redlock.Event)    {}
func (f lossObserver) ObserveLock(e redlock.Event) { f(e) }

// TestSchedulerEndsWithLastLock: the scheduler's goroutine ends as soon as
// its last lock is released, not when its timer (set for an extension
// seconds away) would have fired.
func TestSchedulerEndsWithLastLock(t *testing.T) {
	_, rl := threeNodes(t)
	ctx := context.Background()
	l := autoExtended(t, rl, 30*time.Second)
	require.Equal(t, 1, schedulerLoops(), "scheduler goroutines while a lock is auto-extended")
	require.NoError(t, l.Unlock(ctx))
	eventually(t, 2*time.Second, func() bool { return schedulerLoops() == 0 },
		"the scheduler's goroutine still runs after the last auto-extended lock was released")
}

// schedulerLoops counts the goroutines running a client's scheduler.
func schedulerLoops() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			// Started or not yet running: each was created by addLocked.
			return strings.Count(string(buf[:n]), "created by github.com/seed543a70bd/redlock.(*sched).addLocked")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestAutoExtendCancelledCtx: AutoExtend with a ctx already done (its
// AfterFunc then runs at once, maybe before AutoExtend returns) or done
// at random instants right after: no extension, no panic, and the lock
// lives out its validity; Unlock still releases it.
func TestAutoExtendCancelledCtx(t *testing.T) {
	_, rl := threeNodes(t)
	ctx := context.Background()
	for i := range 300 {
		l, err := rl.TryLock(ctx, key(t), 5*time.Second)
		require.NoError(t, err)
		actx, cancel := context.WithCancel(ctx)
		if i%2 == 0 {
			cancel()
		} else {
			go cancel()
		}
		require.NoError(t, l.AutoExtend(actx), "round %d", i)
		require.NoError(t, l.Err(), "round %d: the lock lives out its validity", i)
		require.NoError(t, l.Unlock(ctx), "round %d", i)
		cancel()
	}
	eventually(t, 2*time.Second, func() bool { return schedulerLoops() == 0 }, "the scheduler still runs")
}
