package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

// Tests of MultiLock (every node must agree) and of locks over several
// keys (Client and MultiLock), against real redis-server processes.

// newMultiLock is newClient for a MultiLock: testNodeTimeout unless the
// test sets its own.
func newMultiLock(t testing.TB, clients []redis.UniversalClient, opts ...redlock.Option) *redlock.MultiLock {
	t.Helper()
	m, err := redlock.NewMultiLock(clients, append([]redlock.Option{redlock.WithNodeTimeout(testNodeTimeout)}, opts...)...)
	require.NoError(t, err)
	return m
}

// values returns the values of keys on c, "" for an absent key.
func values(t testing.TB, c redis.UniversalClient, keys []string) []string {
	t.Helper()
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = get(t, c, k)
	}
	return out
}

// eventuallyValues polls c until keys have the values want ("" for
// absent): a lost attempt's releases, late replies included, finish after
// the call returns.
func eventuallyValues(t testing.TB, c redis.UniversalClient, keys, want []string, what string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		got := values(t, c, keys)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want %q, got %q", what, want, got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// repeat returns n copies of s.
func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestMultiLockSubsets walks every assignment of the states down, held by
// another token, and healthy over 5 real nodes (3^5 = 243 cases) with a
// two-key lock: MultiLock wins if and only if every node is healthy, a
// lost attempt leaves none of its keys on any node (a node holding one
// foreign key never gets the other: all or nothing), the other holder's
// key is never touched, and the reason names contention or outage.
func TestMultiLockSubsets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keysOf := func(k string) []string { return []string{k + ":a", k + ":b"} }
	everyNodeState(t, 5, func(c redis.UniversalClient, k string) {
		holdForeign(t, c, keysOf(k)[1], time.Minute)
	}, func(sc subsetCase) {
		name, keys, states, live := sc.name, keysOf(sc.key), sc.states, sc.live
		ml := newMultiLock(t, sc.clients, redlock.WithNodeTimeout(time.Second))
		l, err := ml.TryLockKeys(ctx, keys, 10*time.Second)
		if sc.healthy == 5 {
			require.NoError(t, err, name)
			require.Positive(t, l.Validity(), name)
			for i, c := range live {
				require.Equal(t, repeat(l.Token(), 2), values(t, c, keys), "%s: node %d", name, i)
			}
			require.NoError(t, l.Unlock(ctx), name)
		} else {
			qe := requireNotObtained(t, l, err, name)
			require.Equal(t, 5, qe.Quorum, name)
			require.Len(t, qe.Nodes, 5, name)
			// The round decides on the first refusal or failure.
			switch {
			case sc.down == 0:
				require.ErrorIs(t, err, redlock.ErrContended, name)
				require.NotErrorIs(t, err, redlock.ErrUnreachable, name)
			case sc.taken == 0:
				require.ErrorIs(t, err, redlock.ErrUnreachable, name)
				require.NotErrorIs(t, err, redlock.ErrContended, name)
			default:
				require.True(t, errors.Is(err, redlock.ErrContended) || errors.Is(err, redlock.ErrUnreachable), "%s: want ErrContended or ErrUnreachable, got %v", name, err)
			}
			for _, r := range qe.Nodes {
				switch states[r.Node] {
				case nodeDown:
					require.Contains(t, []string{"failed", "pending"}, r.Status, "%s: %v", name, r)
				case nodeTaken:
					require.Contains(t, []string{"taken", "pending"}, r.Status, "%s: %v", name, r)
				}
			}
		}
		for i, s := range states {
			want := []string{"", ""}
			if s == nodeTaken {
				want[1] = foreignToken
			}
			eventuallyValues(t, live[i], keys, want, fmt.Sprintf("%s: node %d", name, i))
		}
	})
}

