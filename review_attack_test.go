package redlock

// Adversarial review of today's changes: lockExt/unlockExt (lock.go,
// batch.go), the leaders' connection slots (connslots.go, node.go) and
// the writer's mark (retry.go).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock/internal/redistest"
)

// revBusy runs back-to-back TryLock+Unlock cycles on c until stop.
func revBusy(c *Client, name string, stop <-chan struct{}, errs *atomic.Int64, wg *sync.WaitGroup) {
	wg.Go(func() {
		ctx := context.Background()
		for j := 0; ; j++ {
			select {
			case <-stop:
				return
			default:
			}
			l, err := c.TryLock(ctx, fmt.Sprintf("%s-%d", name, j), 5*time.Second)
			if err == nil {
				err = l.Unlock(ctx)
			}
			if err != nil {
				errs.Add(1)
				time.Sleep(time.Millisecond)
			}
		}
	})
}

// TestReviewSlotsWithTimeoutClones: go-redis's (*Client).WithTimeout
// returns a new *redis.Client that shares the original's connection pool
// (baseClient.clone copies connPool). The slot table is keyed by the
// *redis.Client, so Clients built on clones of one client each get a
// quarter of the same pool: their leaders together may hold all of it.
// Measures the connections the leaders hold at once against the bound
// of the shared pool, and whether a direct PING on the original client
// then waits for the pool.
func TestReviewSlotsWithTimeoutClones(t *testing.T) {
	for _, clone := range []bool{false, true} {
		t.Run(fmt.Sprintf("clones=%v", clone), func(t *testing.T) { revSlotsClones(t, clone) })
	}
}

func revSlotsClones(t *testing.T, clone bool) {
	nodes := redistest.Nodes(t, 3)
	base := advClients(t, nodes, func(o *redis.Options) {
		o.PoolSize, o.PoolTimeout = 4, 3*time.Second
	})
	const n = 4
	lcs := make([]*Client, n)
	clones := make([][]*redis.Client, n)
	for i := range lcs {
		cl := make([]redis.UniversalClient, len(base))
		for j, b := range base {
			c := b.(*redis.Client)
			if clone {
				c = c.WithTimeout(500 * time.Millisecond)
			}
			clones[i] = append(clones[i], c)
			cl[j] = c
		}
		lcs[i] = advNew(t, cl, WithNodeTimeout(500*time.Millisecond))
	}
	var autos []*Lock
	for i, c := range lcs {
		autos = append(autos, atkAutoLocks(t, c, fmt.Sprintf("%s-auto-%d", t.Name(), i), 3, 400*time.Millisecond)...)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var cycErrs atomic.Int64
	for i, c := range lcs {
		for w := range 2 {
			revBusy(c, fmt.Sprintf("%s-%d-%d", t.Name(), i, w), stop, &cycErrs, &wg)
		}
	}
	// Sample the slots held on node 0's shared pool, over all clones.
	var maxHeld atomic.Int32
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var sum int32
			seen := map[*connSlots]bool{}
			for i := range n {
				if s := connSlotsOf(clones[i][0]); !seen[s] {
					seen[s] = true
					sum += s.held.Load()
				}
			}
			if sum > maxHeld.Load() {
				maxHeld.Store(sum)
			}
			time.Sleep(time.Millisecond)
		}
	})
	var pingMax time.Duration
	var pingErr error
	ctx := context.Background()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		start := time.Now()
		if err := base[0].Ping(ctx).Err(); err != nil && pingErr == nil {
			pingErr = err
		}
		pingMax = max(pingMax, time.Since(start))
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	bound := connSlotsFor(base[0].(*redis.Client).Options())
	t.Logf("bound %d; leaders held up to %d connections of node 0's shared pool of 4; slowest PING %v (err %v); %d cycles failed",
		bound, maxHeld.Load(), pingMax, pingErr, cycErrs.Load())
	if maxHeld.Load() > bound {
		t.Errorf("leaders of Clients on WithTimeout clones held %d connections of one pool at once; the bound is %d", maxHeld.Load(), bound)
	}
	if pingMax > time.Second || pingErr != nil {
		t.Errorf("a direct PING on the shared client waited %v (err %v)", pingMax, pingErr)
	}
	lost := 0
	var lostErr error
	for _, l := range autos {
		if err := l.Err(); err != nil {
			lost++
			lostErr = err
		}
		_ = l.Unlock(ctx)
	}
	if lost > 0 {
		t.Errorf("%d of %d auto-extended locks lost; last: %v", lost, len(autos), lostErr)
	}
}

