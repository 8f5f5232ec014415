package redlock

// Tests of internal/node that need a whole Client: they drive locks
// through the API and look at the node's state (its queue, its
// connection slots, its leader goroutines).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
)

// ---- The pipeline: queued requests batched in order, leaders that park and end.

// pipelineCounter counts the pipelines of more than one command that a
// client sends.
type pipelineCounter struct{ batches, cmds atomic.Int64 }

func (h *pipelineCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 1 {
			h.batches.Add(1)
			h.cmds.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}

// hammer runs workers goroutines that each lock and at once unlock n
// distinct keys, and fails the test on any error. During the run, fault
// (if not nil) is called once.
func hammer(t *testing.T, c *Client, workers, n int, fault func()) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed atomic.Int64
	var first atomic.Pointer[error]
	for w := range workers {
		wg.Go(func() {
			for i := range n {
				l, err := c.TryLock(ctx, fmt.Sprintf("%s-%d-%d", t.Name(), w, i), 10*time.Second)
				if err == nil {
					err = l.Unlock(ctx)
				}
				if err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	if fault != nil {
		fault()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		t.Fatalf("%d of %d lock+unlock cycles failed; first: %v", failed.Load(), workers*n, *p)
	}
}

// requireNoKeys waits (bounded) until every node is empty: the keys live
// 10 s, so a key left behind by a release that overtook its acquire
// outlives the wait. The wait is long because Unlock returns at a
// quorum, and the other nodes' releases (retried in the background when
// they time out on a loaded machine) may land seconds later.
func requireNoKeys(t *testing.T, clients []redis.UniversalClient) {
	t.Helper()
	deadline := time.Now().Add(8 * time.Second)
	for {
		left := 0
		for _, cl := range clients {
			n, err := cl.DBSize(context.Background()).Result()
			require.NoError(t, err)
			left += int(n)
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keys left on the nodes 8s after every Unlock returned: a release ran before its acquire", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPipelineBatchesInOrder: under concurrency, requests queued for a busy
// node go out in pipelines of several commands, and a node still runs
// each lock's release after its acquire: nothing is left behind, although
// Unlock no longer sends a second release for grants that arrive after
// it started.
func TestPipelineBatchesInOrder(t *testing.T) {
	nodes := redistest.Nodes(t, 5)
	clients := redistest.Clients(t, nodes)
	h := new(pipelineCounter)
	for _, cl := range clients {
		cl.(*redis.Client).AddHook(h)
	}
	c, err := New(clients)
	require.NoError(t, err)

	hammer(t, c, 32, 100, nil)
	requireNoKeys(t, clients)
	require.Positive(t, h.batches.Load(), "32 goroutines never produced a pipeline of more than one command")
	t.Logf("%d pipelines of %.1f commands on average", h.batches.Load(), float64(h.cmds.Load())/float64(h.batches.Load()))
}

// TestPipelineNoScriptInBatch: nodes that lose their script cache while
// batches are in flight (SCRIPT FLUSH, as after a restart) answer NOSCRIPT
// in the middle of pipelines. Requests are run again with EVAL in their
// place, or failed when a later request of the same lock already ran, so
// no acquire lands after its own release: nothing is left behind.
func TestPipelineNoScriptInBatch(t *testing.T) {
	nodes := redistest.Nodes(t, 5)
	clients := redistest.Clients(t, nodes)
	c, err := New(clients)
	require.NoError(t, err)

	lp := newLoops(t)
	var flushes atomic.Int64
	lp.run(func(int) {
		for _, cl := range clients {
			if cl.ScriptFlush(context.Background()).Err() == nil {
				flushes.Add(1)
			}
		}
		time.Sleep(time.Millisecond)
	})
	ctx := context.Background()
	var n, lost atomic.Int64
	var workers sync.WaitGroup
	for w := range 16 {
		workers.Go(func() {
			for i := range 100 {
				l, err := c.TryLock(ctx, fmt.Sprintf("%s-%d-%d", t.Name(), w, i), 10*time.Second)
				n.Add(1)
				if err != nil {
					lost.Add(1) // NOSCRIPT failures may cost a vote
					continue
				}
				_ = l.Unlock(ctx)
			}
		})
	}
	workers.Wait()
	lp.stop()
	require.Positive(t, flushes.Load())
	require.Less(t, lost.Load(), n.Load()/2, "most attempts must still win")
	requireNoKeys(t, clients)
}

// TestPipelineLeaderParksThenEnds: a node's leader serves the requests of
// back-to-back rounds without a new goroutine per request (the same
// parked goroutines before and after), and ends node.LeaderLinger after the
// last request although the client is never closed.
//
// The count is of the whole process, so the test first waits for the
// leaders of earlier tests' clients to end. A stall longer than
// node.LeaderLinger (on a loaded machine the leaders may end before the
// first look) ends the leaders between two looks, so the check is made up to 5 times and must hold once; a
// leader per request, or one that never parks, fails all 5.
func TestPipelineLeaderParksThenEnds(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	c, err := New(redistest.Clients(t, nodes))
	require.NoError(t, err)
	ctx := context.Background()
	cycle := func() {
		t.Helper()
		l, err := c.TryLock(ctx, t.Name(), 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(ctx))
	}
	// parked polls for want parked leaders for up to d.
	parked := func(want int, d time.Duration) ([]string, bool) {
		var ids []string
		for deadline := time.Now().Add(d); ; time.Sleep(time.Millisecond) {
			ids = parkedLeaders()
			if len(ids) == want {
				return ids, true
			}
			if time.Now().After(deadline) {
				return ids, false
			}
		}
	}
	ids, ok := parked(0, 5*time.Second)
	require.True(t, ok, "leaders of earlier tests still parked after 5s: %v", ids)
	var why string
	for attempt := 1; attempt <= 5; attempt++ {
		cycle()
		first, ok := parked(3, node.LeaderLinger/2)
		if !ok {
			why = fmt.Sprintf("after one cycle, %d parked leaders, want 3", len(first))
			_, _ = parked(0, 5*time.Second)
			continue
		}
		for range 20 {
			cycle()
		}
		again, ok := parked(3, node.LeaderLinger/2)
		if ok && slices.Equal(first, again) {
			why = ""
			break
		}
		why = fmt.Sprintf("want the same 3 leader goroutines after 20 cycles: %v, then %v", first, again)
		_, _ = parked(0, 5*time.Second)
	}
	require.Empty(t, why, "in 5 attempts")
	ids, ok = parked(0, 5*time.Second) // node.LeaderLinger after the last request, with no Close
	require.True(t, ok, "leaders still parked 5s after the last request: %v", ids)
}

// parkedLeaders returns the ids of the goroutines parked in a pipe
// leader's wait, sorted.
func parkedLeaders() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var ids []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "node.(*Node).park(") {
			id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestPipelineLeadersEndAfterChurn: after a while of 16 clients contending
// for 4 keys (leaders parking and woken all the time, some just as their
// linger ends), every leader ends node.LeaderLinger after its last request.
// It pins a leader whose wait timer was spent by a linger that ended at
// the instant new work came: that leader must not park for good.
func TestPipelineLeadersEndAfterChurn(t *testing.T) {
	nodes := redistest.Nodes(t, 5)
	var cs []*Client
	for range 16 {
		c, err := New(redistest.Clients(t, nodes))
		require.NoError(t, err)
		cs = append(cs, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			for ctx.Err() == nil {
				lctx, stop := context.WithTimeout(ctx, time.Second)
				l, err := c.Lock(lctx, fmt.Sprintf("%s-%d", t.Name(), rand.IntN(4)), 10*time.Second)
				stop()
				if err == nil {
					time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
					_ = l.Unlock(context.Background())
				}
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(2 * time.Second)
	for n := len(parkedLeaders()); n > 0; n = len(parkedLeaders()) {
		if time.Now().After(deadline) {
			t.Fatalf("want every leader ended %v after the load, got %d still parked", node.LeaderLinger, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---- The leader's own connection (a go-redis Tx held open by a Watch
// on a goroutine of its own): taken, given back, dropped on failure.

// gateHook holds the SET of one key (a lock's acquire) until open is
// closed, after signalling entered.
type gateHook struct {
	key     string
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); cmd.Name() == "set" && len(a) > 1 && a[1] == h.key {
			h.once.Do(func() { close(h.entered) })
			<-h.open
		}
		return next(ctx, cmd)
	}
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLeaderConnBatchAfterDrop: in one batch on the leader's own connection,
// a request that fails on the node (a permit refused for its limit)
// drops the connection; a later request of the same batch that must send
// a second command (a refused SET NX of a lock runs the acquire script)
// must send it on a live connection, not on the Tx just given back
// ("redis: client is closed"): the lock is taken by another holder, not
// a node failure.
func TestLeaderConnBatchAfterDrop(t *testing.T) {
	nodes := redistest.Nodes(t, 1)
	gate := &gateHook{key: t.Name() + "-gate", entered: make(chan struct{}), open: make(chan struct{})}
	cl := nodeClient(t, nodes[0], nil)
	cl.AddHook(gate)
	c, err := New([]redis.UniversalClient{cl}, WithNodeTimeout(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()

	// First contact, and a permit held under limit 2.
	sem := t.Name() + "-sem"
	p, err := c.TryAcquire(ctx, sem, 2, 10*time.Second)
	require.NoError(t, err)
	held := t.Name() + "-held"
	require.NoError(t, cl.Set(ctx, held, "someone-else-0123456789", 10*time.Second).Err())

	queued := func(n int) func() bool {
		return func() bool {
			return c.nodes[0].Queued() == n
		}
	}
	gateErr := make(chan error, 1)
	go func() {
		l, err := c.TryLock(ctx, gate.key, 10*time.Second)
		if err == nil {
			err = l.Unlock(ctx)
		}
		gateErr <- err
	}()
	select {
	case <-gate.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the gate's SET never went out")
	}
	semErr := make(chan error, 1)
	go func() {
		_, err := c.TryAcquire(ctx, sem, 3, 10*time.Second)
		semErr <- err
	}()
	eventually(t, 5*time.Second, queued(1), "the permit's request never queued")
	lockErr := make(chan error, 1)
	go func() {
		_, err := c.TryLock(ctx, held, 10*time.Second)
		lockErr <- err
	}()
	eventually(t, 5*time.Second, queued(2), "the lock's request never queued")
	close(gate.open)

	require.NoError(t, <-gateErr)
	err = <-semErr
	require.ErrorIs(t, err, ErrInvalid, "a permit under another limit")
	err = <-lockErr
	require.ErrorIs(t, err, ErrNotObtained)
	var qe *QuorumError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, statusTaken, qe.Nodes[0].Status, "want the key taken by its holder, got %v", qe.Nodes[0].Err)
	require.NoError(t, p.Unlock(ctx))
	require.NoError(t, c.Close())
	requireSettled(t, []redis.UniversalClient{cl})
}

// countHook counts the lock requests (SET, EVALSHA, EVAL), alone or in
// pipelines, and can panic on them while armed.
type countHook struct {
	n     atomic.Int64
	panic atomic.Bool
}

func isLockCmd(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "set", "evalsha", "eval":
		return true
	}
	return false
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isLockCmd(cmd) {
			h.n.Add(1)
			if h.panic.Load() {
				panic("countHook: armed")
			}
		}
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if isLockCmd(cmd) {
				h.n.Add(1)
				if h.panic.Load() {
					panic("countHook: armed")
				}
			}
		}
		return next(ctx, cmds)
	}
}

// TestLeaderConnMixedTraffic: under -race, on fresh RESP2 and RESP3 clients,
// goroutines lock and unlock on one Client while others use the same
// go-redis clients directly (commands, pipelines, a WATCH transaction,
// a Conn) and hooks are added to them. Every cycle succeeds, a hook
// added while leaders hold their Tx sees the leaders' requests within a
// few leaderConnAge, nothing is left on the nodes, and after Close no
// Watch goroutine is left and every connection is back in its pool.
func TestLeaderConnMixedTraffic(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			nodes := redistest.Nodes(t, 3)
			clients := nodeClients(t, nodes, func(o *redis.Options) {
				o.Protocol = proto
				o.ReadTimeout, o.WriteTimeout = 2*time.Second, 2*time.Second
			})
			for _, cl := range clients {
				cl.(*redis.Client).AddHook(redistest.SlowHandshake(5 * time.Millisecond))
			}
			c := newTestClient(t, clients, WithNodeTimeout(time.Second))
			ctx := context.Background()
			direct := newLoops(t)
			var directErr atomic.Pointer[error]
			fail := func(err error) {
				if err != nil && !errors.Is(err, redis.Nil) {
					directErr.CompareAndSwap(nil, &err)
				}
			}
			for g := range 3 {
				direct.run(func(i int) {
					cl := clients[(g+i)%len(clients)].(*redis.Client)
					k := fmt.Sprintf("direct-%d-%d", g, i)
					switch i % 4 {
					case 0:
						fail(cl.Set(ctx, k, "v", time.Second).Err())
						fail(cl.Get(ctx, k).Err())
					case 1:
						_, err := cl.Pipelined(ctx, func(p redis.Pipeliner) error {
							p.Ping(ctx)
							p.Del(ctx, k)
							return nil
						})
						fail(err)
					case 2:
						fail(cl.Watch(ctx, func(tx *redis.Tx) error {
							_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
								p.Set(ctx, k, "w", time.Second)
								return nil
							})
							return err
						}, k))
					case 3:
						cn := cl.Conn()
						fail(cn.Ping(ctx).Err())
						fail(cn.Close())
					}
				})
			}
			added := make([]*countHook, len(clients))
			for i := range added {
				added[i] = new(countHook)
			}
			direct.wg.Go(func() {
				for r := range 5 {
					for i, cl := range clients {
						if r == 0 {
							cl.(*redis.Client).AddHook(added[i])
						} else {
							cl.(*redis.Client).AddHook(redistest.SlowHandshake(5 * time.Millisecond))
						}
					}
					time.Sleep(10 * time.Millisecond) // spread over the run; not a synchronization
				}
			})
			errs := lockCycles(c, t.Name(), 8, 25)
			require.Empty(t, errs)
			// A hook added to a client reaches the leaders' requests
			// once their Tx is replaced.
			for i := range clients {
				base := added[i].n.Load()
				eventually(t, 3*time.Second, func() bool {
					require.Empty(t, lockCycles(c, t.Name()+"-late", 1, 1))
					return added[i].n.Load() > base+1
				}, "node %d: the hook added to its client never saw a lock request", i)
			}
			direct.stop()
			if p := directErr.Load(); p != nil {
				t.Fatalf("direct traffic: %v", *p)
			}
			endLoad(t, clients, clients, c)
		})
	}
}

// TestLeaderConnCloseDuringTraffic: Client.Close, and Close of one node's
// go-redis client, while goroutines lock and unlock. No call hangs,
// acquisitions after Close fail with ErrClosed, the locks granted are
// released, and no Watch goroutine or borrowed connection is left.
func TestLeaderConnCloseDuringTraffic(t *testing.T) {
	t.Run("Client.Close", func(t *testing.T) {
		_, clients, c := setup(t, 3, nil)
		ctx := context.Background()
		var wg sync.WaitGroup
		var bad atomic.Pointer[error]
		started := make(chan struct{}, 8)
		for w := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					l, err := c.TryLock(ctx, fmt.Sprintf("%s-%d-%d", t.Name(), w, i), 10*time.Second)
					if errors.Is(err, ErrClosed) {
						return
					}
					if err == nil {
						err = l.Unlock(ctx) // allowed after Close
					}
					if err != nil {
						bad.CompareAndSwap(nil, &err)
						return
					}
					if i == 3 {
						started <- struct{}{}
					}
				}
			})
		}
		for range 8 {
			<-started
		}
		start := time.Now()
		require.NoError(t, c.Close())
		require.Less(t, time.Since(start), 3*time.Second, "Close")
		wg.Wait()
		if p := bad.Load(); p != nil {
			t.Fatal(*p)
		}
		requireNoLockKeys(t, clients, t.Name())
		requireSettled(t, clients)
	})
	t.Run("go-redis Close", func(t *testing.T) {
		_, clients, c := setup(t, 5, nil)
		ctx := context.Background()
		lp := newLoops(t)
		var cycles atomic.Int64
		var bad atomic.Pointer[error]
		for w := range 8 {
			failed := false // this worker stops at its first error
			lp.run(func(i int) {
				if failed {
					time.Sleep(time.Millisecond)
					return
				}
				l, err := c.TryLock(ctx, fmt.Sprintf("%s-%d-%d", t.Name(), w, i), 10*time.Second)
				if err == nil {
					// Unlock reports the closed node; its release
					// is retried in the background.
					if uerr := l.Unlock(ctx); uerr != nil && !errors.Is(uerr, redis.ErrClosed) {
						var qe *QuorumError
						if !errors.As(uerr, &qe) {
							err = uerr
						}
					}
				}
				if err != nil {
					failed = true
					bad.CompareAndSwap(nil, &err)
					return
				}
				cycles.Add(1)
			})
		}
		eventually(t, 5*time.Second, func() bool { return cycles.Load() >= 50 }, "no traffic")
		require.NoError(t, clients[0].Close())
		n := cycles.Load()
		eventually(t, 5*time.Second, func() bool { return cycles.Load() >= n+100 }, "locks stopped after a go-redis client closed")
		lp.stop()
		if p := bad.Load(); p != nil {
			t.Fatal(*p)
		}
		endLoad(t, clients[1:], clients[1:], c)
	})
}

// TestLeaderConnSmallPool: go-redis clients with a pool of node.MinPoolForConn
// connections, or as many active ones, shared by several Clients and
// direct users. Under PoolSize the leaders each hold a connection; under
// MaxActiveConns (a hard cap: go-redis fails a request over it at once)
// they hold none (ownConnFits), so neither the locks nor the direct
// user's PINGs ever see ErrPoolExhausted. Every lock is granted, the
// pools never grow past their size, and every connection is back in its
// pool after Close.
func TestLeaderConnSmallPool(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*redis.Options)
	}{
		{"PoolSize", func(o *redis.Options) { o.PoolSize = node.MinPoolForConn; o.PoolTimeout = 2 * time.Second }},
		{"MaxActiveConns", func(o *redis.Options) {
			o.PoolSize, o.MaxActiveConns = 20, node.MinPoolForConn
			o.PoolTimeout = 2 * time.Second
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clients := nodeClients(t, redistest.Nodes(t, 3), tc.mod)
			lcs := newTestClients(t, clients, 3, WithNodeTimeout(2*time.Second))
			ctx := context.Background()
			var direct sync.WaitGroup
			var derr atomic.Pointer[error]
			direct.Go(func() {
				for i := range 100 {
					if err := clients[i%len(clients)].Ping(ctx).Err(); err != nil {
						derr.CompareAndSwap(nil, &err)
					}
				}
			})
			errs := cyclesOn(lcs, t.Name(), 3, 30)
			direct.Wait()
			for i := range errs {
				require.Empty(t, errs[i], "client %d", i)
			}
			if p := derr.Load(); p != nil {
				t.Fatal(*p)
			}
			for i, cl := range clients {
				require.LessOrEqual(t, int(cl.(*redis.Client).PoolStats().TotalConns), 20, "node %d", i)
			}
			endLoad(t, clients, clients, lcs...)
		})
	}
}

