package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

// waitingCall is one of the calls that wait for a lock, on a Client or
// a MultiLock, set up so that every attempt fails: hold takes what the
// call then waits for (nil: nothing to take, the nodes are down).
type waitingCall struct {
	name string
	hold func(t *testing.T, c *redlock.Client, k string)
	call func(ctx context.Context, c *redlock.Client, ml *redlock.MultiLock, k string) error
}

func holdKey(t *testing.T, c *redlock.Client, k string) {
	t.Helper()
	l, err := c.TryLock(context.Background(), k, 30*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Unlock(context.Background()) })
}

// notCalled is Do's fn: the lock is never had.
func notCalled(context.Context) error { return errors.New("fn ran without the lock") }

var waitingCalls = []waitingCall{
	{"Lock", holdKey, func(ctx context.Context, c *redlock.Client, _ *redlock.MultiLock, k string) error {
		_, err := c.Lock(ctx, k, 10*time.Second, redlock.WithRetryDelay(20*time.Millisecond))
		return err
	}},
	{"LockKeys", func(t *testing.T, c *redlock.Client, k string) { holdKey(t, c, k+":b") },
		func(ctx context.Context, c *redlock.Client, _ *redlock.MultiLock, k string) error {
			_, err := c.LockKeys(ctx, []string{k + ":a", k + ":b"}, 10*time.Second, redlock.WithRetryDelay(20*time.Millisecond))
			return err
		}},
	{"RLock", holdKey, func(ctx context.Context, c *redlock.Client, _ *redlock.MultiLock, k string) error {
		_, err := c.RLock(ctx, k, 10*time.Second, redlock.WithRetryDelay(20*time.Millisecond))
		return err
	}},
	{"LockPath", func(t *testing.T, c *redlock.Client, k string) {
		t.Helper()
		l, err := c.TryLockPath(context.Background(), "/"+k+"/a", 30*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Unlock(context.Background()) })
	}, func(ctx context.Context, c *redlock.Client, _ *redlock.MultiLock, k string) error {
		_, err := c.LockPath(ctx, "/"+k, 10*time.Second, redlock.WithRetryDelay(20*time.Millisecond))
		return err
	}},
	{"Acquire", func(t *testing.T, c *redlock.Client, k string) {
		t.Helper()
		l, err := c.TryAcquire(context.Background(), k, 1, 30*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Unlock(context.Background()) })
	}, func(ctx context.Context, c *redlock.Client, _ *redlock.MultiLock, k string) error {
		_, err := c.Acquire(ctx, k, 1, 10*time.Second, redlock.WithRetryDelay(20*time.Millisecond))
		return err
	}},
	{"Do", holdKey, func(ctx context.Context, c *redlock.Client, _ *redlock.MultiLock, k string) error {
		return c.Do(ctx, k, 10*time.Second, notCalled, redlock.WithRetryDelay(20*time.Millisecond))
	}},
	{"MultiLock.Lock", holdKey, func(ctx context.Context, _ *redlock.Client, ml *redlock.MultiLock, k string) error {
		_, err := ml.Lock(ctx, k, 10*time.Second, redlock.WithRetryDelay(20*time.Millisecond))
		return err
	}},
	{"MultiLock.LockKeys", func(t *testing.T, c *redlock.Client, k string) { holdKey(t, c, k+":b") },
		func(ctx context.Context, _ *redlock.Client, ml *redlock.MultiLock, k string) error {
			_, err := ml.LockKeys(ctx, []string{k + ":a", k + ":b"}, 10*time.Second, redlock.WithRetryDelay(20*time.Millisecond))
			return err
		}},
	{"MultiLock.Do", holdKey, func(ctx context.Context, _ *redlock.Client, ml *redlock.MultiLock, k string) error {
		return ml.Do(ctx, k, 10*time.Second, notCalled, redlock.WithRetryDelay(20*time.Millisecond))
	}},
}

// waitDeadline ends the waits of these tests: long enough for a first
// attempt to complete on a stalled machine (a round waits at most
// firstContactTimeout or the 250ms test node timeout).
const waitDeadline = 1200 * time.Millisecond

// requireWaitEndedBy checks err, from the waiting call named call on 3
// nodes, for a wait that ctx's deadline ended: it matches
// context.DeadlineExceeded, ErrNotObtained and the last attempt's reason
// (not the other one); its *QuorumError is that of a decided attempt
// (more nodes in status than the quorum leaves, every node for a
// MultiLock); and its text names the reason.
func requireWaitEndedBy(t *testing.T, call string, err, reason, other error, status redlock.NodeStatus, text string) {
	t.Helper()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, reason, "want the last attempt's reason, got %v", err)
	require.NotErrorIs(t, err, other)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	quorum := qe.Quorum
	if strings.HasPrefix(call, "MultiLock") {
		quorum = 3
	}
	require.Greater(t, count(qe, status), 3-quorum, "want a decided attempt's nodes, got %v", err)
	require.Contains(t, err.Error(), "not obtained: context deadline exceeded; last attempt: "+text)
}