// TestReviewSlotsNoLeakAfterChurn: Clients sharing go-redis clients,
// busy, while nodes are killed and restarted, paused and resumed, and
// Clients closed mid-flight. Afterwards no slot may be held (every take
// gave its slot back), and a new Client's leaders must take connections
// again (the slots were not left taken).
func TestReviewSlotsNoLeakAfterChurn(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	clients := advClients(t, nodes, func(o *redis.Options) { o.PoolSize, o.PoolTimeout = 8, time.Second })
	slots := make([]*connSlots, len(clients))
	for i, c := range clients {
		slots[i] = connSlotsOf(c.(*redis.Client))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var cycErrs atomic.Int64
	var lcs []*Client
	for i := range 5 {
		c := advNew(t, clients)
		lcs = append(lcs, c)
		for w := range 3 {
			revBusy(c, fmt.Sprintf("%s-%d-%d", t.Name(), i, w), stop, &cycErrs, &wg)
		}
	}
	var maxHeld atomic.Int32
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, s := range slots {
				if h := s.held.Load(); h > maxHeld.Load() {
					maxHeld.Store(h)
				}
				if h := s.held.Load(); h < 0 || h > s.max {
					t.Errorf("slots held %d, max %d", h, s.max)
				}
			}
			time.Sleep(time.Millisecond)
		}
	})
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, nodes[0].Kill())
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, nodes[0].Restart())
	require.NoError(t, nodes[1].Pause())
	time.Sleep(700 * time.Millisecond) // past the 500ms read timeout
	require.NoError(t, nodes[1].Resume())
	_ = lcs[0].Close()
	_ = lcs[1].Close()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	for _, c := range lcs {
		_ = c.Close()
	}
	t.Logf("max held %d; %d cycles failed (some expected: kill, pause, close)", maxHeld.Load(), cycErrs.Load())
	for i, s := range slots {
		advEventually(t, 5*time.Second, func() bool { return s.held.Load() == 0 }, "node %d: %d slots still held after every Client closed", i, s.held.Load())
	}
	// Leaders of a new Client take again.
	c := advNew(t, clients)
	stop2 := make(chan struct{})
	var seen atomic.Bool
	var wg2 sync.WaitGroup
	for w := range 4 {
		revBusy(c, fmt.Sprintf("%s-again-%d", t.Name(), w), stop2, &cycErrs, &wg2)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && !seen.Load() {
		all := true
		for _, s := range slots {
			if s.held.Load() == 0 {
				all = false
			}
		}
		if all {
			seen.Store(true)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop2)
	wg2.Wait()
	require.NoError(t, c.Close())
	if !seen.Load() {
		t.Errorf("a new busy Client's leaders never held a slot on every node within 5s after the churn")
	}
	for i, s := range slots {
		advEventually(t, 5*time.Second, func() bool { return s.held.Load() == 0 }, "node %d: %d slots still held", i, s.held.Load())
	}
}

// TestReviewTakePanicGivesSlot: a take whose goroutine panics (the test
// hook, standing in for go-redis) gives its slot back; with the hook
// gone, leaders take again.
func TestReviewTakePanicGivesSlot(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	clients := advClients(t, nodes, func(o *redis.Options) { o.PoolSize = 4 })
	var panics atomic.Int64
	hook := func() { panics.Add(1); panic("review: take panics") }
	testHookTake.Store(&hook)
	defer testHookTake.Store(nil)
	c := advNew(t, clients)
	require.Empty(t, advCycles(c, t.Name(), 4, 30))
	testHookTake.Store(nil)
	for i, cl := range clients {
		s := connSlotsOf(cl.(*redis.Client))
		advEventually(t, 5*time.Second, func() bool { return s.held.Load() == 0 }, "node %d: %d slots held after panicking takes", i, s.held.Load())
	}
	t.Logf("%d takes panicked", panics.Load())
	// A panicking take ends its leader's connection attempts (lc.off) only
	// for that leader's life: a new leader (after leaderLinger) takes.
	time.Sleep(2 * leaderLinger)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var errs atomic.Int64
	for w := range 4 {
		revBusy(c, fmt.Sprintf("%s-again-%d", t.Name(), w), stop, &errs, &wg)
	}
	s0 := connSlotsOf(clients[0].(*redis.Client))
	var took bool
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && !took; time.Sleep(time.Millisecond) {
		took = s0.held.Load() > 0
	}
	close(stop)
	wg.Wait()
	require.True(t, took, "leaders never took a connection again after the panicking takes")
	require.Zero(t, errs.Load())
}

// TestReviewUserClosesSharedClient: the user closes the shared go-redis
// clients while leaders hold or take connections: every slot comes back.
func TestReviewUserClosesSharedClient(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	clients := advClients(t, nodes, func(o *redis.Options) { o.PoolSize = 4 })
	var slots []*connSlots
	for _, c := range clients {
		slots = append(slots, connSlotsOf(c.(*redis.Client)))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var errs atomic.Int64
	for i := range 3 {
		c := advNew(t, clients)
		for w := range 3 {
			revBusy(c, fmt.Sprintf("%s-%d-%d", t.Name(), i, w), stop, &errs, &wg)
		}
	}
	time.Sleep(400 * time.Millisecond)
	for _, c := range clients {
		_ = c.Close()
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	for i, s := range slots {
		advEventually(t, 5*time.Second, func() bool { return s.held.Load() == 0 }, "node %d: %d slots held after the user closed the client", i, s.held.Load())
	}
}

// TestReviewValidityVsNodes: Extends of random TTLs, many cut short by
// their ctx (mid-round, or while waiting for another extension), from 8
// goroutines, with AutoExtend running and a node paused at times (so
// requests land late). Once everything has settled, Validity must not
// exceed what a quorum of nodes still holds (the quorum-th largest
// PTTL), and the lock's token must be on a quorum while Validity > 0.
func TestReviewValidityVsNodes(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			nodes := redistest.Nodes(t, 3)
			clients := advClients(t, nodes, func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = 2*time.Second, 2*time.Second })
			admins := advClients(t, nodes, nil)
			c := advNew(t, clients, WithNodeTimeout(300*time.Millisecond))
			ctx := context.Background()
			k := fmt.Sprintf("%s-k", t.Name())
			l, err := c.TryLock(ctx, k, time.Second)
			require.NoError(t, err)
			actx, stopAuto := context.WithCancel(ctx)
			require.NoError(t, l.AutoExtend(actx))
			ttls := []time.Duration{400 * time.Millisecond, time.Second, 3 * time.Second, 6 * time.Second}
			var wg sync.WaitGroup
			var ok, failed atomic.Int64
			for g := range 8 {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				wg.Go(func() {
					for range 60 {
						var cctx context.Context
						var cancel context.CancelFunc
						if rng.IntN(2) == 0 {
							cctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(3000))*time.Microsecond)
						} else {
							cctx, cancel = context.WithCancel(ctx)
						}
						if err := l.Extend(cctx, ttls[rng.IntN(len(ttls))]); err == nil {
							ok.Add(1)
						} else {
							failed.Add(1)
						}
						cancel()
						time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
					}
				})
			}
			wg.Go(func() {
				time.Sleep(100 * time.Millisecond)
				paused := nodes[2:]
				if round == 2 {
					paused = nodes[1:]
				}
				for _, nd := range paused {
					_ = nd.Pause()
				}
				time.Sleep(time.Duration(400+200*round) * time.Millisecond)
				for _, nd := range paused {
					_ = nd.Resume()
				}
			})
			wg.Wait()
			stopAuto()
			// Settle: requests that timed out land; nothing in flight.
			require.NoError(t, l.lockExt(ctx))
			time.Sleep(200 * time.Millisecond)
			var pttls []time.Duration
			for _, a := range admins {
				v, _ := a.Get(ctx, k).Result()
				d := a.PTTL(ctx, k).Val()
				if v != l.token || d < 0 {
					d = 0
				}
				pttls = append(pttls, d)
			}
			v := l.Validity()
			l.unlockExt()
			sort.Slice(pttls, func(i, j int) bool { return pttls[i] > pttls[j] })
			q := pttls[len(pttls)/2]
			t.Logf("%d Extends won, %d failed; Validity %v; PTTLs %v (quorum-th %v)", ok.Load(), failed.Load(), v, pttls, q)
			if v > q+5*time.Millisecond {
				t.Errorf("Validity %v promises more than a quorum holds (PTTLs %v)", v, pttls)
			}
			_ = l.Unlock(ctx)
		})
	}
}