// TestLeaderConnClientKillStorm: the nodes close every client connection over
// and over (CLIENT KILL, as restarts and proxies do) while goroutines
// lock and unlock. No call takes much longer than the per-node timeout,
// most cycles succeed, and every lock granted, and every acquire that
// may have landed, is released everywhere in the end.
func TestLeaderConnClientKillStorm(t *testing.T) {
	nodes, clients, c := setup(t, 5, nil)
	ctx := context.Background()
	killer := newLoops(t)
	kills := killStorm(killer, adminClients(t, nodes))
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	var slow atomic.Pointer[time.Duration]
	for w := range 6 {
		wg.Go(func() {
			for i := range 40 {
				start := time.Now()
				l, err := c.TryLock(ctx, fmt.Sprintf("%s-%d-%d", t.Name(), w, i), 10*time.Second)
				if err == nil {
					_ = l.Unlock(ctx) // a node may fail; the release is retried
					ok.Add(1)
				} else {
					failed.Add(1)
				}
				if d := time.Since(start); d > 2*time.Second {
					slow.CompareAndSwap(nil, &d)
				}
			}
		})
	}
	wg.Wait()
	killer.stop()
	if d := slow.Load(); d != nil {
		t.Fatalf("a lock cycle took %v", *d)
	}
	t.Logf("%d kills; %d cycles granted, %d not", kills.Load(), ok.Load(), failed.Load())
	require.Greater(t, ok.Load(), 2*failed.Load(), "a connection closed under a request is resent on a live one")
	endLoad(t, clients, clients, c)
}

