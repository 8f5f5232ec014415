package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

// replicatedSet starts n masters, each with one replica, and returns
// them with a client per master (reading for up to 5s: above the WAIT
// timeouts of the tests) and per replica.
func replicatedSet(t testing.TB, n int) (replicas []*redisnode.Node, masters, rclients []redis.UniversalClient) {
	t.Helper()
	ms := redistest.Nodes(t, n)
	replicas = make([]*redisnode.Node, n)
	var wg sync.WaitGroup
	for i := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replicas[i] = redistest.Replica(t, ms[i])
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return replicas, timeoutClients(t, ms, 5*time.Second), redistest.Clients(t, replicas)
}

// pauseReplica stops r (SIGSTOP): its master's WAIT gets no
// acknowledgement from it. It is resumed when the test ends.
func pauseReplica(t testing.TB, r *redisnode.Node) {
	t.Helper()
	require.NoError(t, r.Pause())
	t.Cleanup(func() { _ = r.Resume() })
}

// nodeErrs records the outcome of each node's request per op, late
// replies included, since the last reset.
type nodeErrs struct {
	mu   sync.Mutex
	errs map[string]map[int]error
}

func (o *nodeErrs) observe(e redlock.Event) {
	if e.Kind != "node" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.errs == nil {
		o.errs = map[string]map[int]error{}
	}
	if o.errs[e.Op] == nil {
		o.errs[e.Op] = map[int]error{}
	}
	o.errs[e.Op][e.Node] = e.Err
}

func (o *nodeErrs) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = nil
}

// extendedOn reports whether node i extended a lock since the last
// reset.
func (o *nodeErrs) extendedOn(i int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	err, ok := o.errs["extend"][i]
	return ok && err == nil
}

// notReplicated waits until every one of n nodes has answered op, and
// returns those whose answer was node.ErrNotReplicated.
func (o *nodeErrs) notReplicated(t testing.TB, op string, n int) []int {
	t.Helper()
	var out []int
	eventually(t, 5*time.Second, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		out = nil
		for i := range n {
			err, ok := o.errs[op][i]
			if !ok {
				return false
			}
			if errors.Is(err, node.ErrNotReplicated) {
				out = append(out, i)
			}
		}
		return true
	}, "want every node's %s reply", op)
	return out
}

// replicaOpts: a WAIT timeout that a replica that runs meets on a
// loaded machine, and a node timeout above it.
func replicaOpts(obs *nodeErrs) []redlock.Option {
	return []redlock.Option{
		redlock.WithNodeTimeout(3 * time.Second),
		redlock.WithReplicas(1, time.Second),
		redlock.WithObserver(obs.observe),
	}
}

