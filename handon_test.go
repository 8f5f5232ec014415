package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
)

// handOnTimeout: the tests count rounds, so a node that a loaded machine
// keeps from answering within the default timeout must not turn a
// hand-on into a release.
var handOnTimeout = redlock.WithNodeTimeout(3 * time.Second)

// wonRounds counts the won rounds of each op ("lock", "unlock").
type wonRounds struct {
	mu  sync.Mutex
	won map[string]int
}

func (r *wonRounds) observe(e redlock.Event) {
	if e.Kind == "round" && e.Reason == "won" {
		r.mu.Lock()
		if r.won == nil {
			r.won = make(map[string]int)
		}
		r.won[e.Op]++
		r.mu.Unlock()
	}
}

func (r *wonRounds) get(op string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.won[op]
}

// awaitLine waits until key's line in c has n calls and its front call
// waits to be handed the key.
func awaitLine(t *testing.T, c *redlock.Client, key string, n int) {
	t.Helper()
	eventually(t, 10*time.Second, func() bool {
		got, asks := redlock.LineForTest(c, key)
		return got == n && asks
	}, "%d Lock calls in the line, the front one waiting", n)
}

// TestHandOnServesLineInOneRoundEach: the Lock calls of one Client that
// wait behind a holder of that Client are each handed the key by the
// previous holder's Unlock, in one round and without a release: from
// the second holder on, only the last Unlock releases. Each holds the
// key under its own token on every node.
func TestHandOnServesLineInOneRoundEach(t *testing.T) {
	_, clients := cluster(t, 3)
	var rc wonRounds
	c := newClient(t, clients, handOnTimeout, redlock.WithObserver(rc.observe))
	k := key(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := c.Lock(ctx, k, qLease)
	require.NoError(t, err)
	const n = 6
	locks := make(chan *redlock.Lock, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			l, err := c.Lock(ctx, k, qLease)
			if err != nil {
				errs <- err
				return
			}
			locks <- l
		}()
		awaitLine(t, c, k, i+1) // in line in this order
	}
	// The first holder won with nobody behind it: it releases, and the
	// call at the front wins the key through the nodes with n-1 behind.
	require.NoError(t, first.Unlock(ctx))
	seen := map[string]bool{}
	for i := range n {
		var l *redlock.Lock
		select {
		case l = <-locks:
		case err := <-errs:
			t.Fatalf("holder %d: Lock: %v", i+2, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("holder %d: not served", i+2)
		}
		require.False(t, seen[l.Token()], "a token handed twice")
		seen[l.Token()] = true
		for j, nc := range clients {
			require.Equal(t, l.Token(), get(t, nc, k), "holder %d on node %d", i+2, j+1)
		}
		require.Greater(t, l.Validity(), qLease/2, "holder %d: the validity of a fresh lease", i+2)
		require.NoError(t, l.Unlock(ctx), "holder %d: Unlock", i+2)
	}
	require.Equal(t, 2, rc.get("unlock"), "release rounds: the first holder's and the last's")
	require.Equal(t, n+1, rc.get("lock"), "acquire rounds won: one each")
	requireIdle(t, 5*time.Second, c)
	requireNothingLeft(t, clients, k, 10*time.Second)
}

// TestHandOnOfLostLockReportsNotHeld: an Unlock that hands on a lock no
// longer held on a quorum (its keys gone) returns ErrNotHeld, as a
// release would; the waiting call gets the key, under its own token.
func TestHandOnOfLostLockReportsNotHeld(t *testing.T) {
	_, clients := cluster(t, 3)
	c := newClient(t, clients, handOnTimeout)
	k := key(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := c.Lock(ctx, k, qLease)
	require.NoError(t, err)
	got := make(chan *redlock.Lock, 2)
	for i := range 2 {
		go func() {
			l, err := c.Lock(ctx, k, qLease)
			if !assert.NoError(t, err) {
				got <- nil
				return
			}
			got <- l
		}()
		awaitLine(t, c, k, i+1)
	}
	require.NoError(t, first.Unlock(ctx))
	second := <-got
	require.NotNil(t, second)
	awaitLine(t, c, k, 1)
	for _, nc := range clients[:2] {
		require.NoError(t, nc.Del(ctx, k).Err()) // lost on two nodes of three
	}
	err = second.Unlock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, "unlock", qe.Op)
	third := <-got
	require.NotNil(t, third, "the waiting call was not handed the key")
	for j, nc := range clients {
		require.Equal(t, third.Token(), get(t, nc, k), "node %d", j+1)
	}
	require.NoError(t, third.Unlock(ctx))
	requireNothingLeft(t, clients, k, 10*time.Second)
}

// TestHandOnFallsBackToRelease: a hand-on that cannot win (another
// owner's key on two nodes of three, where the lock was lost) leaves the
// unlocking holder's key released and the waiting call attempting as
// usual: it gets the key once the other owner's keys are gone.
func TestHandOnFallsBackToRelease(t *testing.T) {
	_, clients := cluster(t, 3)
	c := newClient(t, clients, handOnTimeout)
	k := key(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := c.Lock(ctx, k, qLease)
	require.NoError(t, err)
	got := make(chan *redlock.Lock, 2)
	for i := range 2 {
		go func() {
			l, err := c.Lock(ctx, k, qLease)
			if !assert.NoError(t, err) {
				got <- nil
				return
			}
			got <- l
		}()
		awaitLine(t, c, k, i+1)
	}
	require.NoError(t, first.Unlock(ctx))
	second := <-got
	require.NotNil(t, second)
	awaitLine(t, c, k, 1)
	for _, nc := range clients[:2] {
		require.NoError(t, nc.Set(ctx, k, "another-owner", time.Minute).Err())
	}
	require.ErrorIs(t, second.Unlock(ctx), redlock.ErrNotHeld)
	eventually(t, 10*time.Second, func() bool { return get(t, clients[2], k) == "" },
		"the unlocking holder's key was not released on node 3")
	select {
	case l := <-got:
		t.Fatalf("a call was given the key while another owner holds it: %v", l)
	default:
	}
	for _, nc := range clients[:2] {
		require.NoError(t, nc.Del(ctx, k).Err())
	}
	var third *redlock.Lock
	select {
	case third = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting call was not served once the key was free")
	}
	require.NotNil(t, third)
	require.NoError(t, third.Unlock(ctx))
	requireNothingLeft(t, clients, k, 10*time.Second)
}

// TestHandOnCancelledWaiters: Lock calls of several Clients, some with
// deadlines of 0 to 20 ms, on one key: calls whose ctx ends while they
// wait to be handed the key (or while an Unlock hands it to them) never
// keep it, never hold it at the same time as another, and leave nothing
// behind. Replay with -test.seed (testSeed).
func TestHandOnCancelledWaiters(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 7))
	_, clients := cluster(t, 3)
	k := key(t)
	cs := make([]*redlock.Client, 3)
	for i := range cs {
		cs[i] = newClient(t, clients, handOnTimeout)
	}
	var sec section
	var won, cut atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for g := range 24 {
		c := cs[g%len(cs)]
		seeds := [2]uint64{rng.Uint64(), rng.Uint64()}
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seeds[0], seeds[1]))
			for range 12 {
				cctx, ccancel := ctx, context.CancelFunc(func() {})
				if r.IntN(3) == 0 {
					cctx, ccancel = context.WithTimeout(ctx, time.Duration(r.IntN(20))*time.Millisecond)
				}
				l, err := c.Lock(cctx, k, qLease)
				ccancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Lock: %v", err)
						return
					}
					cut.Add(1)
					continue
				}
				leave := sec.enter()
				won.Add(1)
				holdBriefly()
				leave()
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("Unlock: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("won %d, cut short %d", won.Load(), cut.Load())
	require.EqualValues(t, 1, sec.most.Load(), "holders inside the critical section at once")
	require.Positive(t, won.Load())
	requireIdle(t, 5*time.Second, cs...)
	requireNothingLeft(t, clients, k, 10*time.Second)
}