// TestReviewWriterMarkBounds: writerMark saturates and never goes below
// minWriterMark; markFor never exceeds the mark, honours the deadline,
// keeps at least minWriterMark, and keeps 0.
func TestReviewWriterMarkBounds(t *testing.T) {
	cases := []struct{ d, nt time.Duration }{
		{1, 0}, {1, -1}, {1, math.MinInt64}, {time.Millisecond, time.Second},
		{math.MaxInt64 / 3, 0}, {math.MaxInt64 / 3, 1}, {math.MaxInt64 / 3, 2}, {math.MaxInt64/3 + 1, 0},
		{math.MaxInt64, math.MaxInt64}, {time.Hour, math.MaxInt64}, {time.Hour, math.MaxInt64 - 3*time.Hour},
		{time.Hour, math.MaxInt64 - 3*time.Hour + 1},
	}
	for _, tc := range cases {
		m := writerMark(tc.d, tc.nt)
		if m < minWriterMark {
			t.Errorf("writerMark(%d, %d) = %d: below the least", tc.d, tc.nt, m)
		}
		want := max(3*tc.d, minWriterMark)
		if tc.d <= math.MaxInt64/3 && tc.nt > 0 && tc.nt <= math.MaxInt64-want && m != want+tc.nt {
			t.Errorf("writerMark(%d, %d) = %d, want %d", tc.d, tc.nt, m, want+tc.nt)
		}
		if tc.d > 0 && m < 3*min(tc.d, math.MaxInt64/3) {
			t.Errorf("writerMark(%d, %d) = %d: shorter than 3 delays", tc.d, tc.nt, m)
		}
	}
	for range 100000 {
		d := time.Duration(rand.Int64N(math.MaxInt64-2) + 2)
		if j := jitter(d); j < d/2 || j < 0 {
			t.Fatalf("jitter(%d) = %d", d, j)
		}
	}
	if j := jitter(math.MaxInt64); j < 0 {
		t.Fatalf("jitter(max) = %d", j)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if m := markFor(ctx, 2*time.Hour); m > time.Hour || m < time.Hour-time.Minute {
		t.Errorf("markFor(1h ctx, 2h) = %v", m)
	}
	if m := markFor(ctx, 30*time.Minute); m != 30*time.Minute {
		t.Errorf("markFor(1h ctx, 30m) = %v", m)
	}
	past, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Hour))
	defer cancel2()
	if m := markFor(past, time.Hour); m != minWriterMark {
		t.Errorf("markFor(past ctx, 1h) = %v", m)
	}
	if m := markFor(ctx, 0); m != 0 {
		t.Errorf("markFor(ctx, 0) = %v", m)
	}
	if m := markFor(context.Background(), math.MaxInt64); m != math.MaxInt64 {
		t.Errorf("markFor(bg, max) = %v", m)
	}
}