func TestWithReplicasCountsAcknowledgedNodes(t *testing.T) {
	replicas, masters, rclients := replicatedSet(t, 3)
	obs := &nodeErrs{}
	rl := newClient(t, masters, replicaOpts(obs)...)
	ctx := context.Background()

	t.Run("every replica up", func(t *testing.T) {
		obs.reset()
		l, err := rl.TryLock(ctx, key(t), 10*time.Second)
		require.NoError(t, err)
		require.Empty(t, obs.notReplicated(t, "lock", 3))
		// WAIT returned 1 on each node before its reply: every replica
		// has the key already, with no waiting here.
		for i, rc := range rclients {
			require.Equal(t, l.Token(), get(t, rc, l.Key()), "replica %d: want the token at the grant", i)
		}
		obs.reset()
		require.NoError(t, l.Extend(ctx, 10*time.Second))
		require.Empty(t, obs.notReplicated(t, "extend", 3))
		require.NoError(t, l.Unlock(ctx))
	})

	t.Run("two replicas asked, one each", func(t *testing.T) {
		two := newClient(t, masters, redlock.WithNodeTimeout(2*time.Second), redlock.WithReplicas(2, 20*time.Millisecond), redlock.WithObserver(obs.observe))
		k := key(t)
		obs.reset()
		l, err := two.TryLock(ctx, k, 10*time.Second)
		requireNotObtained(t, l, err)
		require.ErrorIs(t, err, redlock.ErrUnreachable)
		require.Equal(t, []int{0, 1, 2}, obs.notReplicated(t, "lock", 3))
		// The lost attempt released its keys.
		eventually(t, 5*time.Second, func() bool {
			for _, c := range masters {
				if get(t, c, k) != "" {
					return false
				}
			}
			return true
		}, "want the lost attempt's keys released")
	})

	t.Run("a paused replica's node does not count", func(t *testing.T) {
		pauseReplica(t, replicas[0])
		obs.reset()
		l, err := rl.TryLock(ctx, key(t), 10*time.Second)
		require.NoError(t, err, "two nodes of three with their replicas up are a quorum")
		require.Equal(t, []int{0}, obs.notReplicated(t, "lock", 3))
		// The node's master holds the key all the same: a later
		// extension counts it once its replica acknowledges.
		require.Equal(t, l.Token(), get(t, masters[0], l.Key()))
		obs.reset()
		require.NoError(t, l.Extend(ctx, 10*time.Second))
		require.Equal(t, []int{0}, obs.notReplicated(t, "extend", 3))
		require.NoError(t, replicas[0].Resume())
		obs.reset()
		require.NoError(t, l.Extend(ctx, 10*time.Second))
		require.Empty(t, obs.notReplicated(t, "extend", 3))
		require.NoError(t, l.Unlock(ctx))
	})

	t.Run("two paused replicas: no grant, no extension", func(t *testing.T) {
		held, err := rl.TryLock(ctx, key(t), 10*time.Second)
		require.NoError(t, err)
		pauseReplica(t, replicas[1])
		pauseReplica(t, replicas[2])
		k := key(t)
		obs.reset()
		l, err := rl.TryLock(ctx, k, 10*time.Second)
		requireNotObtained(t, l, err)
		require.ErrorIs(t, err, redlock.ErrUnreachable)
		require.Equal(t, []int{1, 2}, obs.notReplicated(t, "lock", 3))

		obs.reset()
		err = held.Extend(ctx, 10*time.Second)
		require.ErrorIs(t, err, redlock.ErrNotHeld, "an extension that reached one node's replica of three")
		require.Equal(t, []int{1, 2}, obs.notReplicated(t, "extend", 3))

		require.NoError(t, replicas[1].Resume())
		require.NoError(t, replicas[2].Resume())
		eventually(t, 5*time.Second, func() bool {
			for _, c := range masters {
				if get(t, c, k) != "" {
					return false
				}
			}
			return true
		}, "want the lost attempt's keys released")
		_ = held.Unlock(ctx)
	})
}

// Auto-extension goes through the nodes' extension batches, and
// concurrent calls through pipelined batches of several rounds: one
// WAIT covers each batch, and a node whose replica is paused counts for
// none of its locks.
func TestWithReplicasBatches(t *testing.T) {
	replicas, masters, rclients := replicatedSet(t, 3)
	obs := &nodeErrs{}
	rl := newClient(t, masters, replicaOpts(obs)...)
	ctx := context.Background()
	pauseReplica(t, replicas[0])

	t.Run("concurrent grants", func(t *testing.T) {
		const n = 32
		var wg sync.WaitGroup
		locks := make([]*redlock.Lock, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { locks[i], errs[i] = rl.TryLock(ctx, key(t), 10*time.Second) })
		}
		wg.Wait()
		for i, l := range locks {
			require.NoError(t, errs[i])
			// Node 0 cannot count: nodes 1 and 2 granted, and their
			// replicas acknowledged before the grant was returned.
			for r := 1; r < 3; r++ {
				require.Equal(t, l.Token(), get(t, rclients[r], l.Key()), "replica %d of a lock won", r)
			}
		}
		for _, l := range locks {
			require.NoError(t, l.Unlock(ctx))
		}
	})

	t.Run("one node", func(t *testing.T) {
		// A Client of one node runs requests on the caller's goroutine
		// when the node is idle; those wait for the replicas too.
		one := newClient(t, masters[:1], redlock.WithNodeTimeout(2*time.Second), redlock.WithReplicas(1, 20*time.Millisecond))
		for range 3 {
			l, err := one.TryLock(ctx, key(t), 10*time.Second)
			qe := requireNotObtained(t, l, err)
			require.ErrorIs(t, qe.Nodes[0].Err, node.ErrNotReplicated)
		}
	})

	t.Run("auto-extension", func(t *testing.T) {
		const ttl = 2 * time.Second
		l := autoExtended(t, rl, ttl)
		// Two extension rounds counted on nodes 1 and 2 (node 0 cannot
		// count: its grant was not acknowledged).
		for range 2 {
			obs.reset()
			eventually(t, 3*ttl, func() bool { return obs.extendedOn(1) && obs.extendedOn(2) },
				"want nodes 1 and 2 to extend the lock")
		}
		require.NoError(t, l.Err(), "held on two nodes of three with their replicas up")

		pauseReplica(t, replicas[1])
		awaitDone(t, l, 3*ttl, "want the lock lost once a second node's replica stops acknowledging")
		require.ErrorIs(t, l.Err(), redlock.ErrLockLost)
	})
}