// TestLeaderConnRestartAndPause: a node killed and restarted while its leader
// holds a connection, then one SIGSTOPped and resumed. The lock is
// granted by the quorum within the per-node timeout, and released
// everywhere once the node answers again.
func TestLeaderConnRestartAndPause(t *testing.T) {
	nodes, clients, c := setup(t, 5, nil)
	ctx := context.Background()
	// Back-to-back: the leaders keep their connections.
	require.Empty(t, lockCycles(c, t.Name()+"-warm", 1, 20))
	require.NoError(t, nodes[0].Restart())
	k := t.Name() + "-restarted"
	l, err := c.TryLock(ctx, k, 10*time.Second)
	require.NoError(t, err)
	eventually(t, 2*time.Second, func() bool { return clients[0].Get(ctx, k).Val() == l.Token() },
		"the restarted node never got the lock")
	require.NoError(t, l.Unlock(ctx))

	resume := pause(t, nodes[1])
	cycleWithin(t, c, t.Name()+"-paused", time.Second) // four answering nodes of five
	resume()
	requireNoLockKeys(t, clients, t.Name())
	require.Empty(t, lockCycles(c, t.Name()+"-after", 1, 5))
	require.NoError(t, c.Close())
	requireSettled(t, clients)
}

// TestLeaderConnPanickingHook: a hook of one node's client panics on every
// lock request, alone or in pipelines, while goroutines lock. The other
// nodes grant every lock; once the hook stops, the node votes again; no
// connection is lost to the pool.
func TestLeaderConnPanickingHook(t *testing.T) {
	clients := nodeClients(t, redistest.Nodes(t, 5), nil)
	h := new(countHook)
	clients[0].(*redis.Client).AddHook(h)
	c := newTestClient(t, clients)
	require.Empty(t, lockCycles(c, t.Name()+"-warm", 4, 10))
	h.panic.Store(true)
	require.Empty(t, lockCycles(c, t.Name()+"-armed", 8, 20))
	h.panic.Store(false)
	waitVotesAgain(t, c, clients[0])
	endLoad(t, clients, clients, c)
}

// TestLeaderConnOnConnectFails: one node's OnConnect fails for a while, and
// its connections are closed, so that leaders must open new ones. The
// other nodes grant every lock; once OnConnect succeeds, the node votes
// again.
func TestLeaderConnOnConnectFails(t *testing.T) {
	nodes := redistest.Nodes(t, 5)
	var failing atomic.Bool
	clients := nodeClients(t, nodes, nil)
	clients[0] = nodeClient(t, nodes[0], func(o *redis.Options) {
		o.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
			if failing.Load() {
				return errors.New("OnConnect: refused")
			}
			return nil
		}
	})
	admin := nodeClient(t, nodes[0], nil)
	c := newTestClient(t, clients)
	ctx := context.Background()
	require.Empty(t, lockCycles(c, t.Name()+"-warm", 4, 10))
	failing.Store(true)
	require.NoError(t, admin.ClientKillByFilter(ctx, "TYPE", "normal").Err())
	require.Empty(t, lockCycles(c, t.Name()+"-failing", 4, 10))
	failing.Store(false)
	waitVotesAgain(t, c, clients[0])
	endLoad(t, clients, clients, c)
}