// TestMultiLockOneNodeDown: with all 5 nodes up MultiLock wins and holds
// the key on every node; with one killed it fails, names that node, and
// leaves no key on any node; once the node is back it wins again.
func TestMultiLockOneNodeDown(t *testing.T) {
	t.Parallel()
	nodes, clients := cluster(t, 5)
	ctx := context.Background()
	ml := newMultiLock(t, clients)
	require.Equal(t, 5, ml.Quorum())
	k := key(t)

	l, err := ml.TryLock(ctx, k, 10*time.Second)
	require.NoError(t, err, "all 5 nodes up")
	for i, c := range clients {
		require.Equal(t, l.Token(), get(t, c, k), "node %d", i)
	}
	require.NoError(t, l.Unlock(ctx))
	for i, c := range clients {
		require.Empty(t, get(t, c, k), "node %d keeps the key after Unlock", i)
	}

	require.NoError(t, nodes[2].Kill())
	_, err = ml.TryLock(ctx, k, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrUnreachable)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Len(t, failedNodes(qe), 1, "%v", err)
	require.Equal(t, 2, failedNodes(qe)[0].Node)
	require.Equal(t, nodes[2].Addr(), failedNodes(qe)[0].Addr)
	for i, c := range clients {
		if i != 2 {
			eventuallyValues(t, c, []string{k}, []string{""}, fmt.Sprintf("node %d after the failed attempt", i))
		}
	}

	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = ml.Lock(cctx, k, 10*time.Second, redlock.WithRetryDelay(10*time.Millisecond))
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, context.DeadlineExceeded, "Lock retries while the node is down, until ctx ends")

	require.NoError(t, nodes[2].Restart())
	// After repeated refused dials go-redis redials once a second.
	eventually(t, 3*time.Second, func() bool { return clients[2].Ping(ctx).Err() == nil }, "node 2 did not come back")
	l, err = ml.TryLock(ctx, k, 10*time.Second)
	require.NoError(t, err, "all 5 nodes up again")
	require.NoError(t, l.Unlock(ctx))
}

// patientClients returns clients that wait 10s for a reply and ignore
// context deadlines, so that only the round's own logic can cut a wait
// short.
func patientClients(t testing.TB, nodes []*redisnode.Node) []redis.UniversalClient {
	t.Helper()
	out := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		c := redis.NewClient(&redis.Options{
			Addr: n.Addr(), ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
			MaxRetries: -1, DialerRetries: 1,
		})
		t.Cleanup(func() { _ = c.Close() })
		out[i] = c
	}
	return out
}

// TestMultiLockDecidesEarly: a node held by another token, or a failed
// node, decides the attempt at once: MultiLock does not wait for a
// stopped node, although the node timeout is 5s. The stopped node's late
// grant is released once it answers.
func TestMultiLockDecidesEarly(t *testing.T) {
	nodes := redistest.Nodes(t, 5)
	clients := patientClients(t, nodes)
	ml := newMultiLock(t, clients, redlock.WithNodeTimeout(5*time.Second))
	ctx := context.Background()
	// First contact (run_id) while every node answers.
	l, err := ml.TryLock(ctx, key(t), 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))

	for _, tc := range []struct {
		name   string
		fault  func(k string)
		reason error
		first  string
	}{
		{"taken", func(k string) { holdForeign(t, clients[0], k, time.Minute) }, redlock.ErrContended, "taken"},
		{"failed", func(string) { require.NoError(t, nodes[0].Kill()) }, redlock.ErrUnreachable, "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := key(t)
			tc.fault(k)
			require.NoError(t, nodes[4].Pause())
			start := time.Now()
			_, err := ml.TryLock(ctx, k, 10*time.Second)
			took := time.Since(start)
			require.NoError(t, nodes[4].Resume())
			require.ErrorIs(t, err, redlock.ErrNotObtained)
			require.ErrorIs(t, err, tc.reason)
			require.Less(t, took, time.Second, "want a decision on node 0's reply, not after the 5s node timeout")
			var qe *redlock.QuorumError
			require.ErrorAs(t, err, &qe)
			require.Equal(t, tc.first, qe.Nodes[0].Status, "%v", qe.Nodes[0])
			require.Equal(t, "pending", qe.Nodes[4].Status, "the stopped node was not waited for")
			for i := 1; i < 5; i++ {
				eventuallyValues(t, clients[i], []string{k}, []string{""}, fmt.Sprintf("node %d, late grants included", i))
			}
			if tc.name == "taken" {
				require.Equal(t, foreignToken, get(t, clients[0], k), "the other holder's key was touched")
			}
		})
	}
}