// TestReviewExtendWaitsForBatchThenSerialised: with the scheduler's batch
// holding extMu (a node paused, so it waits), an Extend with a short ctx
// returns its ctx error, nothing sent, Validity unchanged; an Extend
// with a live ctx waits and runs only once the batch has ended (extMu
// free), and is not lost (no missed wake-up) when the batch ends.
func TestReviewExtendWaitsForBatchThenSerialised(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	clients := advClients(t, nodes, func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = 5*time.Second, 5*time.Second })
	c := advNew(t, clients, WithNodeTimeout(3*time.Second))
	ctx := context.Background()
	l, err := c.TryLock(ctx, t.Name(), 2*time.Second)
	require.NoError(t, err)
	require.NoError(t, nodes[1].Pause())
	require.NoError(t, nodes[2].Pause())
	resumed := false
	defer func() {
		if !resumed {
			_ = nodes[1].Resume()
			_ = nodes[2].Resume()
		}
	}()
	require.NoError(t, l.AutoExtend(ctx))
	// Wait for the batch to hold extMu.
	advEventually(t, 3*time.Second, func() bool {
		if l.extMu.TryLock() {
			l.unlockExt()
			return false
		}
		return true
	}, "the auto-extension batch never took extMu")
	before := l.Validity()
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err = l.Extend(sctx, 10*time.Second)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.LessOrEqual(t, l.Validity(), before)
	// A waiter with a live ctx.
	res := make(chan error, 1)
	var ran atomic.Bool
	go func() { res <- l.Extend(ctx, 2*time.Second); ran.Store(true) }()
	time.Sleep(100 * time.Millisecond)
	require.False(t, ran.Load(), "the Extend did not wait for the batch")
	resumed = true
	require.NoError(t, nodes[1].Resume())
	require.NoError(t, nodes[2].Resume())
	select {
	case err := <-res:
		// The lock may have been lost meanwhile (2 nodes paused for a
		// while); what matters is that the Extend came back.
		t.Logf("waiting Extend: %v; lock err %v", err, l.Err())
	case <-time.After(8 * time.Second):
		t.Fatal("an Extend waiting for the batch did not return within 8s of the nodes' resuming: lost wake-up")
	}
	_ = l.Unlock(ctx)
	if errors.Is(l.Err(), ErrReleased) {
		return
	}
}