// TestLeaderConnSessionState: a connection that a leader's Tx opens itself
// (the old ones closed under it) is set up as the client's: its database
// (DB 3) and its ACL user. The locks land in DB 3 on every node, never
// in DB 0.
func TestLeaderConnSessionState(t *testing.T) {
	t.Run("DB", func(t *testing.T) {
		nodes := redistest.Nodes(t, 3)
		clients := nodeClients(t, nodes, func(o *redis.Options) { o.DB = 3 })
		db0 := nodeClients(t, nodes, nil)
		sessionState(t, clients, db0)
	})
	t.Run("ACL", func(t *testing.T) {
		nodes := redistest.NodesWith(t, 3, redisnode.Options{Args: []string{"--requirepass", "admin-pw"}})
		admins := nodeClients(t, nodes, nil)
		ctx := context.Background()
		for _, a := range admins {
			require.NoError(t, a.Do(ctx, "ACL", "SETUSER", "locker", "on", ">secret", "~*", "+@all", "-@dangerous").Err())
		}
		clients := nodeClients(t, nodes, func(o *redis.Options) { o.Username, o.Password = "locker", "secret" })
		sessionState(t, clients, admins)
	})
}

func sessionState(t *testing.T, clients, admins []redis.UniversalClient) {
	t.Helper()
	c := newTestClient(t, clients)
	ctx := context.Background()
	for round := range 5 {
		// Back to back: leaders take a Tx; then every connection but
		// the admins' is closed.
		require.Empty(t, lockCycles(c, fmt.Sprintf("%s-warm-%d", t.Name(), round), 2, 5))
		for _, a := range admins {
			require.NoError(t, a.ClientKillByFilter(ctx, "TYPE", "normal").Err())
		}
		k := key0(t)
		l, err := c.TryLock(ctx, k, 10*time.Second)
		require.NoError(t, err, "round %d", round)
		for i, cl := range clients {
			eventually(t, 2*time.Second, func() bool { return cl.Get(ctx, k).Val() == l.Token() },
				"round %d: node %d: want our token", round, i)
			if a := admins[i].(*redis.Client); a.Options().DB != cl.(*redis.Client).Options().DB {
				require.Zero(t, a.Exists(ctx, k).Val(), "round %d: node %d: the lock landed in DB 0", round, i)
			}
		}
		require.NoError(t, l.Unlock(ctx))
	}
	// KEYS is not the ACL user's; the admins see DB 0 only.
	if clients[0].(*redis.Client).Options().DB == 0 {
		requireNoLockKeys(t, admins, t.Name())
	} else {
		requireNoLockKeys(t, clients, t.Name())
	}
	require.NoError(t, c.Close())
	requireSettled(t, clients)
}

// TestLeaderConnNoReadTimeoutPaused: go-redis clients with no read timeout
// (ReadTimeout -1), and one node SIGSTOPped while its leader holds a
// connection: its request never returns while the node is stopped.
// TryLock, Unlock and Close stay bounded; once the node resumes, the
// leader ends, its Watch goroutine with it, its connection goes back to
// the pool, and the lock is released there too.
func TestLeaderConnNoReadTimeoutPaused(t *testing.T) {
	nodes, clients, c := setup(t, 5, func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = -1, -1 })
	require.Empty(t, lockCycles(c, t.Name()+"-warm", 2, 10))
	resume := pause(t, nodes[0])
	cycleWithin(t, c, t.Name()+"-paused", time.Second)
	require.Empty(t, lockCycles(c, t.Name()+"-more", 2, 5))
	start := time.Now()
	require.NoError(t, c.Close())
	require.Less(t, time.Since(start), 3*time.Second, "Close with a stalled request")
	resume()
	requireSettled(t, clients)
}

// TestLeaderConnIdleLeadersGiveBack: five Clients on the same go-redis
// clients, whose pools have node.MinPoolForConn connections and a short pool
// timeout, take turns, with the default per-node timeout; then a direct
// user of the go-redis clients. An idle leader gives its connection back
// to the pool within about leaderConnCheck (20ms, under the 100ms pool
// timeout), so every lock is granted and the
// direct user gets a connection. When parked leaders kept theirs for all
// of node.LeaderLinger, four idle Clients held all four connections, and the
// fifth Client's TryLock failed on every node (node timeout), as did the
// direct Ping (pool timeout).
func TestLeaderConnIdleLeadersGiveBack(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	clients := nodeClients(t, nodes, func(o *redis.Options) {
		o.PoolSize, o.PoolTimeout = node.MinPoolForConn, 100*time.Millisecond
	})
	ctx := context.Background()
	lcs := make([]*Client, node.MinPoolForConn+1)
	for i := range lcs {
		c, err := New(clients) // the default node timeout: 200ms for a 10s TTL
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		lcs[i] = c
	}
	for round := range 3 {
		for i, c := range lcs {
			l, err := c.TryLock(ctx, fmt.Sprintf("%s-%d-%d", t.Name(), round, i), 10*time.Second)
			require.NoError(t, err, "round %d, client %d", round, i)
			require.NoError(t, l.Unlock(ctx), "round %d, client %d", round, i)
		}
		for i, cl := range clients {
			require.NoError(t, cl.Ping(ctx).Err(), "round %d: node %d: a direct user", round, i)
		}
	}
	endLoad(t, clients, clients, lcs...)
}

// TestLeaderConnTakeDoesNotHoldRequests: taking a leader's connection runs on
// a goroutine of its own, and no request waits for it. Here every take
// is held before its Watch until the end: the lock cycles meanwhile must
// all succeed (through the pool), and none may start a second take for
// a leader whose first is pending. When a leader waited for its take, it
// waited for the scheduler (about 4ms a take under load); here it would
// wait for the gate, and every acquire would time out. Once the gate
// opens, the takes complete, the leaders use their connections, and
// after Close nothing is left: no Watch goroutine, no connection out of
// the pool.
func TestLeaderConnTakeDoesNotHoldRequests(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	gate := make(chan struct{})
	var takes atomic.Int32
	hook := func() {
		takes.Add(1)
		<-gate
	}
	node.SetTakeHook(hook)
	var opened sync.Once
	open := func() { opened.Do(func() { close(gate) }) }
	t.Cleanup(func() {
		open()
		node.SetTakeHook(nil)
	})
	clients := nodeClients(t, nodes, nil)
	c := newTestClient(t, clients)

	if errs := lockCycles(c, "gated", 4, 25); len(errs) > 0 {
		t.Fatalf("while every take is held: %d of 100 lock cycles failed; the first: %v", len(errs), errs[0])
	}
	require.Positive(t, takes.Load(), "no take was started: the test proves nothing")
	require.LessOrEqual(t, int(takes.Load()), len(nodes)*4,
		"takes started while one was pending for the same leader")

	open()
	if errs := lockCycles(c, "open", 4, 25); len(errs) > 0 {
		t.Fatalf("after the takes completed: %d of 100 lock cycles failed; the first: %v", len(errs), errs[0])
	}
	require.NoError(t, c.Close())
	requireSettled(t, clients)
}