// count returns how many of qe's nodes answered st.
func count(qe *redlock.QuorumError, st redlock.NodeStatus) int {
	n := 0
	for _, r := range qe.Nodes {
		if r.Status == st {
			n++
		}
	}
	return n
}

// TestWaitEndedByDeadlineSaysHeld: a wait that ctx's deadline ends on a
// held lock matches context.DeadlineExceeded, ErrNotObtained and
// ErrContended, for every call that waits; its *QuorumError is that of
// a completed attempt (enough nodes said taken to decide it).
func TestWaitEndedByDeadlineSaysHeld(t *testing.T) {
	_, clients := cluster(t, 3)
	holder := newClient(t, clients)
	c := newClient(t, clients)
	ml := newMultiLock(t, clients, redlock.WithNodeTimeout(testNodeTimeout))
	for _, wc := range waitingCalls {
		t.Run(wc.name, func(t *testing.T) {
			t.Parallel()
			k := key(t)
			wc.hold(t, holder, k)
			ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
			defer cancel()
			err := wc.call(ctx, c, ml, k)
			requireWaitEndedBy(t, wc.name, err, redlock.ErrContended, redlock.ErrUnreachable, redlock.NodeTaken, "held by another owner")
		})
	}
}

// TestWaitEndedByDeadlineSaysUnreachable: with 2 of 3 nodes killed, a
// wait that ctx's deadline ends matches context.DeadlineExceeded,
// ErrNotObtained and ErrUnreachable (not ErrContended), for every call
// that waits; its *QuorumError names the failed nodes.
func TestWaitEndedByDeadlineSaysUnreachable(t *testing.T) {
	nodes, clients := cluster(t, 3)
	c := newClient(t, clients)
	ml := newMultiLock(t, clients, redlock.WithNodeTimeout(testNodeTimeout))
	for _, nd := range nodes[1:] {
		require.NoError(t, nd.Kill())
	}
	for _, wc := range waitingCalls {
		t.Run(wc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
			defer cancel()
			err := wc.call(ctx, c, ml, key(t))
			requireWaitEndedBy(t, wc.name, err, redlock.ErrUnreachable, redlock.ErrContended, redlock.NodeFailed, "nodes unreachable (")
		})
	}
}

// pauseThenCancel pauses a node once the first acquire round is
// decided, and cancels once the next round has node 3's answer: that
// round then waits for the paused node when ctx ends.
type pauseThenCancel struct {
	mu     sync.Mutex
	paused bool
	third  int // acquire replies of node 3
	pause  func()
	cancel func()
}

func (p *pauseThenCancel) ObserveLock(redlock.LockEvent) {}

func (p *pauseThenCancel) ObserveRound(e redlock.RoundEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Op == redlock.OpLock && !p.paused {
		p.paused = true
		p.pause()
	}
}

func (p *pauseThenCancel) ObserveNode(e redlock.NodeEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Op == redlock.OpLock && e.Node == 2 {
		if p.third++; p.third == 2 {
			p.cancel()
		}
	}
}

// TestWaitCutShortKeepsLastAttempt: when ctx ends an attempt that is
// still waiting for a node, Lock's error is that of the attempt before
// it, which completed: held by another owner, with that attempt's
// answers, not the cut attempt's pending node.
func TestWaitCutShortKeepsLastAttempt(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	clients := patientClients(t, nodes)
	k := key(t)
	for _, i := range []int{0, 1} {
		holdForeign(t, clients[i], k, 30*time.Second)
	}
	ctx := context.Background()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	obs := &pauseThenCancel{pause: func() { require.NoError(t, nodes[1].Pause()) }, cancel: cancel}
	c := newClient(t, clients, redlock.WithNodeTimeout(10*time.Second), redlock.WithObserver(obs))
	t.Cleanup(func() { _ = nodes[1].Resume() }) // before c closes
	// The first attempt: nodes 1 and 2 refuse. Then node 2 is paused,
	// and the second attempt, refused by node 1 and granted by node 3,
	// waits for node 2 until ctx ends.
	_, err := c.Lock(wctx, k, 10*time.Second, redlock.WithRetryDelay(time.Millisecond), redlock.WithHandoff(false))
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrContended, "want the completed attempt's reason, got %v", err)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, redlock.NodeTaken, qe.Nodes[0].Status, "%v", err)
	require.Equal(t, redlock.NodeTaken, qe.Nodes[1].Status, "want the first attempt's answer of node 2, got %v", err)
}
