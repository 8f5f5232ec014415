package node_test

// Tests of internal/node that drive a whole Client (helpers:
// client_helpers_test.go). Connection slots: the share of a shared pool
// that leaders hold.

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
)

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
	stalls := redistest.WatchStalls(t)
	base := nodeClients(t, redistest.Nodes(t, 3), func(o *redis.Options) {
		o.PoolSize, o.PoolTimeout = 4, 3*time.Second
	})
	const n = 4
	lcs := make([]*redlock.Client, n)
	node0 := make([]*redis.Client, n) // each Client's go-redis client of node 0
	for i := range lcs {
		cl := make([]redis.UniversalClient, len(base))
		for j, b := range base {
			c := b.(*redis.Client)
			if clone {
				c = c.WithTimeout(500 * time.Millisecond)
			}
			cl[j] = c
		}
		node0[i] = cl[0].(*redis.Client)
		lcs[i] = newTestClient(t, cl, redlock.WithNodeTimeout(500*time.Millisecond))
	}
	var autos []*redlock.Lock
	for i, c := range lcs {
		autos = append(autos, autoLocks(t, c, fmt.Sprintf("%s-auto-%d", t.Name(), i), 3, 400*time.Millisecond)...)
	}
	lp := newLoops(t)
	for i, c := range lcs {
		lp.cycles(c, fmt.Sprintf("%s-%d", t.Name(), i), 2)
	}
	// The slots held on node 0's shared pool, over all clones.
	maxHeld := sampleMax(lp, func() int32 {
		var sum int32
		seen := map[*node.ConnSlots]bool{}
		for _, cl := range node0 {
			if s := node.ConnSlotsOf(cl); !seen[s] {
				seen[s] = true
				sum += s.Held()
			}
		}
		return sum
	})
	stopPings := pinger(base[:1], 2*time.Millisecond)
	time.Sleep(2 * time.Second) // the span measured; not a synchronization
	pingMax, pingErr := stopPings()
	lp.stop()
	bound := node.ConnSlotsFor(base[0].(*redis.Client).Options())
	t.Logf("bound %d; leaders held up to %d connections of node 0's shared pool of 4; slowest PING %v (err %v); %d cycles failed",
		bound, maxHeld.Load(), pingMax, pingErr, lp.failed.Load())
	if maxHeld.Load() > bound {
		t.Errorf("leaders of Clients on WithTimeout clones held %d connections of one pool at once; the bound is %d", maxHeld.Load(), bound)
	}
	if pingMax > time.Second || pingErr != nil {
		t.Errorf("a direct PING on the shared client waited %v (err %v)", pingMax, pingErr)
	}
	autosHeld(t, autos, stalls, 400*time.Millisecond, 500*time.Millisecond)
	for _, l := range autos {
		_ = l.Unlock(context.Background())
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
	slots := slotsOf(clients)
	lp, lcs := busyClients(t, clients, 5, 3)
	maxHeld := sampleMax(lp, func() int32 {
		var most int32
		for _, s := range slots {
			h := s.Held()
			if h < 0 || h > s.Max() {
				t.Errorf("slots held %d, max %d", h, s.Max())
			}
			most = max(most, h)
		}
		return most
	})
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, nodes[0].Kill())
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, nodes[0].Restart())
	resume := pause(t, nodes[1])
	time.Sleep(700 * time.Millisecond) // past the 500ms read timeout
	resume()
	_ = lcs[0].Close()
	_ = lcs[1].Close()
	time.Sleep(300 * time.Millisecond)
	lp.stop()
	for _, c := range lcs {
		_ = c.Close()
	}
	t.Logf("max held %d; %d cycles failed (some expected: kill, pause, close)", maxHeld.Load(), lp.failed.Load())
	requireSlotsFree(t, slots, "after every Client closed")
	// Leaders of a new Client take again.
	c := newTestClient(t, clients)
	again := newLoops(t)
	again.cycles(c, t.Name()+"-again", 4)
	all := poll(5*time.Second, time.Millisecond, func() bool {
		for _, s := range slots {
			if s.Held() == 0 {
				return false
			}
		}
		return true
	})
	again.stop()
	require.NoError(t, c.Close())
	if !all {
		t.Errorf("a new busy Client's leaders never held a slot on every node within 5s after the churn")
	}
	requireSlotsFree(t, slots, "after the new Client closed")
}

// TestConnSlotsTakePanicGivesSlot: a take whose goroutine panics (the test
// hook, standing in for go-redis) gives its slot back; with the hook
// gone, leaders take again.
func TestConnSlotsTakePanicGivesSlot(t *testing.T) {
	clients := nodeClients(t, redistest.Nodes(t, 3), func(o *redis.Options) { o.PoolSize = 4 })
	slots := slotsOf(clients)
	var panics atomic.Int64
	node.SetTakeHook(func() { panics.Add(1); panic("test: take panics") })
	defer node.SetTakeHook(nil)
	c := newTestClient(t, clients)
	require.Empty(t, lockCycles(c, t.Name(), 4, 30))
	node.SetTakeHook(nil)
	requireSlotsFree(t, slots, "after panicking takes")
	t.Logf("%d takes panicked", panics.Load())
	// A panicking take ends its leader's connection attempts (lc.off) only
	// for that leader's life: a new leader (after node.LeaderLinger) takes.
	time.Sleep(2 * node.LeaderLinger)
	lp := newLoops(t)
	lp.cycles(c, t.Name()+"-again", 4)
	took := poll(5*time.Second, time.Millisecond, func() bool { return slots[0].Held() > 0 })
	lp.stop()
	require.True(t, took, "leaders never took a connection again after the panicking takes")
	require.Zero(t, lp.failed.Load())
}

// TestConnSlotsUserClosesSharedClient: the user closes the shared go-redis
// clients while leaders hold or take connections: every slot comes back.
func TestConnSlotsUserClosesSharedClient(t *testing.T) {
	clients := nodeClients(t, redistest.Nodes(t, 3), func(o *redis.Options) { o.PoolSize = 4 })
	slots := slotsOf(clients)
	lp, _ := busyClients(t, clients, 3, 3)
	time.Sleep(400 * time.Millisecond)
	for _, c := range clients {
		_ = c.Close()
	}
	time.Sleep(300 * time.Millisecond)
	lp.stop()
	requireSlotsFree(t, slots, "after the user closed the client")
}