// TestLeaderConnMaxActiveEqualsPool: ownConnFits now admits MaxActiveConns
// == PoolSize. The leaders hold connections of a pool whose hard cap is
// its size: the client's direct users must never get ErrPoolExhausted
// (an immediate error, where an ordinary pool would make them wait),
// also while a node restarts and connections are redialed.
func TestLeaderConnMaxActiveEqualsPool(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	clients := nodeClients(t, nodes, func(o *redis.Options) {
		o.PoolSize, o.MaxActiveConns, o.PoolTimeout = 4, 4, 3*time.Second
	})
	lp, _ := busyClients(t, clients, 4, 2)
	var exhausted, other atomic.Int64
	var firstOther atomic.Pointer[error]
	ctx := context.Background()
	for u := range 3 {
		lp.run(func(j int) {
			err := clients[j%len(clients)].Set(ctx, fmt.Sprintf("%s-user-%d", t.Name(), u), j, time.Second).Err()
			switch {
			case errors.Is(err, redis.ErrPoolExhausted):
				exhausted.Add(1)
			case err != nil:
				other.Add(1)
				firstOther.CompareAndSwap(nil, &err)
			}
			time.Sleep(500 * time.Microsecond)
		})
	}
	time.Sleep(800 * time.Millisecond)
	require.NoError(t, nodes[0].Kill())
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, nodes[0].Restart())
	time.Sleep(1200 * time.Millisecond)
	lp.stop()
	var fo error
	if p := firstOther.Load(); p != nil {
		fo = *p
	}
	t.Logf("direct users: %d ErrPoolExhausted, %d other errors (first %v; expected around the restart); %d cycles failed", exhausted.Load(), other.Load(), fo, lp.failed.Load())
	if exhausted.Load() > 0 {
		t.Errorf("direct users of a MaxActiveConns==PoolSize client got ErrPoolExhausted %d times", exhausted.Load())
	}
}

// TestLeaderConnTakesAgainAfterRestart: a Client kept busy through a
// node's kill and restart: its leaders of that node take a connection
// again afterwards (a take that failed while the node was down must not
// leave the busy leader off for good).
func TestLeaderConnTakesAgainAfterRestart(t *testing.T) {
	nodes, clients, c := setup(t, 3, func(o *redis.Options) { o.PoolSize = 8 })
	s0 := node.ConnSlotsOf(clients[0].(*redis.Client))
	lp := newLoops(t)
	lp.cycles(c, t.Name(), 6)
	eventually(t, 5*time.Second, func() bool { return s0.Held() > 0 }, "no leader of node 0 took a connection")
	require.NoError(t, nodes[0].Kill())
	time.Sleep(400 * time.Millisecond)
	require.NoError(t, nodes[0].Restart())
	time.Sleep(300 * time.Millisecond)
	if !poll(5*time.Second, time.Millisecond, func() bool { return s0.Held() > 0 }) {
		t.Errorf("node 0's busy leader never took a connection again within 5s of the restart")
	}
}

// ---- Connection slots: the share of a shared pool that leaders hold.

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
	lcs := make([]*Client, n)
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
		lcs[i] = newTestClient(t, cl, WithNodeTimeout(500*time.Millisecond))
	}
	var autos []*Lock
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

// ---- go-redis options, hooks and shared clients under load: unusual
// but legitimate configurations and user behaviour.

// callBound is how long any single call may take: several per-node
// timeouts, generous for a loaded 2-core machine under -race.
const callBound = 3 * time.Second

// loadRecorder collects the failures of the workload.
type loadRecorder struct {
	mu    sync.Mutex
	errs  []string
	slow  []string
	calls atomic.Int64
}

func (r *loadRecorder) timed(what string, f func() error) error {
	bound := callBound
	if what == "Lock" {
		bound += 5 * time.Second // Lock retries until its ctx (5s at most here)
	}
	r.calls.Add(1)
	start := time.Now()
	err := f()
	if d := time.Since(start); d > bound {
		r.mu.Lock()
		r.slow = append(r.slow, fmt.Sprintf("%s took %v (err %v)", what, d, err))
		r.mu.Unlock()
	}
	return err
}

func (r *loadRecorder) fail(format string, args ...any) {
	r.mu.Lock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// checkExclusion runs workers goroutines over lcs that Lock one key in
// turn, and checks that no two hold it at once.
func checkExclusion(t *testing.T, r *loadRecorder, lcs []*Client, k string, workers, n int, strict bool) {
	t.Helper()
	var holders atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			c := lcs[w%len(lcs)]
			for i := range n {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				var l *Lock
				err := r.timed("Lock", func() (err error) {
					l, err = c.Lock(ctx, k, 2*time.Second, WithRetryDelay(5*time.Millisecond))
					return err
				})
				cancel()
				if err != nil {
					if strict {
						r.fail("worker %d iter %d: Lock: %v", w, i, err)
					}
					continue
				}
				if h := holders.Add(1); h != 1 {
					r.fail("TWO HOLDERS: worker %d iter %d sees %d holders", w, i, h)
				}
				time.Sleep(200 * time.Microsecond)
				if l.Validity() <= 0 {
					r.fail("worker %d: validity ran out inside the section", w)
				}
				holders.Add(-1)
				err = r.timed("Unlock", func() error { return l.Unlock(context.Background()) })
				// A vote may have come from a node whose connections then
				// broke (TestGoRedisMaxClients): a release short of a quorum
				// for that reason is Unlock's documented ErrUnreachable.
				if err != nil && strict && !errors.Is(err, ErrUnreachable) {
					r.fail("worker %d iter %d: Unlock: %v", w, i, err)
				}
			}
		})
	}
	wg.Wait()
}

// runWorkload runs exclusion, cycles, Extends and AutoExtends over lcs.
func runWorkload(t *testing.T, lcs []*Client, prefix string, strict bool) *loadRecorder {
	t.Helper()
	stalls := redistest.WatchStalls(t)
	r := new(loadRecorder)
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Go(func() { checkExclusion(t, r, lcs, prefix+"-mx", 4, 8, strict) })
	for i, c := range lcs {
		wg.Go(func() {
			for j := range 10 {
				k := fmt.Sprintf("%s-cyc-%d-%d", prefix, i, j)
				var l *Lock
				err := r.timed("TryLock", func() (err error) { l, err = c.TryLock(ctx, k, 5*time.Second); return err })
				if err != nil {
					if strict {
						r.fail("TryLock %s: %v", k, err)
					}
					continue
				}
				for e := range 2 {
					if err := r.timed("Extend", func() error { return l.Extend(ctx, 5*time.Second) }); err != nil && strict {
						r.fail("Extend %d %s: %v", e, k, err)
					}
				}
				if err := r.timed("Unlock", func() error { return l.Unlock(ctx) }); err != nil && strict && !errors.Is(err, ErrUnreachable) {
					r.fail("Unlock %s: %v", k, err)
				}
			}
		})
		wg.Go(func() {
			k := fmt.Sprintf("%s-auto-%d", prefix, i)
			var l *Lock
			// A 1s lease, extended once while held: its extension round
			// has a quarter of the TTL to be answered, which a loaded
			// machine gives, while a node that holds requests for the
			// pool's timeout (2s) still loses it.
			err := r.timed("TryLock", func() (err error) { l, err = c.TryLock(ctx, k, time.Second); return err })
			if err != nil {
				if strict {
					r.fail("TryLock %s: %v", k, err)
				}
				return
			}
			if err := l.AutoExtend(ctx); err != nil && strict {
				r.fail("AutoExtend %s: %v", k, err)
			}
			time.Sleep(1200 * time.Millisecond)
			if err := l.Err(); err != nil && strict && !stallExcuses(t, stalls, time.Second, c.cfg.timeoutFor(time.Second)) {
				r.fail("auto-extended lock %s lost: %v", k, err)
			}
			if err := r.timed("Unlock", func() error { return l.Unlock(ctx) }); err != nil && strict {
				r.fail("Unlock %s: %v", k, err)
			}
		})
	}
	wg.Wait()
	return r
}

func (r *loadRecorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.slow) > 0 {
		t.Errorf("%d slow calls; first: %s", len(r.slow), r.slow[0])
	}
	if len(r.errs) > 0 {
		max := min(len(r.errs), 5)
		t.Errorf("%d failures of %d calls; first %d: %q", len(r.errs), r.calls.Load(), max, r.errs[:max])
	}
}