// TestReviewMaxActiveEqualsPool: ownConnFits now admits MaxActiveConns
// == PoolSize. The leaders hold connections of a pool whose hard cap is
// its size: the client's direct users must never get ErrPoolExhausted
// (an immediate error, where an ordinary pool would make them wait),
// also while a node restarts and connections are redialed.
func TestReviewMaxActiveEqualsPool(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	clients := advClients(t, nodes, func(o *redis.Options) {
		o.PoolSize, o.MaxActiveConns, o.PoolTimeout = 4, 4, 3*time.Second
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var cycErrs atomic.Int64
	for i := range 4 {
		c := advNew(t, clients)
		for w := range 2 {
			revBusy(c, fmt.Sprintf("%s-%d-%d", t.Name(), i, w), stop, &cycErrs, &wg)
		}
	}
	var exhausted, other atomic.Int64
	var firstOther atomic.Pointer[error]
	for u := range 3 {
		wg.Go(func() {
			ctx := context.Background()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				err := clients[j%len(clients)].Set(ctx, fmt.Sprintf("%s-user-%d", t.Name(), u), j, time.Second).Err()
				switch {
				case errors.Is(err, redis.ErrPoolExhausted):
					exhausted.Add(1)
				case err != nil:
					other.Add(1)
					firstOther.CompareAndSwap(nil, &err)
				}
				time.Sleep(500 * time.Microsecond)
			}
		})
	}
	time.Sleep(800 * time.Millisecond)
	require.NoError(t, nodes[0].Kill())
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, nodes[0].Restart())
	time.Sleep(1200 * time.Millisecond)
	close(stop)
	wg.Wait()
	var fo error
	if p := firstOther.Load(); p != nil {
		fo = *p
	}
	t.Logf("direct users: %d ErrPoolExhausted, %d other errors (first %v; expected around the restart); %d cycles failed", exhausted.Load(), other.Load(), fo, cycErrs.Load())
	if exhausted.Load() > 0 {
		t.Errorf("direct users of a MaxActiveConns==PoolSize client got ErrPoolExhausted %d times", exhausted.Load())
	}
}

// TestReviewLeaderTakesAgainAfterRestart: a Client kept busy through a
// node's kill and restart: its leaders of that node take a connection
// again afterwards (a take that failed while the node was down must not
// leave the busy leader off for good).
func TestReviewLeaderTakesAgainAfterRestart(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	clients := advClients(t, nodes, func(o *redis.Options) { o.PoolSize = 8 })
	s0 := connSlotsOf(clients[0].(*redis.Client))
	c := advNew(t, clients)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var errs atomic.Int64
	for w := range 6 {
		revBusy(c, fmt.Sprintf("%s-%d", t.Name(), w), stop, &errs, &wg)
	}
	defer func() { close(stop); wg.Wait() }()
	advEventually(t, 5*time.Second, func() bool { return s0.held.Load() > 0 }, "no leader of node 0 took a connection")
	require.NoError(t, nodes[0].Kill())
	time.Sleep(400 * time.Millisecond)
	require.NoError(t, nodes[0].Restart())
	time.Sleep(300 * time.Millisecond)
	var took bool
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && !took; time.Sleep(time.Millisecond) {
		took = s0.held.Load() > 0
	}
	if !took {
		t.Errorf("node 0's busy leader never took a connection again within 5s of the restart")
	}
}

// TestReviewSlotsTableShrinks: the process-wide slot table drops the
// entries of go-redis clients that were closed and collected, and the
// shared slots of their address once the last of them went.
func TestReviewSlotsTableShrinks(t *testing.T) {
	slotsMu.Lock()
	before := len(slotsTab)
	slotsMu.Unlock()
	for range 500 {
		rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:3", PoolSize: 8})
		connSlotsOf(rc)
		_ = rc.Close()
	}
	var n int
	shared := true
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		runtime.GC()
		slotsMu.Lock()
		n = len(slotsTab)
		_, shared = slotsBy[slotsKey{addr: "127.0.0.1:3", pool: 8}]
		slotsMu.Unlock()
		if n <= before+10 && !shared {
			break
		}
	}
	if shared {
		t.Error("the shared slots of an address outlived its last client")
	}
	t.Logf("table: %d entries before, %d after", before, n)
	if n > before+10 {
		t.Errorf("slot table kept %d of 500 entries of closed, unreachable clients", n-before)
	}
}
