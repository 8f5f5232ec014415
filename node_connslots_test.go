package redlock

// Adversarial review of today's changes: lockExt/unlockExt (lock.go,
// batch.go), the leaders' connection slots (connslots.go, node.go) and
// the writer's mark (retry.go).

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

// keepBusy runs back-to-back TryLock+Unlock cycles on c until stop.
func keepBusy(c *Client, name string, stop <-chan struct{}, errs *atomic.Int64, wg *sync.WaitGroup) {
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

// TestConnSlotsSharedByTimeoutClones: go-redis's (*Client).WithTimeout
// returns a new *redis.Client that shares the original's connection pool
// (baseClient.clone copies connPool). The slot table is keyed by the
// *redis.Client, so Clients built on clones of one client each get a
// quarter of the same pool: their leaders together may hold all of it.
// Measures the connections the leaders hold at once against the bound
// of the shared pool, and whether a direct PING on the original client
// then waits for the pool.
func TestConnSlotsSharedByTimeoutClones(t *testing.T) {
	for _, clone := range []bool{false, true} {
		t.Run(fmt.Sprintf("clones=%v", clone), func(t *testing.T) { slotsOverClones(t, clone) })
	}
}

func slotsOverClones(t *testing.T, clone bool) {
	nodes := redistest.Nodes(t, 3)
	base := nodeClients(t, nodes, func(o *redis.Options) {
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
		lcs[i] = newTestClient(t, cl, WithNodeTimeout(500*time.Millisecond))
	}
	var autos []*Lock
	for i, c := range lcs {
		autos = append(autos, autoLocks(t, c, fmt.Sprintf("%s-auto-%d", t.Name(), i), 3, 400*time.Millisecond)...)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var cycErrs atomic.Int64
	for i, c := range lcs {
		for w := range 2 {
			keepBusy(c, fmt.Sprintf("%s-%d-%d", t.Name(), i, w), stop, &cycErrs, &wg)
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
			seen := map[*node.ConnSlots]bool{}
			for i := range n {
				if s := node.ConnSlotsOf(clones[i][0]); !seen[s] {
					seen[s] = true
					sum += s.Held()
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
	bound := node.ConnSlotsFor(base[0].(*redis.Client).Options())
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

// TestConnSlotsNoLeakAfterChurn: Clients sharing go-redis clients,
// busy, while nodes are killed and restarted, paused and resumed, and
// Clients closed mid-flight. Afterwards no slot may be held (every take
// gave its slot back), and a new Client's leaders must take connections
// again (the slots were not left taken).
func TestConnSlotsNoLeakAfterChurn(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	clients := nodeClients(t, nodes, func(o *redis.Options) { o.PoolSize, o.PoolTimeout = 8, time.Second })
	slots := make([]*node.ConnSlots, len(clients))
	for i, c := range clients {
		slots[i] = node.ConnSlotsOf(c.(*redis.Client))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var cycErrs atomic.Int64
	var lcs []*Client
	for i := range 5 {
		c := newTestClient(t, clients)
		lcs = append(lcs, c)
		for w := range 3 {
			keepBusy(c, fmt.Sprintf("%s-%d-%d", t.Name(), i, w), stop, &cycErrs, &wg)
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
				if h := s.Held(); h > maxHeld.Load() {
					maxHeld.Store(h)
				}
				if h := s.Held(); h < 0 || h > s.Max() {
					t.Errorf("slots held %d, max %d", h, s.Max())
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
		eventually(t, 5*time.Second, func() bool { return s.Held() == 0 }, "node %d: %d slots still held after every Client closed", i, s.Held())
	}
	// Leaders of a new Client take again.
	c := newTestClient(t, clients)
	stop2 := make(chan struct{})
	var seen atomic.Bool
	var wg2 sync.WaitGroup
	for w := range 4 {
		keepBusy(c, fmt.Sprintf("%s-again-%d", t.Name(), w), stop2, &cycErrs, &wg2)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && !seen.Load() {
		all := true
		for _, s := range slots {
			if s.Held() == 0 {
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
		eventually(t, 5*time.Second, func() bool { return s.Held() == 0 }, "node %d: %d slots still held", i, s.Held())
	}
}

// TestConnSlotsTakePanicGivesSlot: a take whose goroutine panics (the test
// hook, standing in for go-redis) gives its slot back; with the hook
// gone, leaders take again.
func TestConnSlotsTakePanicGivesSlot(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	clients := nodeClients(t, nodes, func(o *redis.Options) { o.PoolSize = 4 })
	var panics atomic.Int64
	hook := func() { panics.Add(1); panic("review: take panics") }
	node.SetTakeHook(hook)
	defer node.SetTakeHook(nil)
	c := newTestClient(t, clients)
	require.Empty(t, lockCycles(c, t.Name(), 4, 30))
	node.SetTakeHook(nil)
	for i, cl := range clients {
		s := node.ConnSlotsOf(cl.(*redis.Client))
		eventually(t, 5*time.Second, func() bool { return s.Held() == 0 }, "node %d: %d slots held after panicking takes", i, s.Held())
	}
	t.Logf("%d takes panicked", panics.Load())
	// A panicking take ends its leader's connection attempts (lc.off) only
	// for that leader's life: a new leader (after node.LeaderLinger) takes.
	time.Sleep(2 * node.LeaderLinger)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var errs atomic.Int64
	for w := range 4 {
		keepBusy(c, fmt.Sprintf("%s-again-%d", t.Name(), w), stop, &errs, &wg)
	}
	s0 := node.ConnSlotsOf(clients[0].(*redis.Client))
	var took bool
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && !took; time.Sleep(time.Millisecond) {
		took = s0.Held() > 0
	}
	close(stop)
	wg.Wait()
	require.True(t, took, "leaders never took a connection again after the panicking takes")
	require.Zero(t, errs.Load())
}

// TestConnSlotsUserClosesSharedClient: the user closes the shared go-redis
// clients while leaders hold or take connections: every slot comes back.
func TestConnSlotsUserClosesSharedClient(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	clients := nodeClients(t, nodes, func(o *redis.Options) { o.PoolSize = 4 })
	var slots []*node.ConnSlots
	for _, c := range clients {
		slots = append(slots, node.ConnSlotsOf(c.(*redis.Client)))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var errs atomic.Int64
	for i := range 3 {
		c := newTestClient(t, clients)
		for w := range 3 {
			keepBusy(c, fmt.Sprintf("%s-%d-%d", t.Name(), i, w), stop, &errs, &wg)
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
		eventually(t, 5*time.Second, func() bool { return s.Held() == 0 }, "node %d: %d slots held after the user closed the client", i, s.Held())
	}
}
