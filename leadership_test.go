package redlock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/wire"
	"github.com/stretchr/testify/require"
)

// TestElectionConcurrentResignAndProclaim pins concurrency on one
// handle: Resigns and Proclaims at once never panic, every Resign
// returns nil, each Proclaim succeeds or says ErrNotHeld, and nothing of
// the leadership is left on the nodes.
func TestElectionConcurrentResignAndProclaim(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	for range 5 {
		name := key(t)
		lead, err := rl.Election(name).Campaign(ctx, "v0", 10*time.Second)
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for i := range 10 {
			wg.Add(2)
			go func() { defer wg.Done(); errs <- lead.Resign(ctx) }()
			go func() {
				defer wg.Done()
				if err := lead.Proclaim(ctx, fmt.Sprint("v", i+1)); err != nil && !errors.Is(err, redlock.ErrNotHeld) {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		// Resign returns at a quorum; the last node's release may still
		// be on its way.
		for i, c := range clients {
			eventually(t, 5*time.Second, func() bool { return get(t, c, redlock.KeyName("election", name)) == "" },
				"node %d: want nothing left after Resign", i+1)
		}
	}
}

// TestResignAfterLossSaysNotHeld pins Resign on a lost leadership: an
// error matching ErrNotHeld, every time; Done and Err said so first.
func TestResignAfterLossSaysNotHeld(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	name := key(t)
	lead, err := rl.Election(name).Campaign(ctx, "v", 400*time.Millisecond)
	require.NoError(t, err)
	spoilUntilLost(t, lead.Lock(), 200*time.Millisecond, 10*time.Second, func() {
		for _, c := range clients {
			require.NoError(t, c.Del(ctx, redlock.KeyName("election", name)).Err())
		}
	})
	require.ErrorIs(t, lead.Lock().Err(), redlock.ErrLockLost)
	require.LessOrEqual(t, lead.Lock().Validity(), time.Duration(0))
	require.ErrorIs(t, lead.Resign(ctx), redlock.ErrNotHeld)
	require.ErrorIs(t, lead.Resign(ctx), redlock.ErrNotHeld, "want the same answer again")
	require.ErrorIs(t, lead.Proclaim(ctx, "w"), redlock.ErrNotHeld)
}

// TestProclaimDuringExtensions: Proclaims while the leadership's
// auto-extension runs (a short TTL, so extensions fall due every few
// tens of milliseconds) race with nothing (-race) and each one that
// succeeds is what Leader then reports.
func TestProclaimDuringExtensions(t *testing.T) {
	_, rl := threeNodes(t, redlock.WithNodeTimeout(20*time.Millisecond))
	ctx := context.Background()
	lead, err := rl.Election(key(t)).Campaign(ctx, "v0", 100*time.Millisecond)
	require.NoError(t, err)
	defer func() { _ = lead.Resign(ctx) }()
	for i := range 60 {
		v := fmt.Sprint("v", i+1)
		err := lead.Proclaim(ctx, v)
		select {
		case <-lead.Lock().Done():
			return // lost to a stalled machine: what ran raced with nothing
		default:
		}
		require.NoError(t, err)
		require.Equal(t, v, lead.Value())
		time.Sleep(5 * time.Millisecond) // spread the Proclaims over several extensions
	}
}

// TestLeaderIgnoresFailedProclaim pins that Leader reports the value a
// quorum holds, and that Observe delivers only what may be on a quorum,
// in (term, seq) order. The leadership holds nodes 0 and 1, its key and
// history gone from node 2; a Proclaim that node 1 fails reaches node 0
// only and fails. Leader still reports Campaign's value (which sorts
// after the failed one, so that no tie rule picks it by chance), an
// Observe started then delivers it and nothing of the failed Proclaim,
// and the next successful Proclaim follows.
func TestLeaderIgnoresFailedProclaim(t *testing.T) {
	_, clients := cluster(t, 3)
	proclaim := failing(wire.ScriptProclaim.Src)
	clients[1].AddHook(proclaim)
	rl := newClient(t, clients)
	ctx := context.Background()
	name := key(t)
	el := rl.Election(name)
	lead, err := el.Campaign(ctx, "b", 20*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lead.Resign(ctx) })
	// Campaign returns once a quorum has its term; an acquire that timed
	// out on the third node may land there later: wait until every node
	// has the term, so that the failed Proclaim below meets the state
	// described.
	published := fmt.Sprintf("term %d: b", lead.Lock().Fence())
	eventually(t, 10*time.Second, func() bool {
		for _, cl := range clients {
			if !strings.HasSuffix(get(t, cl, redlock.KeyName("election", name)), published) {
				return false
			}
		}
		return true
	}, "want every node to hold %q", published)
	require.NoError(t, clients[2].Del(ctx, redlock.KeyName("election", name), redlock.KeyName("terms", name)).Err())

	proclaim.armed.Store(true)
	require.Error(t, lead.Proclaim(ctx, "a"), "a Proclaim that one node of three took")
	proclaim.armed.Store(false)
	ld, err := el.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, redlock.Leader{Value: "b", Term: lead.Lock().Fence(), Validity: ld.Validity}, ld,
		"want the value a quorum holds, not the failed Proclaim's")

	octx, cancel := context.WithCancel(ctx)
	o := watch(el.Observe(octx))
	t.Cleanup(func() { cancel(); <-o.closed })
	eventually(t, 10*time.Second, func() bool { return len(o.get()) > 0 }, "want the leader delivered")
	require.NoError(t, lead.Proclaim(ctx, "c"))
	requireSaw(t, []*observer{o}, []observed{{lead.Lock().Fence(), "b"}, {lead.Lock().Fence(), "c"}}, 0)
}

// holdScript is a go-redis hook that holds the commands running one
// script (EVALSHA or EVAL, alone or in a pipeline) while armed, until
// release is closed: a node that is slow to answer one request.
type holdScript struct {
	sha, src string
	armed    atomic.Bool
	held     chan struct{} // closed when the first command is held
	once     sync.Once
	release  chan struct{}
}

func newHoldScript(src any) *holdScript {
	s := src.(string)
	sum := sha1.Sum([]byte(s))
	return &holdScript{sha: hex.EncodeToString(sum[:]), src: s, held: make(chan struct{}), release: make(chan struct{})}
}

func (h *holdScript) hold(cmds ...redis.Cmder) {
	if !h.armed.Load() {
		return
	}
	for _, cmd := range cmds {
		args := cmd.Args()
		if len(args) < 2 {
			continue
		}
		if a, _ := args[1].(string); a == h.sha || strings.Contains(a, h.src) {
			h.once.Do(func() { close(h.held) })
			<-h.release
			return
		}
	}
}

func (h *holdScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.hold(cmd)
		return next(ctx, cmd)
	}
}