// TestMultiLockExtendNodeLost: once a node is lost while the lock is held,
// Extend returns ErrNotHeld and its *QuorumError names that node; the
// lock's validity is not lengthened, and Unlock still clears the others.
func TestMultiLockExtendNodeLost(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lose   func(t *testing.T, n *redisnode.Node, c redis.UniversalClient)
		status string
	}{
		{"killed", func(t *testing.T, n *redisnode.Node, _ redis.UniversalClient) { require.NoError(t, n.Kill()) }, "failed"},
		{"restarted empty", func(t *testing.T, n *redisnode.Node, c redis.UniversalClient) {
			require.NoError(t, n.Restart()) // no persistence: the key is gone
			eventually(t, 2*time.Second, func() bool { return c.Ping(context.Background()).Err() == nil }, "the node did not come back")
		}, "absent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, clients := cluster(t, 3)
			ctx := context.Background()
			ml := newMultiLock(t, clients)
			k := key(t)
			l, err := ml.TryLock(ctx, k, 10*time.Second)
			require.NoError(t, err)
			require.NoError(t, l.Extend(ctx, 10*time.Second), "all nodes up")

			tc.lose(t, nodes[1], clients[1])
			before := l.Validity()
			err = l.Extend(ctx, 20*time.Second)
			require.ErrorIs(t, err, redlock.ErrNotHeld)
			require.NotErrorIs(t, err, redlock.ErrNotObtained)
			if tc.status == "failed" {
				require.ErrorIs(t, err, redlock.ErrUnreachable)
			} else {
				require.NotErrorIs(t, err, redlock.ErrUnreachable, "a lost key is not an outage")
			}
			var qe *redlock.QuorumError
			require.ErrorAs(t, err, &qe)
			require.Equal(t, "extend", qe.Op)
			require.Equal(t, tc.status, qe.Nodes[1].Status, "%v", qe.Nodes[1])
			require.Equal(t, nodes[1].Addr(), qe.Nodes[1].Addr)
			require.Contains(t, err.Error(), fmt.Sprintf("node 2 (%s): %s", nodes[1].Addr(), tc.status))
			for _, i := range []int{0, 2} {
				require.NotEqual(t, tc.status, qe.Nodes[i].Status, "node %d was not lost", i)
			}
			require.LessOrEqual(t, l.Validity(), before, "a failed Extend never lengthens validity")

			err = l.Unlock(ctx)
			if tc.status == "absent" {
				// The lost extension put the key back on node 1 (a heal)
				// and releases it, the lock being lost: Unlock may find
				// it there or not.
				if err != nil {
					require.ErrorIs(t, err, redlock.ErrNotHeld)
				}
			} else {
				require.ErrorIs(t, err, redlock.ErrNotHeld, "Unlock needs every node too")
			}
			for _, i := range []int{0, 2} {
				eventuallyValues(t, clients[i], []string{k}, []string{""}, fmt.Sprintf("node %d after Unlock", i))
			}
		})
	}
}

// TestMultiLockLock: Lock retries while another holder has the key and
// wins once it is released; per-call options apply.
func TestMultiLockLock(t *testing.T) {
	_, clients := cluster(t, 3)
	ctx := context.Background()
	ml := newMultiLock(t, clients)
	k := key(t)
	keys := []string{k + ":a", k + ":b"}
	held, err := ml.LockKeys(ctx, keys, 10*time.Second)
	require.NoError(t, err)

	_, err = ml.Lock(ctx, keys[1], time.Second, redlock.WithMaxTries(3), redlock.WithRetryDelay(time.Millisecond))
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrContended)
	_, err = ml.LockKeys(ctx, []string{keys[0], k + ":c"}, time.Second, redlock.WithMaxTries(2), redlock.WithRetryDelay(time.Millisecond))
	require.ErrorIs(t, err, redlock.ErrContended)

	done := make(chan error, 1)
	var got *redlock.Lock
	go func() {
		var err error
		got, err = ml.Lock(ctx, keys[1], 10*time.Second, redlock.WithRetryDelay(5*time.Millisecond))
		done <- err
	}()
	require.NoError(t, held.Unlock(ctx))
	awaitNoError(t, done, 5*time.Second, "want Lock to win after Unlock, still waiting after 5s")
	require.Equal(t, keys[1], got.Key())
	require.NoError(t, got.Unlock(ctx))
}