func TestWithReplicasCtxEndsDuringWait(t *testing.T) {
	replicas, masters, _ := replicatedSet(t, 3)
	for _, r := range replicas {
		pauseReplica(t, r)
	}
	rl := newClient(t, masters, replicaOpts(&nodeErrs{})...)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	k := key(t)
	l, err := rl.TryLock(ctx, k, 10*time.Second)
	requireNotObtained(t, l, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	for _, r := range replicas {
		require.NoError(t, r.Resume())
	}
	eventually(t, 5*time.Second, func() bool {
		for _, c := range masters {
			if get(t, c, k) != "" {
				return false
			}
		}
		return true
	}, "want the cancelled attempt's keys released")
}

func TestWithReplicasTinyTimeouts(t *testing.T) {
	_, masters, rclients := replicatedSet(t, 3)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []redlock.Option
	}{
		{"1ms WAIT", []redlock.Option{redlock.WithReplicas(1, time.Millisecond)}},
		{"1ns WAIT, rounded up to 1ms", []redlock.Option{redlock.WithReplicas(1, time.Nanosecond)}},
		{"1ms WAIT and node timeout", []redlock.Option{redlock.WithReplicas(1, time.Millisecond), redlock.WithNodeTimeout(time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl := newClient(t, masters, tc.opts...)
			for range 20 {
				k := key(t)
				l, err := rl.TryLock(ctx, k, 10*time.Second)
				if err != nil {
					// A loaded machine may miss 1ms: a clean failure,
					// never a hang or a grant the replicas lack.
					requireNotObtained(t, l, err)
					continue
				}
				// A quorum acknowledged: at least 2 replicas have it.
				n := 0
				for _, rc := range rclients {
					if get(t, rc, k) == l.Token() {
						n++
					}
				}
				require.GreaterOrEqual(t, n, 2, "want the grant on a quorum of replicas")
				require.NoError(t, l.Unlock(ctx))
			}
		})
	}
}

func TestWithReplicasRefusesBadValues(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 500 * time.Millisecond})
	defer c.Close()
	nodes := []redis.UniversalClient{c}
	for _, tc := range []struct {
		name  string
		opts  []redlock.Option
		nodes []redis.UniversalClient
	}{
		{"negative n", []redlock.Option{redlock.WithReplicas(-1, time.Second)}, nodes},
		{"zero timeout", []redlock.Option{redlock.WithReplicas(1, 0)}, nodes},
		{"negative timeout", []redlock.Option{redlock.WithReplicas(1, -time.Millisecond)}, nodes},
		{"timeout at the ReadTimeout", []redlock.Option{redlock.WithReplicas(1, 500*time.Millisecond)}, nodes},
		{"a Cluster client", []redlock.Option{redlock.WithReplicas(1, 10*time.Millisecond)},
			[]redis.UniversalClient{redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redlock.New(tc.nodes, tc.opts...)
			require.ErrorIs(t, err, redlock.ErrInvalid)
			require.Contains(t, err.Error(), "WithReplicas")
		})
	}

	t.Run("zero n is off", func(t *testing.T) {
		rl, err := redlock.New(nodes, redlock.WithReplicas(0, 0))
		require.NoError(t, err)
		require.NoError(t, rl.Close())
	})
}

// BenchmarkWithReplicas measures what WithReplicas(1, …) adds to an
// uncontended TryLock+Unlock and to an Extend on 3 local masters, each
// with one replica:
//
//	go test -run '^$' -bench BenchmarkWithReplicas -benchtime 3000x -count 5 .
func BenchmarkWithReplicas(b *testing.B) {
	_, masters, _ := replicatedSet(b, 3)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		opts []redlock.Option
	}{
		{"off", nil},
		{"WithReplicas(1,100ms)", []redlock.Option{redlock.WithReplicas(1, 100*time.Millisecond)}},
	} {
		// A generous node timeout: a stall of the shared machine should
		// not end the run.
		rl := newClient(b, masters, append(bc.opts, redlock.WithNodeTimeout(time.Second))...)
		b.Run(bc.name+"/lock+unlock", func(b *testing.B) {
			k := key(b)
			for b.Loop() {
				l, err := rl.TryLock(ctx, k, 10*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"/extend", func(b *testing.B) {
			l, err := rl.TryLock(ctx, key(b), 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := l.Extend(ctx, 10*time.Second); err != nil {
					b.Fatal(err)
				}
			}
			_ = l.Unlock(ctx)
		})
	}
}
