package node_test

// Tests of internal/node that drive a whole Client (helpers:
// client_helpers_test.go). The leader's own connection (a go-redis Tx
// held open by a Watch on a goroutine of its own): taken, given back,
// dropped on failure.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
)

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
			c := newTestClient(t, clients, redlock.WithNodeTimeout(time.Second))
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
					if errors.Is(err, redlock.ErrClosed) {
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
						var qe *redlock.QuorumError
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
			lcs := newTestClients(t, clients, 3, redlock.WithNodeTimeout(2*time.Second))
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
	lcs := make([]*redlock.Client, node.MinPoolForConn+1)
	for i := range lcs {
		c, err := redlock.New(clients) // the default node timeout: 200ms for a 10s TTL
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