func (h *holdScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.hold(cmds...)
		return next(ctx, cmds)
	}
}

// TestProclaimWaitsForItsAcquire pins that a node runs one lock's
// requests in the order they were issued, Proclaim's too. Node 2 holds
// the leadership's acquire until Campaign, won on nodes 0 and 1, has
// published its term; the publication must still land after the
// acquire there. Then, with node 1 down, nodes 0 and 2 hold the term:
// Leader reports the leader, and an Observe started then delivers it.
func TestProclaimWaitsForItsAcquire(t *testing.T) {
	nodes, clients := cluster(t, 3)
	acquire := newHoldScript(wire.ScriptAcquireFenced.Src)
	clients[2].AddHook(acquire)
	rl := newClient(t, clients)
	ctx := context.Background()
	// Every node's first contact, before the hold: a Client's first
	// round waits for all of them.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := rl.Lock(wctx, key(t), 20*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))

	name := key(t)
	el := rl.Election(name)
	acquire.armed.Store(true)
	var once sync.Once
	let := func() { once.Do(func() { close(acquire.release) }) }
	t.Cleanup(let)
	lead, err := el.Campaign(ctx, "v", 20*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lead.Resign(ctx) })
	<-acquire.held // node 2's acquire was sent, and is held
	acquire.armed.Store(false)
	let()
	eventually(t, 10*time.Second, func() bool {
		return strings.Contains(get(t, clients[2], redlock.KeyName("election", name)), fmt.Sprintf("term %d: v", lead.Lock().Fence()))
	}, "want node 2 to hold the published term after its acquire")

	require.NoError(t, nodes[1].Kill())
	ld, err := el.Leader(ctx)
	require.NoError(t, err, "a leader holds nodes 0 and 2")
	require.Equal(t, "v", ld.Value)
	require.Equal(t, lead.Lock().Fence(), ld.Term)
	octx, cancel := context.WithCancel(ctx)
	o := watch(el.Observe(octx))
	t.Cleanup(func() { cancel(); <-o.closed })
	requireSaw(t, []*observer{o}, []observed{{lead.Lock().Fence(), "v"}}, 0)
}