// TestGoRedisOptions: the workload on go-redis clients with unusual options,
// three Clients sharing them.
func TestGoRedisOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*redis.Options)
	}{
		{"ConnMaxLifetime1ms", func(o *redis.Options) { o.ConnMaxLifetime = time.Millisecond }},
		{"ConnMaxLifetime10ms", func(o *redis.Options) { o.ConnMaxLifetime = 10 * time.Millisecond }},
		{"ConnMaxIdleTime1ms", func(o *redis.Options) { o.ConnMaxIdleTime = time.Millisecond }},
		{"PoolFIFO", func(o *redis.Options) { o.PoolFIFO = true; o.ConnMaxIdleTime = time.Millisecond }},
		{"MinIdleConns10", func(o *redis.Options) { o.MinIdleConns = 10 }},
		{"MaxIdleConns1", func(o *redis.Options) { o.MaxIdleConns = 1 }},
		{"PoolSize4", func(o *redis.Options) { o.PoolSize = 4 }},
		{"PoolSize1", func(o *redis.Options) { o.PoolSize = 1 }},
		{"MaxActive4", func(o *redis.Options) { o.PoolSize, o.MaxActiveConns = 4, 4 }},
		{"MaxActive1", func(o *redis.Options) { o.PoolSize, o.MaxActiveConns = 1, 1 }},
		{"NoReadTimeout", func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = -1, -1 }},
		{"NoDeadlines", func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = -2, -2 }},
		{"ContextTimeout", func(o *redis.Options) { o.ContextTimeoutEnabled = true }},
		{"ContextTimeoutNoRead", func(o *redis.Options) { o.ContextTimeoutEnabled = true; o.ReadTimeout = -1 }},
		{"RESP2", func(o *redis.Options) { o.Protocol = 2 }},
		{"RESP3Unstable", func(o *redis.Options) { o.Protocol = 3; o.UnstableResp3 = true }},
		{"DisableIdentity", func(o *redis.Options) { o.DisableIdentity = true }},
		{"NoPipelinePool", func(o *redis.Options) { o.PipelinePoolSize = -1 }},
		{"PipelinePool1", func(o *redis.Options) { o.PipelinePoolSize = 1 }},
		{"Retries", func(o *redis.Options) { o.MaxRetries = 3 }},
		{"Everything", func(o *redis.Options) {
			o.PoolFIFO, o.PoolSize, o.MaxActiveConns, o.MinIdleConns, o.MaxIdleConns = true, 4, 4, 2, 1
			o.ConnMaxLifetime, o.ConnMaxIdleTime = 3*time.Millisecond, time.Millisecond
			o.ContextTimeoutEnabled, o.Protocol, o.DisableIdentity = true, 2, true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := redistest.Nodes(t, 3)
			clients := nodeClients(t, nodes, func(o *redis.Options) {
				o.PoolTimeout = 2 * time.Second
				tc.mod(o)
			})
			lcs := newTestClients(t, clients, 3, WithNodeTimeout(time.Second))
			r := runWorkload(t, lcs, t.Name(), true)
			r.check(t)
			requireNoLockKeys(t, clients, t.Name())
			for _, c := range lcs {
				start := time.Now()
				require.NoError(t, c.Close())
				require.Less(t, time.Since(start), callBound)
			}
			requireSettled(t, clients)
		})
	}
}

// failHook fails some commands: without sending them (before), or after
// they ran on the node (after), and may add latency.
type failHook struct {
	before, after atomic.Bool
	cmds          map[string]bool
	delay         atomic.Int64 // ns
	n             atomic.Int64
}

var errHookInjected = errors.New("hook: injected failure")

func (h *failHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *failHook) match(cmd redis.Cmder) bool { return h.cmds[cmd.Name()] }

func (h *failHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if d := h.delay.Load(); d > 0 {
			time.Sleep(time.Duration(d))
		}
		if h.match(cmd) {
			if h.before.Load() {
				h.n.Add(1)
				return errHookInjected
			}
			err := next(ctx, cmd)
			if h.after.Load() {
				h.n.Add(1)
				cmd.SetErr(errHookInjected)
				return errHookInjected
			}
			return err
		}
		return next(ctx, cmd)
	}
}

func (h *failHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if d := h.delay.Load(); d > 0 {
			time.Sleep(time.Duration(d))
		}
		hit := false
		for _, c := range cmds {
			hit = hit || h.match(c)
		}
		if hit && h.before.Load() {
			h.n.Add(1)
			for _, c := range cmds {
				c.SetErr(errHookInjected)
			}
			return errHookInjected
		}
		err := next(ctx, cmds)
		if hit && h.after.Load() {
			h.n.Add(1)
			for _, c := range cmds {
				if h.match(c) {
					c.SetErr(errHookInjected)
				}
			}
			return errHookInjected
		}
		return err
	}
}

// TestGoRedisHooks: hooks that fail lock commands before or after they ran,
// on a minority of nodes, or add latency; one added after the first
// lock. Exclusion holds, every call is bounded, and nothing is left.
func TestGoRedisHooks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(h *failHook)
		late  bool
	}{
		{"FailSetBefore", func(h *failHook) { h.cmds = map[string]bool{"set": true}; h.before.Store(true) }, false},
		{"FailSetAfter", func(h *failHook) { h.cmds = map[string]bool{"set": true}; h.after.Store(true) }, false},
		{"FailEvalshaAfter", func(h *failHook) { h.cmds = map[string]bool{"evalsha": true}; h.after.Store(true) }, false},
		{"FailAllAfterLate", func(h *failHook) {
			h.cmds = map[string]bool{"set": true, "evalsha": true, "eval": true}
			h.after.Store(true)
		}, true},
		{"FailUnwatch", func(h *failHook) { h.cmds = map[string]bool{"unwatch": true}; h.before.Store(true) }, false},
		{"Latency", func(h *failHook) { h.delay.Store(int64(3 * time.Millisecond)) }, false},
		{"LatencyLate", func(h *failHook) { h.delay.Store(int64(3 * time.Millisecond)) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := redistest.Nodes(t, 5)
			clients := nodeClients(t, nodes, nil)
			hooks := make([]*failHook, 2) // on nodes 0 and 1: a minority
			for i := range hooks {
				hooks[i] = &failHook{cmds: map[string]bool{}}
				tc.setup(hooks[i])
				if !tc.late {
					clients[i].(*redis.Client).AddHook(hooks[i])
				}
			}
			lcs := newTestClients(t, clients, 2, WithNodeTimeout(time.Second))
			if tc.late {
				require.Empty(t, lockCycles(lcs[0], t.Name()+"-warm", 2, 5))
				require.Empty(t, lockCycles(lcs[1], t.Name()+"-warm", 2, 5))
				for i := range hooks {
					clients[i].(*redis.Client).AddHook(hooks[i])
				}
			}
			// A release that ran but is reported failed on two nodes, with
			// a contender's partial grant on a third, fails Unlock's
			// quorum: errors are allowed where commands fail after running.
			r := runWorkload(t, lcs, t.Name(), !strings.Contains(tc.name, "After"))
			r.check(t)
			for _, h := range hooks {
				h.before.Store(false)
				h.after.Store(false)
				h.delay.Store(0)
			}
			endLoad(t, clients, clients, lcs...)
		})
	}
}

// TestGoRedisSharedClient: one go-redis client per node, shared by six
// Clients and direct users, with a small pool.
func TestGoRedisSharedClient(t *testing.T) {
	for _, ps := range []int{3, 4, 10} {
		t.Run(fmt.Sprint("PoolSize", ps), func(t *testing.T) {
			clients, lcs := sharedClients(t, ps)
			direct := newLoops(t)
			var derr atomic.Pointer[error]
			ctx := context.Background()
			for g := range 2 {
				direct.run(func(i int) {
					k := fmt.Sprintf("direct-%d-%d", g, i)
					if err := clients[(g+i)%len(clients)].Set(ctx, k, "v", time.Second).Err(); err != nil {
						derr.CompareAndSwap(nil, &err)
					}
				})
			}
			r := runWorkload(t, lcs, t.Name(), true)
			direct.stop()
			r.check(t)
			if p := derr.Load(); p != nil {
				t.Errorf("direct user: %v", *p)
			}
			endLoad(t, clients, clients, lcs...)
		})
	}
}

