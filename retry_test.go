package redlock_test

import (
	"context"
	"errors"
	"slices"
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

// holding returns a hold that takes a lock with take, on a key derived
// from the test's k, and releases it when the test ends.
func holding(take func(ctx context.Context, c *redlock.Client, k string) (*redlock.Lock, error)) func(t *testing.T, c *redlock.Client, k string) {
	return func(t *testing.T, c *redlock.Client, k string) {
		t.Helper()
		l, err := take(context.Background(), c, k)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Unlock(context.Background()) })
	}
}

var (
	// holdKey holds the key that the single-key calls wait for.
	holdKey = holding(func(ctx context.Context, c *redlock.Client, k string) (*redlock.Lock, error) {
		return c.TryLock(ctx, k, 30*time.Second)
	})
	// holdSecondKey holds the second of the keys that the LockKeys calls
	// wait for.
	holdSecondKey = holding(func(ctx context.Context, c *redlock.Client, k string) (*redlock.Lock, error) {
		return c.TryLock(ctx, k+":b", 30*time.Second)
	})
)

// notCalled is Do's fn: the lock is never had.
func notCalled(context.Context) error { return errors.New("fn ran without the lock") }

// retryOften makes a waiting call try many times before waitDeadline.
var retryOften = redlock.WithRetryDelay(20 * time.Millisecond)

// waiter is what Client and MultiLock share of the calls that wait.
type waiter interface {
	Lock(ctx context.Context, key string, ttl time.Duration, opts ...redlock.LockOption) (*redlock.Lock, error)
	LockKeys(ctx context.Context, keys []string, ttl time.Duration, opts ...redlock.LockOption) (*redlock.Lock, error)
	Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) error, opts ...redlock.LockOption) error
}

// sharedWaitingCalls are Lock, LockKeys and Do on the waiter that on
// picks, their names prefixed with prefix.
func sharedWaitingCalls(prefix string, on func(*redlock.Client, *redlock.MultiLock) waiter) []waitingCall {
	return []waitingCall{
		{prefix + "Lock", holdKey, func(ctx context.Context, c *redlock.Client, ml *redlock.MultiLock, k string) error {
			_, err := on(c, ml).Lock(ctx, k, 10*time.Second, retryOften)
			return err
		}},
		{prefix + "LockKeys", holdSecondKey, func(ctx context.Context, c *redlock.Client, ml *redlock.MultiLock, k string) error {
			_, err := on(c, ml).LockKeys(ctx, []string{k + ":a", k + ":b"}, 10*time.Second, retryOften)
			return err
		}},
		{prefix + "Do", holdKey, func(ctx context.Context, c *redlock.Client, ml *redlock.MultiLock, k string) error {
			return on(c, ml).Do(ctx, k, 10*time.Second, notCalled, retryOften)
		}},
	}
}

var waitingCalls = slices.Concat(
	sharedWaitingCalls("", func(c *redlock.Client, _ *redlock.MultiLock) waiter { return c }),
	sharedWaitingCalls("MultiLock.", func(_ *redlock.Client, ml *redlock.MultiLock) waiter { return ml }),
	[]waitingCall{
		{"RLock", holdKey, func(ctx context.Context, c *redlock.Client, _ *redlock.MultiLock, k string) error {
			_, err := c.RLock(ctx, k, 10*time.Second, retryOften)
			return err
		}},
		{"LockPath", holding(func(ctx context.Context, c *redlock.Client, k string) (*redlock.Lock, error) {
			return c.TryLockPath(ctx, "/"+k+"/a", 30*time.Second)
		}), func(ctx context.Context, c *redlock.Client, _ *redlock.MultiLock, k string) error {
			_, err := c.LockPath(ctx, "/"+k, 10*time.Second, retryOften)
			return err
		}},
		{"Acquire", holding(func(ctx context.Context, c *redlock.Client, k string) (*redlock.Lock, error) {
			return c.TryAcquire(ctx, k, 1, 30*time.Second)
		}), func(ctx context.Context, c *redlock.Client, _ *redlock.MultiLock, k string) error {
			_, err := c.Acquire(ctx, k, 1, 10*time.Second, retryOften)
			return err
		}},
	},
)

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
func requireWaitEndedBy(t *testing.T, call string, err, reason, other error, status string, text string) {
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
func count(qe *redlock.QuorumError, st string) int {
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
			requireWaitEndedBy(t, wc.name, err, redlock.ErrContended, redlock.ErrUnreachable, "taken", "held by another owner")
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
			requireWaitEndedBy(t, wc.name, err, redlock.ErrUnreachable, redlock.ErrContended, "failed", "nodes unreachable (")
		})
	}
}

// pauseThenCancel pauses a node once the first acquire round is
// decided, and cancels once a round that started after the pause has
// node 3's answer: that round then waits for the paused node when ctx
// ends. A late answer of node 3 to the first round (decided by the two
// refusals before it came) does not count: cancelling then would leave
// the next round to end at its own timeout, with the paused node failed.
type pauseThenCancel struct {
	mu       sync.Mutex
	pausedAt time.Time
	pause    func()
	cancel   func()
}

func (p *pauseThenCancel) ObserveLock(redlock.Event) {}

func (p *pauseThenCancel) ObserveRound(e redlock.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Op == "lock" && p.pausedAt.IsZero() {
		p.pause()
		p.pausedAt = time.Now()
	}
}

func (p *pauseThenCancel) ObserveNode(e redlock.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The round's start is before its request, so before the reply less
	// its latency.
	if e.Op == "lock" && e.Node == 2 && !p.pausedAt.IsZero() && time.Now().Add(-e.Latency).After(p.pausedAt) {
		p.cancel()
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
	c := newClient(t, clients, redlock.WithNodeTimeout(10*time.Second), redlock.WithObserver(observeWith(obs)))
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
	require.Equal(t, "taken", qe.Nodes[0].Status, "%v", err)
	require.Equal(t, "taken", qe.Nodes[1].Status, "want the first attempt's answer of node 2, got %v", err)
}