// TestMultiLockRejects: NewMultiLock and the calls of MultiLock and the
// multi-key calls of Client apply the core's bad-input rules, name what is
// wrong, send nothing, and never panic.
func TestMultiLockRejects(t *testing.T) {
	_, clients := cluster(t, 3)
	for _, tc := range []struct {
		name  string
		nodes []redis.UniversalClient
		opts  []redlock.Option
		want  string
	}{
		{"no nodes", nil, nil, "no nodes"},
		{"nil node", []redis.UniversalClient{clients[0], nil}, nil, "node 2 is nil"},
		{"same client", []redis.UniversalClient{clients[0], clients[1], clients[0]}, nil, "nodes 1 and 3 are the same client"},
		{"drift", clients, []redlock.Option{redlock.WithDriftFactor(0.5)}, "drift factor"},
		{"nil option", clients, []redlock.Option{nil}, "nil Option"},
	} {
		t.Run("new/"+tc.name, func(t *testing.T) {
			m, err := redlock.NewMultiLock(tc.nodes, tc.opts...)
			require.Nil(t, m)
			require.ErrorIs(t, err, redlock.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}

	ml := newMultiLock(t, clients)
	c := newClient(t, clients)
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	var nilCtx context.Context
	var nilML *redlock.MultiLock
	var nilC *redlock.Client
	k := key(t)
	tok := redlock.WithToken("0123456789abcdef")
	type call func() error
	one := func(f func(context.Context, string, time.Duration, ...redlock.LockOption) (*redlock.Lock, error), ctx context.Context, key string, ttl time.Duration, opts ...redlock.LockOption) call {
		return func() error { _, err := f(ctx, key, ttl, opts...); return err }
	}
	many := func(f func(context.Context, []string, time.Duration, ...redlock.LockOption) (*redlock.Lock, error), ctx context.Context, keys []string, ttl time.Duration, opts ...redlock.LockOption) call {
		return func() error { _, err := f(ctx, keys, ttl, opts...); return err }
	}
	cases := []struct {
		name string
		call call
		want []error
		msg  string
	}{
		{"multi empty key", one(ml.TryLock, ctx, "", time.Second), []error{redlock.ErrInvalid}, "empty key"},
		{"multi empty key Lock", one(ml.Lock, ctx, "", time.Second), []error{redlock.ErrInvalid}, "empty key"},
		{"multi zero ttl", one(ml.TryLock, ctx, k, 0), []error{redlock.ErrInvalid}, "ttl must be positive, got 0s"},
		{"multi tiny ttl", one(ml.Lock, ctx, k, 2*time.Millisecond), []error{redlock.ErrInvalid}, "leaves no validity"},
		{"multi nil ctx", one(ml.TryLock, nilCtx, k, time.Second), []error{redlock.ErrInvalid}, "nil context"},
		{"multi cancelled", one(ml.TryLock, cancelled, k, time.Second), []error{redlock.ErrNotObtained, context.Canceled}, "canceled"},
		{"multi bad option", one(ml.TryLock, ctx, k, time.Second, redlock.WithNodeTimeout(-1)), []error{redlock.ErrInvalid}, "node timeout"},
		{"multi token on Lock", one(ml.Lock, ctx, k, time.Second, tok), []error{redlock.ErrInvalid}, "TryLock only"},
		{"multi nil TryLock", one(nilML.TryLock, ctx, k, time.Second), []error{redlock.ErrInvalid}, "nil *Client"},
		{"multi nil Lock", one(nilML.Lock, ctx, k, time.Second), []error{redlock.ErrInvalid}, "nil *Client"},
		{"multi nil TryLockKeys", many(nilML.TryLockKeys, ctx, []string{k}, time.Second), []error{redlock.ErrInvalid}, "nil *Client"},
		{"multi nil LockKeys", many(nilML.LockKeys, ctx, []string{k}, time.Second), []error{redlock.ErrInvalid}, "nil *Client"},
		{"client nil TryLockKeys", many(nilC.TryLockKeys, ctx, []string{k}, time.Second), []error{redlock.ErrInvalid}, "nil *Client"},
		{"client nil LockKeys", many(nilC.LockKeys, ctx, []string{k}, time.Second), []error{redlock.ErrInvalid}, "nil *Client"},
	}
	for _, f := range []struct {
		name string
		try  func(context.Context, []string, time.Duration, ...redlock.LockOption) (*redlock.Lock, error)
		lock func(context.Context, []string, time.Duration, ...redlock.LockOption) (*redlock.Lock, error)
	}{{"multi", ml.TryLockKeys, ml.LockKeys}, {"client", c.TryLockKeys, c.LockKeys}} {
		for _, fn := range []struct {
			name string
			f    func(context.Context, []string, time.Duration, ...redlock.LockOption) (*redlock.Lock, error)
		}{{"TryLockKeys", f.try}, {"LockKeys", f.lock}} {
			p := f.name + " " + fn.name + " "
			cases = append(cases, []struct {
				name string
				call call
				want []error
				msg  string
			}{
				{p + "nil keys", many(fn.f, ctx, nil, time.Second), []error{redlock.ErrInvalid}, "no keys"},
				{p + "no keys", many(fn.f, ctx, []string{}, time.Second), []error{redlock.ErrInvalid}, "no keys"},
				{p + "empty key", many(fn.f, ctx, []string{k, ""}, time.Second), []error{redlock.ErrInvalid}, "empty key at index 1"},
				{p + "duplicate", many(fn.f, ctx, []string{k, k + ":b", k}, time.Second), []error{redlock.ErrInvalid}, fmt.Sprintf("duplicate key %q at indexes 0 and 2", k)},
				{p + "zero ttl", many(fn.f, ctx, []string{k}, 0), []error{redlock.ErrInvalid}, "ttl must be positive, got 0s"},
				{p + "nil ctx", many(fn.f, nilCtx, []string{k}, time.Second), []error{redlock.ErrInvalid}, "nil context"},
				{p + "bad option", many(fn.f, ctx, []string{k}, time.Second, redlock.WithMaxTries(-1)), []error{redlock.ErrInvalid}, "max tries"},
				{p + "cancelled", many(fn.f, cancelled, []string{k}, time.Second), []error{redlock.ErrNotObtained, context.Canceled}, "canceled"},
			}...)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			for _, w := range tc.want {
				require.ErrorIs(t, err, w)
			}
			require.ErrorContains(t, err, tc.msg)
		})
	}
	for i, cl := range clients {
		require.Equal(t, []string{"", ""}, values(t, cl, []string{k, k + ":b"}), "node %d: a rejected call sent something", i)
	}
}

// foreignKeys are three keys unique to a test, of which another owner
// holds, on node n, the key at index at[n].
type foreignKeys struct {
	keys []string
	at   map[int]int
}

// holdForeignKeys makes three keys and has another owner hold, on node
// n, the key at index at[n].
func holdForeignKeys(t *testing.T, clients []redis.UniversalClient, at map[int]int) foreignKeys {
	t.Helper()
	k := key(t)
	fk := foreignKeys{keys: []string{k + ":a", k + ":b", k + ":c"}, at: map[int]int{}}
	for n, i := range at {
		fk.hold(t, clients, n, i)
	}
	return fk
}

// hold has the other owner hold keys[i] on node n too.
func (fk foreignKeys) hold(t *testing.T, clients []redis.UniversalClient, n, i int) {
	t.Helper()
	holdForeign(t, clients[n], fk.keys[i], time.Minute)
	fk.at[n] = i
}

// only returns node n's values of the keys when it holds none of ours:
// the other owner's token where it holds one, "" elsewhere.
func (fk foreignKeys) only(n int) []string {
	want := repeat("", len(fk.keys))
	if i, ok := fk.at[n]; ok {
		want[i] = foreignToken
	}
	return want
}

// requireLost checks that err is an attempt on the keys lost to the other
// owner, and that the attempt then leaves none of its keys on any node
// (what is read on node n is named "node n" and when).
func (fk foreignKeys) requireLost(t *testing.T, clients []redis.UniversalClient, err error, when string) {
	t.Helper()
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrContended)
	for n, c := range clients {
		eventuallyValues(t, c, fk.keys, fk.only(n), fmt.Sprintf("node %d%s", n, when))
	}
}

// redisCluster starts a Redis Cluster of `masters` real redis-server
// processes, splits the 16384 slots between them, and returns a client
// for it once every master reports cluster_state:ok (about two seconds).
func redisCluster(t *testing.T, masters int) *redis.ClusterClient {
	t.Helper()
	nodes := redistest.NodesWith(t, masters, redisnode.Options{Args: []string{"--cluster-enabled", "yes"}})
	plain := redistest.Clients(t, nodes)
	ctx := context.Background()
	addrs := make([]string, masters)
	for i, c := range plain {
		lo, hi := i*16384/masters, (i+1)*16384/masters-1
		require.NoError(t, c.ClusterAddSlotsRange(ctx, lo, hi).Err())
		addrs[i] = nodes[i].Addr()
		for j := 0; j < i; j++ {
			require.NoError(t, c.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(nodes[j].Port())).Err())
		}
	}
	eventually(t, 10*time.Second, func() bool {
		for _, c := range plain {
			if !strings.Contains(c.ClusterInfo(ctx).Val(), "cluster_state:ok") {
				return false
			}
		}
		return true
	}, "the cluster did not reach cluster_state:ok")
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: time.Second})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}