// TestGoRedisSharedPoolStarvation: six Clients and a direct user share one
// go-redis client per node whose pool has PoolSize connections (and a
// 2s PoolTimeout); each Client runs back-to-back lock cycles. Every
// request needs a connection for one round trip, so with a 2s pool
// timeout and a 1s per-node timeout no request should fail, and the
// direct user's PINGs should never wait anywhere near the pool timeout.
// PoolSize 3 is below node.MinPoolForConn (leaders hold no connection);
// PoolSize 4 is at it (each leader holds one).
func TestGoRedisSharedPoolStarvation(t *testing.T) {
	for _, ps := range []int{3, 4, 6} {
		t.Run(fmt.Sprint("PoolSize", ps), func(t *testing.T) {
			clients, lcs := sharedClients(t, ps)
			stopPings := pinger(clients, time.Millisecond)
			start := time.Now()
			errs := cyclesOn(lcs, t.Name(), 2, 40)
			el := time.Since(start)
			pingMax, pingErr := stopPings()
			n := 0
			var first error
			for _, e := range errs {
				n += len(e)
				if first == nil && len(e) > 0 {
					first = e[0]
				}
			}
			t.Logf("PoolSize %d: %d of %d cycles failed in %v; slowest direct PING %v", ps, n, 6*2*40, el, pingMax)
			if n > 0 {
				t.Errorf("%d cycles failed; first: %v", n, first)
			}
			if pingErr != nil {
				t.Errorf("direct PING: %v", pingErr)
			}
			if pingMax > time.Second {
				t.Errorf("a direct PING waited %v for the pool", pingMax)
			}
			endLoad(t, clients, clients, lcs...)
		})
	}
}

// TestGoRedisHeldConnPlusBatch: Clients whose leaders each hold a connection
// of a shared go-redis pool of node.MinPoolForConn (PoolSize 4, PoolTimeout
// 3s), kept busy by back-to-back lock cycles, while each Client also
// auto-extends locks that fall due together. An extension batch that
// a leader runs alone goes through the pool (execBatch: nd.c.Do, with
// context.Background) while that leader still holds its own connection:
// when every connection is held by a leader that waits for another, no
// one can go on until the pool timeout. Every auto-extended lock must
// stay held, every cycle succeed, and a direct PING never wait long.
func TestGoRedisHeldConnPlusBatch(t *testing.T) {
	for _, tc := range []struct{ pool, n int }{
		{node.MinPoolForConn - 1, 4}, // control: the leaders hold no connection
		{node.MinPoolForConn, 4},
		{node.MinPoolForConn, 6},
		{10, 10}, // go-redis's default PoolSize at GOMAXPROCS 1
	} {
		n := tc.n
		t.Run(fmt.Sprintf("PoolSize%d-%dClients", tc.pool, n), func(t *testing.T) {
			nodes := redistest.Nodes(t, 3)
			clients := nodeClients(t, nodes, func(o *redis.Options) {
				o.PoolSize, o.PoolTimeout = tc.pool, 3*time.Second
			})
			lcs := newTestClients(t, clients, n, WithNodeTimeout(500*time.Millisecond))
			stalls := redistest.WatchStalls(t)
			ctx := context.Background()
			var autos []*Lock
			for i, c := range lcs {
				autos = append(autos, autoLocks(t, c, fmt.Sprintf("%s-auto-%d", t.Name(), i), 3, 1200*time.Millisecond)...)
			}
			lp := newLoops(t)
			stopPings := pinger(clients, 2*time.Millisecond)
			var cycErr atomic.Pointer[error]
			var cycles, failed atomic.Int64
			var slowest atomic.Int64
			for i, c := range lcs {
				lp.run(func(j int) {
					start := time.Now()
					l, err := c.TryLock(ctx, fmt.Sprintf("%s-cyc-%d-%d", t.Name(), i, j), 5*time.Second)
					if err == nil {
						err = l.Unlock(ctx)
					}
					if d := int64(time.Since(start)); d > slowest.Load() {
						slowest.Store(d)
					}
					cycles.Add(1)
					if err != nil {
						failed.Add(1)
						cycErr.CompareAndSwap(nil, &err)
					}
				})
			}
			time.Sleep(1200 * time.Millisecond)
			if tc.pool == node.MinPoolForConn && n == 4 {
				dumpLeaders(t)
			}
			time.Sleep(800 * time.Millisecond)
			lp.stop()
			pingMax, pingErr := stopPings()
			lost := autosHeld(t, autos, stalls, 1200*time.Millisecond, 500*time.Millisecond)
			t.Logf("%d cycles, %d failed, slowest %v; slowest PING %v; %d of %d auto-extended locks lost",
				cycles.Load(), failed.Load(), time.Duration(slowest.Load()), pingMax, lost, len(autos))
			if p := cycErr.Load(); p != nil {
				t.Errorf("%d of %d cycles failed; first: %v", failed.Load(), cycles.Load(), *p)
			}
			if pingErr != nil {
				t.Errorf("direct PING: %v", pingErr)
			}
			if pingMax > time.Second {
				t.Errorf("a direct PING waited %v", pingMax)
			}
			for _, l := range autos {
				_ = l.Unlock(ctx)
			}
			endLoad(t, clients, clients, lcs...)
		})
	}
}

// dumpLeaders logs, with ATK_DUMP set, where the goroutines of
// redlock are: the first redlock frame, and whether they wait for a
// pool turn.
func dumpLeaders(t *testing.T) {
	if os.Getenv("ATK_DUMP") == "" {
		return
	}
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	count := map[string]int{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		lines := strings.Split(g, "\n")
		first := ""
		for _, ln := range lines {
			if strings.HasPrefix(ln, "github.com/seed543a70bd/redlock.") {
				first = ln[:strings.LastIndex(ln, "(")]
				break
			}
		}
		if first == "" {
			continue
		}
		state := lines[0][strings.Index(lines[0], "["):]
		if strings.Contains(g, "waitTurn") {
			state += " in pool waitTurn"
		}
		count[first+" "+state]++
	}
	for k, v := range count {
		t.Logf("%3d %s", v, k)
	}
}

// TestGoRedisUserClosesGoRedis: the user closes the go-redis clients (all,
// or a minority) while a Client is mid-lock and holds auto-extended
// locks. Every call returns, bounded, with nil or an error; no panic;
// auto-extended locks end (Done) when a quorum is gone; Close is
// bounded; no goroutine is left; and the nodes still reachable keep no
// key once everything was unlocked.
func TestGoRedisUserClosesGoRedis(t *testing.T) {
	for _, tc := range []struct {
		name   string
		closed int
		mod    func(*redis.Options)
	}{
		{"All", 5, nil},
		{"Minority", 2, nil},
		{"AllNoReadTimeout", 5, func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = -1, -1 }},
		{"MinorityRESP2FIFO", 2, func(o *redis.Options) { o.Protocol, o.PoolFIFO = 2, true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			nodes := redistest.Nodes(t, 5)
			admins := adminClients(t, nodes)
			clients := nodeClients(t, nodes, tc.mod)
			c := newTestClient(t, clients, WithNodeTimeout(300*time.Millisecond))
			ctx := context.Background()
			require.Empty(t, lockCycles(c, t.Name()+"-warm", 2, 10))
			autos := autoLocks(t, c, t.Name()+"-auto", 4, 1200*time.Millisecond)
			r := new(loadRecorder)
			lp := newLoops(t)
			var held sync.Map // locks still held when the workers stop
			for w := range 4 {
				lp.run(func(i int) {
					k := fmt.Sprintf("%s-w-%d-%d", t.Name(), w, i)
					var l *Lock
					err := r.timed("TryLock", func() (err error) { l, err = c.TryLock(ctx, k, 5*time.Second); return err })
					if err != nil {
						return
					}
					held.Store(l, true)
					_ = r.timed("Extend", func() error { return l.Extend(ctx, 5*time.Second) })
					if err := r.timed("Unlock", func() error { return l.Unlock(ctx) }); err == nil {
						held.Delete(l)
					}
				})
			}
			lp.wg.Go(func() { // a contended Lock: waits on pub/sub
				k := t.Name() + "-contended"
				l, err := c.TryLock(ctx, k, 5*time.Second)
				if err != nil {
					return
				}
				for range 3 {
					cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
					_ = r.timed("Lock", func() error { _, err := c.Lock(cctx, k, 5*time.Second); return err })
					cancel()
				}
				_ = r.timed("Unlock", func() error { return l.Unlock(ctx) })
			})
			time.Sleep(150 * time.Millisecond)
			for i := range tc.closed {
				require.NoError(t, clients[i].Close())
			}
			time.Sleep(1200 * time.Millisecond)
			lp.stop()
			r.check(t)
			for i, l := range autos {
				if tc.closed >= 3 {
					select {
					case <-l.Done():
					case <-time.After(2 * time.Second):
						t.Errorf("auto-extended lock %d: Done never closed with a quorum of clients closed", i)
					}
				} else if err := l.Err(); err != nil {
					t.Errorf("auto-extended lock %d lost with a minority closed: %v", i, err)
				}
				start := time.Now()
				_ = l.Unlock(ctx)
				require.Less(t, time.Since(start), callBound)
			}
			held.Range(func(k, _ any) bool { _ = k.(*Lock).Unlock(ctx); return true })
			if tc.closed < 5 {
				requireNoLockKeys(t, admins[tc.closed:], t.Name())
			}
			start := time.Now()
			require.NoError(t, c.Close())
			require.Less(t, time.Since(start), callBound)
			requireSettled(t, clients[tc.closed:])
			// The test's own goroutines: nodes' and clients' helpers.
			goroutinesBack(t, base, 30, 5*time.Second)
		})
	}
}

// TestGoRedisCloseInFlight: Close is called while TryLock, Lock (contended,
// waiting on pub/sub), Extend, Unlock and auto-extensions are in flight,
// on go-redis clients with unusual options. Every call returns, bounded;
// acquisitions after Close fail with ErrClosed; the locks still held can
// be unlocked; nothing is left on the nodes; no goroutine is left.
func TestGoRedisCloseInFlight(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*redis.Options)
	}{
		{"Default", nil},
		{"ContextTimeoutFIFO", func(o *redis.Options) { o.ContextTimeoutEnabled, o.PoolFIFO = true, true }},
		{"Lifetime1msRESP2", func(o *redis.Options) { o.ConnMaxLifetime, o.Protocol = time.Millisecond, 2 }},
		{"NoDeadlines", func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = -2, -2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := redistest.Nodes(t, 3)
			clients := nodeClients(t, nodes, tc.mod)
			c := newTestClient(t, clients, WithNodeTimeout(300*time.Millisecond))
			ctx := context.Background()
			require.Empty(t, lockCycles(c, t.Name()+"-warm", 2, 5))
			autos := autoLocks(t, c, t.Name()+"-auto", 3, 300*time.Millisecond)
			contended, err := c.TryLock(ctx, t.Name()+"-contended", 5*time.Second)
			require.NoError(t, err)
			r := new(loadRecorder)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var held []*Lock
			var closedSeen atomic.Int64
			for w := range 6 {
				wg.Go(func() {
					for i := range 40 {
						k := fmt.Sprintf("%s-w-%d-%d", t.Name(), w, i)
						var l *Lock
						err := r.timed("TryLock", func() (err error) { l, err = c.TryLock(ctx, k, 5*time.Second); return err })
						if errors.Is(err, ErrClosed) {
							closedSeen.Add(1)
							return
						}
						if err != nil {
							continue
						}
						_ = r.timed("Extend", func() error { return l.Extend(ctx, 5*time.Second) })
						if i%3 == 0 {
							mu.Lock()
							held = append(held, l)
							mu.Unlock()
							continue
						}
						_ = r.timed("Unlock", func() error { return l.Unlock(ctx) })
					}
				})
			}
			wg.Go(func() {
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				var l *Lock
				err := r.timed("Lock", func() (err error) { l, err = c.Lock(cctx, t.Name()+"-contended", 5*time.Second); return err })
				if err == nil {
					r.fail("Lock of a held key won")
					_ = l.Unlock(ctx)
				}
			})
			time.Sleep(30 * time.Millisecond)
			start := time.Now()
			require.NoError(t, c.Close())
			require.Less(t, time.Since(start), callBound, "Close")
			wg.Wait()
			r.check(t)
			_, err = c.TryLock(ctx, t.Name()+"-after", time.Second)
			require.ErrorIs(t, err, ErrClosed)
			for _, l := range append(append(held, autos...), contended) {
				start := time.Now()
				_ = l.Unlock(ctx) // may fail once a node failed; not retried after Close
				require.Less(t, time.Since(start), callBound)
			}
			requireNoLockKeys(t, clients, t.Name())
			requireSettled(t, clients)
			require.NoError(t, c.Close())
		})
	}
}

// TestGoRedisKillStormOptions: CLIENT KILL TYPE normal in a loop on every
// node while Lock contends for one key across two Clients, on go-redis
// clients with unusual options. Never two holders; every call bounded;
// nothing left.
func TestGoRedisKillStormOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*redis.Options)
	}{
		{"FIFOLifetime", func(o *redis.Options) { o.PoolFIFO, o.ConnMaxLifetime = true, 2*time.Millisecond }},
		{"ContextTimeoutRESP2", func(o *redis.Options) { o.ContextTimeoutEnabled, o.Protocol = true, 2 }},
		{"Retries", func(o *redis.Options) { o.MaxRetries = 5 }},
		{"MinIdle", func(o *redis.Options) { o.MinIdleConns, o.MaxIdleConns = 4, 4 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := redistest.Nodes(t, 5)
			clients := nodeClients(t, nodes, tc.mod)
			admins := adminClients(t, nodes)
			lcs := newTestClients(t, clients, 2, WithNodeTimeout(500*time.Millisecond))
			killer := newLoops(t)
			kills := killStorm(killer, admins)
			r := runWorkload(t, lcs, t.Name(), false)
			killer.stop()
			t.Logf("%d kills, %d calls", kills.Load(), r.calls.Load())
			r.check(t)
			endLoad(t, admins, clients, lcs...)
		})
	}
}

// TestGoRedisMaxClients: two of five nodes accept only a few connections
// (CONFIG SET maxclients) and have their connections killed, so that
// new dials are refused ("max number of clients reached"). Locks are
// granted by the other three; every call is bounded; once maxclients
// is restored the nodes vote again; nothing is left.
func TestGoRedisMaxClients(t *testing.T) {
	nodes := redistest.Nodes(t, 5)
	admins := adminClients(t, nodes)
	clients := nodeClients(t, nodes, nil)
	lcs := newTestClients(t, clients, 2, WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()
	require.Empty(t, lockCycles(lcs[0], t.Name()+"-warm", 2, 5))
	for i := range 2 {
		a := admins[i].(*redis.Client)
		require.NoError(t, a.Ping(ctx).Err())
		require.NoError(t, a.ConfigSet(ctx, "maxclients", "2").Err())
		require.NoError(t, a.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Err())
	}
	r := runWorkload(t, lcs, t.Name(), true)
	r.check(t)
	for i := range 2 {
		require.NoError(t, admins[i].ConfigSet(ctx, "maxclients", "10000").Err())
	}
	waitVotesAgain(t, lcs[0], clients[0])
	waitVotesAgain(t, lcs[1], clients[1])
	endLoad(t, admins, clients, lcs...)
}

// countLimiter rejects every fifth command, and reports each outcome.
type countLimiter struct{ n atomic.Int64 }

var errLimited = errors.New("limiter: rejected")

func (l *countLimiter) Allow() error {
	if l.n.Add(1)%5 == 0 {
		return errLimited
	}
	return nil
}

func (l *countLimiter) ReportResult(error) {}

// TestGoRedisLimiter: go-redis clients with a Limiter (circuit breaker) that
// rejects some commands, on every node. Calls may fail; none hangs, no
// two holders, nothing left.
func TestGoRedisLimiter(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	admins := adminClients(t, nodes)
	clients := nodeClients(t, nodes, func(o *redis.Options) { o.Limiter = new(countLimiter) })
	lcs := newTestClients(t, clients, 2, WithNodeTimeout(500*time.Millisecond))
	r := runWorkload(t, lcs, t.Name(), false)
	r.check(t)
	endLoad(t, admins, clients, lcs...)
}
