package redlock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// TestElectionCampaignProclaimResignHandsOff pins the life of a
// leadership: Leader reports its value and term, Proclaim changes the
// value under the same term, Resign hands leadership to a waiting
// candidate at once (hand-off, not its minute-long retry delay), with a
// higher term, and a second Resign returns nil.
func TestElectionCampaignProclaimResignHandsOff(t *testing.T) {
	_, clients := cluster(t, 3)
	a, b := newClient(t, clients), newClient(t, clients)
	ctx := context.Background()
	name := key(t)
	lead, err := a.Election(name).Campaign(ctx, "host-a", 10*time.Second)
	require.NoError(t, err)
	require.Positive(t, lead.Lock().Fence())
	require.Positive(t, lead.Lock().Validity())
	require.NoError(t, lead.Lock().Err())

	info, err := b.Election(name).Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "host-a", info.Value)
	require.Equal(t, lead.Lock().Fence(), info.Term)
	require.True(t, info.Validity > 0 && info.Validity <= 10*time.Second, "want 0 < validity <= TTL, got %v", info.Validity)

	require.NoError(t, lead.Proclaim(ctx, "host-a:v2"))
	require.Equal(t, "host-a:v2", lead.Value())
	info, err = b.Election(name).Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, redlock.Leader{Value: "host-a:v2", Term: lead.Lock().Fence(), Validity: info.Validity}, info)

	type won struct {
		l   *redlock.Leadership
		err error
		at  time.Time
	}
	got := make(chan won, 1)
	go func() {
		l, err := b.Election(name).Campaign(ctx, "host-b", 10*time.Second, redlock.WithRetryDelay(time.Minute))
		got <- won{l, err, time.Now()}
	}()
	// The candidate is refused and waits: it says who leads.
	eventually(t, 5*time.Second, func() bool {
		h, err := a.Inspect(ctx, redlock.KeyName("election", name))
		return err == nil && h.State == "held"
	}, "want the leader held")
	time.Sleep(50 * time.Millisecond) // let the candidate's first attempt be refused
	resigned := time.Now()
	require.NoError(t, lead.Resign(ctx))
	require.NoError(t, lead.Resign(ctx), "want a second Resign to return nil")
	require.ErrorIs(t, lead.Lock().Err(), redlock.ErrReleased)
	select {
	case w := <-got:
		require.NoError(t, w.err)
		require.Greater(t, w.l.Lock().Fence(), lead.Lock().Fence(), "want a higher term")
		require.Less(t, w.at.Sub(resigned), 30*time.Second, "want the hand-off, not the retry delay")
		info, err = a.Election(name).Leader(ctx)
		require.NoError(t, err)
		require.Equal(t, "host-b", info.Value)
		require.Equal(t, w.l.Lock().Fence(), info.Term)
		require.NoError(t, w.l.Resign(ctx))
	case <-time.After(30 * time.Second):
		t.Fatal("want the candidate woken by Resign, within the hand-off")
	}
	_, err = a.Election(name).Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrNoLeader)
	require.ErrorIs(t, lead.Proclaim(ctx, "late"), redlock.ErrNotHeld, "want Proclaim after Resign refused")
}

// TestElectionLeaderSaysWhichError pins Leader's errors: ErrNoLeader when
// a quorum answered and nobody leads, ErrUnreachable (not ErrNoLeader)
// when too few nodes answered.
func TestElectionLeaderSaysWhichError(t *testing.T) {
	nodes, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	e := rl.Election(key(t))
	_, err := e.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrNoLeader)
	require.NotErrorIs(t, err, redlock.ErrUnreachable)

	require.NoError(t, nodes[0].Kill())
	_, err = e.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrNoLeader, "want a quorum of 2 of 3 enough to tell")
	require.NoError(t, nodes[1].Kill())
	_, err = e.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrUnreachable)
	require.NotErrorIs(t, err, redlock.ErrNoLeader)
	require.Contains(t, err.Error(), "1 of 3 nodes answered")
	require.Contains(t, err.Error(), ": node 1: ", "want nodes counted from 1, as in every message")
}

// TestElectionKeysApartFromLocks pins that an election's key is its own:
// a lock on the name and the election do not collide, and the key
// prefix applies.
func TestElectionKeysApartFromLocks(t *testing.T) {
	clients, rl := threeNodes(t, redlock.WithKeyPrefix("app1:"))
	ctx := context.Background()
	name := key(t)
	l, err := rl.TryLock(ctx, name, 10*time.Second)
	require.NoError(t, err)
	lead, err := rl.Election(name).Campaign(ctx, "v", 10*time.Second)
	require.NoError(t, err)
	// Both return at a quorum: the last node's write may land later, or
	// not at all on a loaded machine (a node timeout).
	elected, locked := 0, 0
	for _, c := range clients {
		if strings.Contains(get(t, c, "app1:"+redlock.KeyName("election", name)), ": v") {
			elected++
		}
		if get(t, c, "app1:"+name) == l.Token() {
			locked++
		}
	}
	require.GreaterOrEqual(t, elected, rl.Quorum(), "nodes holding the leadership under the prefixed election key")
	require.GreaterOrEqual(t, locked, rl.Quorum(), "nodes holding the lock under the prefixed lock key")
	info, err := rl.Election(name).Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "v", info.Value)
	require.NoError(t, lead.Resign(ctx))
	require.NoError(t, l.Unlock(ctx))
}

// TestCampaignCtxBoundsOnlyTheWait pins that Campaign's ctx bounds the
// wait: a candidate whose ctx ends is refused with the leader's value in
// the error, and leaves the leader in place; a leadership outlives the
// ctx it was won with, auto-extended past its TTL.
func TestCampaignCtxBoundsOnlyTheWait(t *testing.T) {
	_, rl := threeNodes(t)
	ctx := context.Background()
	name := key(t)
	cctx, cancel := context.WithCancel(ctx)
	const ttl = 300 * time.Millisecond
	lead, err := rl.Election(name).Campaign(cctx, "host-a", ttl)
	require.NoError(t, err)
	cancel()

	wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer wcancel()
	_, err = rl.Election(name).Campaign(wctx, "host-b", ttl)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "host-a")

	stalls := watchStalls(t)
	time.Sleep(3 * ttl) // past the TTL: only auto-extension keeps it
	select {
	case <-lead.Lock().Done():
		// A loaded machine may stall past what a 300ms lease survives;
		// only a loss without such a stall is a failure.
		if stalls.Survivable(t, ttl, testNodeTimeout, lossMargin(ttl, testNodeTimeout)) {
			t.Fatalf("want the leadership held past its TTL, got %v", lead.Lock().Err())
		}
		_ = lead.Resign(ctx)
		return
	default:
	}
	info, err := rl.Election(name).Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "host-a", info.Value)
	require.NoError(t, lead.Resign(ctx))
}

// TestElectionZeroValues pins that nil and zero values return errors,
// never panic.
func TestElectionZeroValues(t *testing.T) {
	ctx := context.Background()
	var e *redlock.Election
	within(t, 5*time.Second, "zero values", func() {
		_, err := e.Campaign(ctx, "v", time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = e.Leader(ctx)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		require.ErrorIs(t, e.Run(ctx, "v", time.Second, func(context.Context) error { return nil }), redlock.ErrInvalid)
		_, open := <-e.Observe(ctx)
		require.False(t, open)
		_, err = (&redlock.Election{}).Leader(ctx)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		for _, ld := range []*redlock.Leadership{nil, {}} {
			require.Zero(t, ld.Lock().Fence())
			require.Zero(t, ld.Lock().Validity())
			require.Empty(t, ld.Value())
			require.ErrorIs(t, ld.Lock().Err(), redlock.ErrInvalid)
			require.ErrorIs(t, ld.Resign(ctx), redlock.ErrInvalid)
			require.ErrorIs(t, ld.Proclaim(ctx, "v"), redlock.ErrInvalid)
			<-ld.Lock().Done()
		}
	})
	_, rl := threeNodes(t)
	_, err := rl.Election("").Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = rl.Election(key(t)).Campaign(ctx, string(make([]byte, 4096+1)), time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = rl.Election(key(t)).Campaign(ctx, "v", time.Second, redlock.WithMetadata("x"))
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorIs(t, rl.Election(key(t)).Run(ctx, "v", time.Second, nil), redlock.ErrInvalid)
}

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

// TestElectionRun pins Run: fn's result returned after a Resign; ctx's
// error when ctx ends; a panic goes on unchanged after a Resign; a lost
// leadership cancels fn's ctx, and Run campaigns again.
func TestElectionRun(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	noLeader := func(name string) {
		t.Helper()
		_, err := rl.Election(name).Leader(ctx)
		require.ErrorIs(t, err, redlock.ErrNoLeader, "want Run to have resigned")
	}

	t.Run("result", func(t *testing.T) {
		name := key(t)
		boom := errors.New("boom")
		require.ErrorIs(t, rl.Election(name).Run(ctx, "v", time.Second, func(ctx context.Context) error { return boom }), boom)
		noLeader(name)
		require.NoError(t, rl.Election(name).Run(ctx, "v", time.Second, func(ctx context.Context) error { return nil }))
		noLeader(name)
	})
	t.Run("ctx ends", func(t *testing.T) {
		name := key(t)
		rctx, cancel := context.WithCancel(ctx)
		err := rl.Election(name).Run(rctx, "v", time.Second, func(fctx context.Context) error {
			cancel()
			<-fctx.Done()
			return nil
		})
		require.ErrorIs(t, err, context.Canceled)
		noLeader(name)
	})
	t.Run("panic", func(t *testing.T) {
		name := key(t)
		type sentinel struct{ n int }
		var got any
		func() {
			defer func() { got = recover() }()
			_ = rl.Election(name).Run(ctx, "v", time.Second, func(context.Context) error { panic(&sentinel{42}) })
		}()
		s, ok := got.(*sentinel)
		require.True(t, ok, "want the panic's own value, got %v", got)
		require.Equal(t, 42, s.n)
		noLeader(name)
	})
	t.Run("lost", func(t *testing.T) {
		name := key(t)
		var calls atomic.Int32
		err := rl.Election(name).Run(ctx, "v", 400*time.Millisecond, func(fctx context.Context) error {
			if calls.Add(1) > 1 {
				return nil
			}
			// Another party deletes the leadership's key everywhere:
			// the next extension finds it missing.
			for _, c := range clients {
				require.NoError(t, c.Del(ctx, redlock.KeyName("election", name)).Err())
			}
			select {
			case <-fctx.Done():
			case <-time.After(10 * time.Second):
				return errors.New("want fn's ctx cancelled when leadership is lost")
			}
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, int32(2), calls.Load(), "want Run to campaign again after the loss")
		noLeader(name)
	})
}

// leadTerm is one leadership of a run: its term, when it was had, and
// when its holder stopped counting on it (Resign, or its deadline).
type leadTerm struct {
	who        int
	term       int64
	start, end time.Time
}

// TestElectionOneLeaderAtATime is randomized (replay with -seed):
// clients campaign, hold, proclaim, resign, or stop extending (their
// leadership expires), while one node is restarted under the restart
// guard. At no instant are two leaderships both valid, and terms rise
// in the order leaders were elected.
func TestElectionOneLeaderAtATime(t *testing.T) {
	seed := testSeed(t)
	nodes, clients := cluster(t, 3)
	const (
		ttl   = 300 * time.Millisecond
		guard = time.Second
		run   = 4 * time.Second
	)
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	name := key(t)
	var mu sync.Mutex
	var terms []leadTerm
	var wg sync.WaitGroup
	for who := range 4 {
		rl := newClient(t, clients, redlock.WithRestartGuard(guard), redlock.WithRetryDelay(20*time.Millisecond))
		rng := rand.New(rand.NewPCG(seed, uint64(who)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				var opts []redlock.LockOption
				expire := rng.IntN(4) == 0
				if expire {
					opts = append(opts, redlock.WithMaxExtensions(1+rng.IntN(2)))
				}
				lead, err := rl.Election(name).Campaign(ctx, fmt.Sprint("c", who), ttl, opts...)
				if err != nil {
					continue
				}
				lt := leadTerm{who: who, term: lead.Lock().Fence(), start: time.Now()}
				hold := time.Duration(rng.IntN(int(ttl)))
				if rng.IntN(3) == 0 {
					_ = lead.Proclaim(context.Background(), fmt.Sprint("c", who, "'"))
				}
				// The holder counts on its leadership until it stops
				// (here, to resign) or its deadline, whichever is first.
				if expire {
					<-lead.Lock().Done()
				} else {
					select {
					case <-time.After(hold):
					case <-lead.Lock().Done():
					}
				}
				lt.end = time.Now()
				if dl := deadlineOf(lead.Lock()); dl.Before(lt.end) {
					lt.end = dl
				}
				_ = lead.Resign(context.Background())
				mu.Lock()
				terms = append(terms, lt)
				mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-time.After(run / 3):
			_ = nodes[0].Restart() // its counters and keys lost; the guard covers it
		case <-ctx.Done():
		}
	}()
	wg.Wait()
	require.GreaterOrEqual(t, len(terms), 3, "want a few leaderships in %v", run)
	sort.Slice(terms, func(i, j int) bool { return terms[i].start.Before(terms[j].start) })
	for i := 1; i < len(terms); i++ {
		p, n := terms[i-1], terms[i]
		require.False(t, n.start.Before(p.end), "two valid leaderships at once: c%d term %d until %v, c%d term %d from %v (seed %d)",
			p.who, p.term, p.end.Format("15:04:05.000"), n.who, n.term, n.start.Format("15:04:05.000"), seed)
		require.Greater(t, n.term, p.term, "want terms rising in election order (seed %d)", seed)
	}
	t.Logf("%d leaderships, terms %d..%d", len(terms), terms[0].term, terms[len(terms)-1].term)
}

// observed is one delivery of Observe.
type observed struct {
	term  int64
	value string
}

// TestElectionObserveFollowsTerms is randomized (replay with -seed):
// candidates campaign, proclaim and resign while observers watch; about
// a third of the leaderships resign at once, shorter than an observer's
// read. Once the run quiesces, every observer has delivered exactly what
// the leaderships published: every term Campaign returned, each with its
// Campaign's value and then every successful Proclaim's, in term order,
// without duplicates, ending with the last leader.
func TestElectionObserveFollowsTerms(t *testing.T) {
	seed := testSeed(t)
	_, clients := cluster(t, 3)
	ctx := context.Background()
	name := key(t)
	obs, first := startObserving(t, newClient(t, clients).Election(name), 3)
	var mu sync.Mutex
	pubs := map[int64][]string{} // what each term published, in order
	publish := func(term int64, v string) {
		mu.Lock()
		defer mu.Unlock()
		pubs[term] = append(pubs[term], v)
	}
	var wg sync.WaitGroup
	var order sync.Mutex // one candidate acts at a time, so that the last leader is known
	for who := range 3 {
		rl := newClient(t, clients, redlock.WithRetryDelay(20*time.Millisecond))
		rng := rand.New(rand.NewPCG(seed, uint64(who)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 6 {
				lead, err := rl.Election(name).Campaign(ctx, fmt.Sprint("c", who), 2*time.Second)
				if !assertNoErr(t, err) {
					return
				}
				order.Lock()
				publish(lead.Lock().Fence(), fmt.Sprint("c", who))
				if rng.IntN(3) > 0 {
					for p := range rng.IntN(3) {
						v := fmt.Sprint("c", who, "-", p)
						if assertNoErr(t, lead.Proclaim(ctx, v)) {
							publish(lead.Lock().Fence(), v)
						}
						time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
					}
					time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
				}
				order.Unlock()
				assertNoErr(t, lead.Resign(ctx))
			}
		}()
	}
	wg.Wait()
	// The last leader stays: every observer must reach it.
	final, err := newClient(t, clients).Election(name).Campaign(ctx, "final", 10*time.Second)
	require.NoError(t, err)
	publish(final.Lock().Fence(), "final")
	want := []observed{first}
	for _, term := range slices.Sorted(maps.Keys(pubs)) {
		for _, v := range pubs[term] {
			want = append(want, observed{term, v})
		}
	}
	requireSaw(t, obs, want, seed)
	require.NoError(t, final.Resign(ctx))
}

// observer gathers what an Observe channel delivers, until it closes.
type observer struct {
	mu     sync.Mutex
	seen   []observed
	closed chan struct{}
}

// watch starts gathering what ch delivers.
func watch(ch <-chan redlock.Leader) *observer {
	o := &observer{closed: make(chan struct{})}
	go func() {
		defer close(o.closed)
		for ld := range ch {
			o.mu.Lock()
			o.seen = append(o.seen, observed{ld.Term, ld.Value})
			o.mu.Unlock()
		}
	}()
	return o
}

// get returns what o gathered so far.
func (o *observer) get() []observed {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.seen)
}

// startObserving campaigns once on el, starts n observers of el (closed
// at the test's end) and waits until each delivered that leadership,
// which it then resigns: from there on, an observer misses nothing.
func startObserving(t *testing.T, el *redlock.Election, n int) ([]*observer, observed) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	lead, err := el.Campaign(ctx, "start", 10*time.Second)
	require.NoError(t, err)
	first := observed{lead.Lock().Fence(), "start"}
	obs := make([]*observer, n)
	for i := range obs {
		obs[i] = watch(el.Observe(ctx))
	}
	t.Cleanup(func() {
		cancel()
		for _, o := range obs {
			<-o.closed
		}
	})
	eventually(t, 10*time.Second, func() bool {
		for _, o := range obs {
			if !slices.Contains(o.get(), first) {
				return false
			}
		}
		return true
	}, "want every observer to deliver the first leader %v", first)
	require.NoError(t, lead.Resign(ctx))
	return obs, first
}

// requireSaw waits until every observer delivered want's last entry,
// then requires that each delivered exactly want.
func requireSaw(t *testing.T, obs []*observer, want []observed, seed uint64) {
	t.Helper()
	last := want[len(want)-1]
	eventually(t, 20*time.Second, func() bool {
		for _, o := range obs {
			if !slices.Contains(o.get(), last) {
				return false
			}
		}
		return true
	}, "want every observer to reach the last leader %v (seed %d)", last, seed)
	for i, o := range obs {
		got := o.get()
		if !slices.Equal(want, got) {
			t.Fatalf("observer %d: want every publication in order without duplicates (seed %d):\nwant %v\ngot  %v\nmissing %v",
				i, seed, want, got, missing(want, got))
		}
	}
	t.Logf("%d observers saw %d publications, terms %d..%d", len(obs), len(want), want[0].term, last.term)
}

// missing returns the entries of want that got lacks.
func missing(want, got []observed) []observed {
	var out []observed
	for _, w := range want {
		if !slices.Contains(got, w) {
			out = append(out, w)
		}
	}
	return out
}

// leaderships runs n leaderships of el one after another, each
// publishing its Campaign's value and up to two Proclaims; about a third
// resign at once. It returns what they published, in order.
func leaderships(t *testing.T, rng *rand.Rand, el *redlock.Election, n int, who string) []observed {
	t.Helper()
	ctx := context.Background()
	var out []observed
	for i := range n {
		v := fmt.Sprint(who, i)
		lead, err := el.Campaign(ctx, v, 2*time.Second)
		require.NoError(t, err)
		out = append(out, observed{lead.Lock().Fence(), v})
		if rng.IntN(3) > 0 {
			for p := range rng.IntN(3) {
				pv := fmt.Sprint(v, "-", p)
				require.NoError(t, lead.Proclaim(ctx, pv))
				out = append(out, observed{lead.Lock().Fence(), pv})
			}
		}
		require.NoError(t, lead.Resign(ctx))
	}
	return out
}

// TestObserveIgnoresMinorityEntries pins that an entry of the history on
// a minority of nodes, as a failed Proclaim leaves it, is not delivered
// once every node answers, while the publications around it are.
func TestObserveIgnoresMinorityEntries(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	name := key(t)
	el := rl.Election(name)
	obs, first := startObserving(t, el, 2)
	lead, err := el.Campaign(ctx, "a", 10*time.Second)
	require.NoError(t, err)
	// Seq 1 in the leadership's term, on node 0 only: what a Proclaim
	// that reached one node of three wrote there.
	require.NoError(t, clients[0].ZAdd(ctx, redlock.KeyName("terms", name),
		redis.Z{Score: float64(lead.Lock().Fence()), Member: wire.TermMember(lead.Lock().Fence(), 1, "ghost")}).Err())
	require.NoError(t, lead.Proclaim(ctx, "b"))
	require.NoError(t, lead.Resign(ctx))
	lead2, err := el.Campaign(ctx, "c", 10*time.Second)
	require.NoError(t, err)
	requireSaw(t, obs, []observed{first, {lead.Lock().Fence(), "a"}, {lead.Lock().Fence(), "b"}, {lead2.Lock().Fence(), "c"}}, 0)
	require.NoError(t, lead2.Resign(ctx))
}

// TestObserveWaitsForTooFewHistories pins that Observe does not deliver
// a leader from the leader read while too few nodes answered the history
// read to tell whether the history holds that leadership: it would skip
// the leadership's earlier values. A leader is elected with "a" and
// proclaims "b" while the observer's reads all fail; then its leader
// reads work again (and find "b") while its history reads still fail.
// "b" must not be delivered ahead of "a".
func TestObserveWaitsForTooFewHistories(t *testing.T) {
	_, clients := cluster(t, 3)
	history := &failScript{src: wire.ScriptHistory.Src.(string)}
	inspect := &failScript{src: wire.ScriptInspect.Src.(string)}
	for _, cl := range clients {
		cl.AddHook(history)
		cl.AddHook(inspect)
	}
	// Two whole reads after "b": their leader reads find "b".
	observeAThenB(t, newClient(t, clients).Election(key(t)), history, 6, inspect, nil, func() { inspect.armed.Store(false) })
}

// TestObserveWaitsForEnoughHistories: Campaign "a" lands on nodes 0
// and 1 only, Proclaim "b" on all three; then only node 2 answers the
// history reads. Node 2 holds "b" but not "a", and an entry seen on one
// answering node of three passes the history's quorum filter: delivered
// then, "b" would place the observer past "a", which nodes 0 and 1 hold.
// The observer waits until more than N − quorum nodes answer.
func TestObserveWaitsForEnoughHistories(t *testing.T) {
	_, clients := cluster(t, 3)
	history := failing(wire.ScriptHistory.Src)
	campaign := failing(wire.ScriptProclaim.Src)
	clients[0].AddHook(history)
	clients[1].AddHook(history)
	clients[2].AddHook(campaign)
	// Two reads that only node 2 answered.
	observeAThenB(t, newClient(t, clients).Election(key(t)), history, 4, campaign, func() {
		require.Positive(t, campaign.n.Load(), "Campaign did not fail on node 2")
		campaign.armed.Store(false)
	}, nil)
}

// observeAThenB starts an observer of el, arms history and other,
// elects "a" and proclaims "b", calling campaigned and proclaimed (when
// not nil) after each; then waits until history has failed reads more
// reads, lets them through, and requires the observer to deliver "a",
// then "b".
func observeAThenB(t *testing.T, el *redlock.Election, history *failScript, reads int64, other *failScript, campaigned, proclaimed func()) {
	t.Helper()
	ctx := context.Background()
	obs, first := startObserving(t, el, 1)
	history.armed.Store(true)
	other.armed.Store(true)
	lead, err := el.Campaign(ctx, "a", 10*time.Second)
	require.NoError(t, err)
	if campaigned != nil {
		campaigned()
	}
	require.NoError(t, lead.Proclaim(ctx, "b"))
	if proclaimed != nil {
		proclaimed()
	}
	n := history.n.Load()
	eventually(t, 10*time.Second, func() bool { return history.n.Load() >= n+reads }, "want %d more failed history reads", reads)
	history.armed.Store(false)
	requireSaw(t, obs, []observed{first, {lead.Lock().Fence(), "a"}, {lead.Lock().Fence(), "b"}}, 0)
	require.NoError(t, lead.Resign(ctx))
}

// TestObserveExpiredHistoryNodeDown: a leadership whose history expired
// (as after max(10×ttl, 1 minute) without a Proclaim) is delivered from
// the leader read while a node does not answer history reads; its next
// Proclaim is delivered during the outage too, not held back until a
// later term passes it.
func TestObserveExpiredHistoryNodeDown(t *testing.T) {
	_, clients := cluster(t, 3)
	history := failing(wire.ScriptHistory.Src)
	clients[2].AddHook(history)
	rl := newClient(t, clients)
	ctx := context.Background()
	name := key(t)
	el := rl.Election(name)
	lead, err := el.Campaign(ctx, "a", 10*time.Second)
	require.NoError(t, err)
	for _, cl := range clients {
		require.NoError(t, cl.Del(ctx, redlock.KeyName("terms", name)).Err())
	}
	history.armed.Store(true)
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	o := watch(el.Observe(octx))
	a := observed{lead.Lock().Fence(), "a"}
	eventually(t, 10*time.Second, func() bool { return slices.Contains(o.get(), a) }, "want the leader read delivered")
	require.NoError(t, lead.Proclaim(ctx, "b"))
	b := observed{lead.Lock().Fence(), "b"}
	eventually(t, 10*time.Second, func() bool { return slices.Contains(o.get(), b) }, "want b delivered while node 2 does not answer: got %v", o.get())
	require.Positive(t, history.n.Load())
	require.NoError(t, lead.Resign(ctx))
	lead2, err := el.Campaign(ctx, "c", 10*time.Second)
	require.NoError(t, err)
	history.armed.Store(false)
	requireSaw(t, []*observer{o}, []observed{a, b, {lead2.Lock().Fence(), "c"}}, 0)
	require.NoError(t, lead2.Resign(ctx))
}

// TestObserveStartNeedsEndedTerms: an observer that starts with no
// leader must know which leaderships ended before it, or it would
// deliver them. When its first history read fails on every node, it
// reads again later; its first delivery is the next leader.
func TestObserveStartNeedsEndedTerms(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	el := rl.Election(key(t))
	lead, err := el.Campaign(ctx, "old", 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, lead.Resign(ctx))
	history := failing(wire.ScriptHistory.Src)
	for _, cl := range clients {
		cl.AddHook(history)
	}
	history.armed.Store(true)
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	o := watch(el.Observe(octx))
	eventually(t, 10*time.Second, func() bool { return history.n.Load() >= 3 }, "want the first history read failed on every node")
	history.armed.Store(false)
	lead2, err := el.Campaign(ctx, "new", 10*time.Second)
	require.NoError(t, err)
	requireSaw(t, []*observer{o}, []observed{{lead2.Lock().Fence(), "new"}}, 0)
	require.NoError(t, lead2.Resign(ctx))
}

// TestObserveManyObserversNodeDown pins that many observers at once,
// with a node killed in the middle of the run, each deliver every
// publication, short leaderships included.
func TestObserveManyObserversNodeDown(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	nodes, clients := cluster(t, 3)
	el := newClient(t, clients).Election(key(t))
	obs, first := startObserving(t, el, 12)
	want := append([]observed{first}, leaderships(t, rng, el, 5, "a")...)
	require.NoError(t, nodes[2].Kill())
	want = append(want, leaderships(t, rng, el, 5, "b")...)
	requireSaw(t, obs, want, seed)
}

// TestObserveSlowReceiver pins that a receiver that stops reading holds
// back neither the election nor its own history: leaderships go on
// while it does not read, and it then delivers every one, in order.
func TestObserveSlowReceiver(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	_, clients := cluster(t, 3)
	el := newClient(t, clients).Election(key(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lead, err := el.Campaign(ctx, "start", 10*time.Second)
	require.NoError(t, err)
	first := observed{lead.Lock().Fence(), "start"}
	ch := el.Observe(ctx)
	ld := <-ch
	require.Equal(t, first, observed{ld.Term, ld.Value})
	require.NoError(t, lead.Resign(ctx))
	// No one reads ch while these run: they must complete.
	var want []observed
	within(t, 60*time.Second, "leaderships while the receiver does not read", func() {
		want = append([]observed{first}, leaderships(t, rng, el, 8, "a")...)
	})
	o := watch(ch)
	o.mu.Lock()
	o.seen = []observed{first}
	o.mu.Unlock()
	requireSaw(t, []*observer{o}, want, seed)
}

// TestObserveCancelledMidRead pins that ending ctx at any instant of
// Observe's reads, while leaderships come and go, closes the channel
// promptly, after deliveries that are real publications in order.
func TestObserveCancelledMidRead(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	_, rl := threeNodes(t)
	el := rl.Election(key(t))
	stop := make(chan struct{})
	churned := make(chan []observed)
	go func() {
		var out []observed
		crng := rand.New(rand.NewPCG(seed, 1))
		for {
			select {
			case <-stop:
				churned <- out
				return
			default:
			}
			out = append(out, leaderships(t, crng, el, 1, "c")...)
		}
	}()
	var got [][]observed
	for range 30 {
		ctx, cancel := context.WithCancel(context.Background())
		ch := el.Observe(ctx)
		time.AfterFunc(time.Duration(rng.IntN(20_000))*time.Microsecond, cancel)
		var seen []observed
		within(t, 10*time.Second, "Observe's channel closing after ctx ended", func() {
			for ld := range ch {
				seen = append(seen, observed{ld.Term, ld.Value})
			}
		})
		cancel()
		got = append(got, seen)
	}
	close(stop)
	real := <-churned
	for i, seen := range got {
		// Each delivery is a publication, and they follow the run's order.
		at := -1
		for _, o := range seen {
			j := slices.Index(real, o)
			require.Greater(t, j, at, "observer %d: %v: want a publication after the last delivered (seed %d)", i, o, seed)
			at = j
		}
	}
}

// TestElectionNameRefusesCounterSuffixes pins that a name whose key
// would be another election's fence counter or history is refused.
func TestElectionNameRefusesCounterSuffixes(t *testing.T) {
	_, rl := threeNodes(t)
	ctx := context.Background()
	for _, name := range []string{"a:fence", "a:terms", ":terms"} {
		el := rl.Election(name)
		_, err := el.Campaign(ctx, "v", time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid, name)
		require.ErrorContains(t, err, "history", name)
		_, err = el.Leader(ctx)
		require.ErrorIs(t, err, redlock.ErrInvalid, name)
		_, open := <-el.Observe(ctx)
		require.False(t, open, "%s: want a closed channel", name)
	}
	// A name that merely contains the suffixes is an election.
	lead, err := rl.Election("a:terms:b").Campaign(ctx, "v", 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, lead.Resign(ctx))
}

// assertNoErr reports err as a test error from a goroutine, and whether
// it was nil.
func assertNoErr(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// TestElectionTermRisesAcrossRestart pins that a term keeps rising when
// a node restarts without its data, under the restart guard.
func TestElectionTermRisesAcrossRestart(t *testing.T) {
	nodes, clients := cluster(t, 3)
	const guard = 500 * time.Millisecond
	rl := newClient(t, clients, redlock.WithRestartGuard(guard))
	ctx := context.Background()
	name := key(t)
	var last int64
	for i := range 3 {
		lead, err := rl.Election(name).Campaign(ctx, "v", 200*time.Millisecond)
		require.NoError(t, err)
		require.Greater(t, lead.Lock().Fence(), last, "round %d", i)
		last = lead.Lock().Fence()
		require.NoError(t, lead.Resign(ctx))
		require.NoError(t, nodes[0].Restart())
	}
}

// TestMultiLockElection pins that a MultiLock's election needs every
// node.
func TestMultiLockElection(t *testing.T) {
	nodes, clients := cluster(t, 3)
	ml, err := redlock.NewMultiLock(clients, redlock.WithNodeTimeout(testNodeTimeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ml.Close() })
	ctx := context.Background()
	name := key(t)
	lead, err := ml.Election(name).Campaign(ctx, "v", 10*time.Second)
	require.NoError(t, err)
	info, err := ml.Election(name).Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "v", info.Value)
	require.NoError(t, lead.Resign(ctx))
	require.NoError(t, nodes[2].Kill())
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = ml.Election(name).Campaign(cctx, "v", 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained, "want no election with a node down")
}

// BenchmarkElectionFailover measures the failover after a leader's
// process dies without resigning (its connections closed under it): the
// time until a waiting candidate is elected, against the TTL (reported
// as p50-ms, p99-ms and ttl-ms). The leadership is left to expire, so
// the failover is about the TTL.
func BenchmarkElectionFailover(b *testing.B) {
	clients := benchClients(b, 3)
	const ttl = 500 * time.Millisecond
	ctx := context.Background()
	name := b.Name()
	next, err := redlock.New(clients, redlock.WithRetryDelay(20*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = next.Close() })
	var lat []time.Duration
	for b.Loop() {
		own := make([]redis.UniversalClient, len(clients))
		for i, c := range clients {
			own[i] = redis.NewClient(&redis.Options{Addr: c.(*redis.Client).Options().Addr})
		}
		dead, err := redlock.New(own)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := dead.Election(name).Campaign(ctx, "old", ttl); err != nil {
			b.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			l, err := next.Election(name).Campaign(ctx, "new", ttl)
			got <- time.Now()
			if err != nil {
				b.Error(err)
				return
			}
			_ = l.Resign(ctx)
		}()
		time.Sleep(20 * time.Millisecond) // the candidate waits
		start := time.Now()
		for _, c := range own {
			_ = c.Close() // the process dies: no Resign, no extension
		}
		lat = append(lat, (<-got).Sub(start))
		_ = dead.Close()
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(ttl.Milliseconds()), "ttl-ms")
}

// BenchmarkObserveLag measures Observe's delivery lag: from a Proclaim's
// return to the observer's receipt (p50-µs, p99-µs).
func BenchmarkObserveLag(b *testing.B) {
	clients := benchClients(b, 3)
	rl, err := redlock.New(clients)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rl.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := rl.Election(b.Name())
	ch := e.Observe(ctx)
	lead, err := e.Campaign(ctx, "v", time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	<-ch
	var lat []time.Duration
	n := 0
	for b.Loop() {
		n++
		v := fmt.Sprint("v", n)
		if err := lead.Proclaim(ctx, v); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for ld := range ch {
			if ld.Value == v {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds()), "p99-µs")
	_ = lead.Resign(context.Background())
}

// TestCampaignCancelledAtAnyInstantLeavesNothing is randomized (replay
// with -seed): Campaigns whose ctx ends at random instants around their
// rounds either win a leadership that stands, or leave nothing behind on
// the nodes but the fence counters.
func TestCampaignCancelledAtAnyInstantLeavesNothing(t *testing.T) {
	seed := testSeed(t)
	clients, rl := threeNodes(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	root := key(t)
	won, cut := cancelAround(t, rng, 60, "Campaign", func(ctx context.Context, i int) (*redlock.Lock, error) {
		lead, err := rl.Election(fmt.Sprint(root, "-", i)).Campaign(ctx, "v", 10*time.Second)
		if err != nil {
			return nil, err
		}
		return lead.Lock(), nil
	})
	t.Logf("%d won, %d cut", won, cut)
	eventually(t, 5*time.Second, func() bool { return len(nodeKeys(t, clients, root)) == 0 },
		"want nothing left (seed %d), got %v", seed, nodeKeys(t, clients, root))
}

// TestElectionObserveWithoutPubSub pins Observe's polling fallback: an
// observer whose ACL user may not subscribe still sees every leader and
// value it polls, within its polling interval.
func TestElectionObserveWithoutPubSub(t *testing.T) {
	nodes := redistest.NodesWith(t, 3, redisnode.Options{Args: []string{"--requirepass", "admin-pw"}})
	admins := redistest.Clients(t, nodes)
	aclSetUser(t, admins, "nosub", "on", ">secret", "~*", "&*", "+@all", "-psubscribe", "-subscribe")
	watcher := newClient(t, userClients(t, nodes, "nosub", "secret"))
	leader := newClient(t, admins)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	name := key(t)
	ch := watcher.Election(name).Observe(ctx)
	lead, err := leader.Election(name).Campaign(ctx, "v1", 10*time.Second)
	require.NoError(t, err)
	next := func(want string) {
		t.Helper()
		select {
		case ld := <-ch:
			require.Equal(t, want, ld.Value)
			require.Equal(t, lead.Lock().Fence(), ld.Term)
		case <-time.After(10 * time.Second):
			t.Fatalf("want %q delivered by polling, got nothing", want)
		}
	}
	next("v1")
	require.NoError(t, lead.Proclaim(ctx, "v2"))
	next("v2")
	require.NoError(t, lead.Resign(ctx))
}

// TestResignAfterLossSaysNotHeld pins Resign on a lost leadership: an
// error matching ErrNotHeld, every time; Done and Err said so first.
func TestResignAfterLossSaysNotHeld(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	name := key(t)
	lead, err := rl.Election(name).Campaign(ctx, "v", 400*time.Millisecond)
	require.NoError(t, err)
	for _, c := range clients {
		require.NoError(t, c.Del(ctx, redlock.KeyName("election", name)).Err())
	}
	select {
	case <-lead.Lock().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("want Done closed once the leadership's key is gone")
	}
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

// TestObserveKeepsRepeatedValues pins that Observe places itself at the
// publication its first leader read found, not at the last one with the
// same value: "a" is elected, the observer delivers it while its history
// reads fail, "b" and "a" are proclaimed, and once the history reads work
// it delivers "b" and the second "a".
func TestObserveKeepsRepeatedValues(t *testing.T) {
	_, clients := cluster(t, 3)
	history := failing(wire.ScriptHistory.Src)
	for _, cl := range clients {
		cl.AddHook(history)
	}
	rl := newClient(t, clients)
	ctx := context.Background()
	el := rl.Election(key(t))
	lead, err := el.Campaign(ctx, "a", 20*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lead.Resign(ctx) })
	history.armed.Store(true)
	octx, cancel := context.WithCancel(ctx)
	o := watch(el.Observe(octx))
	t.Cleanup(func() { cancel(); <-o.closed })
	eventually(t, 10*time.Second, func() bool { return len(o.get()) > 0 }, "want the first leader delivered")
	require.NoError(t, lead.Proclaim(ctx, "b"))
	require.NoError(t, lead.Proclaim(ctx, "a"))
	history.armed.Store(false)
	want := []observed{{lead.Lock().Fence(), "a"}, {lead.Lock().Fence(), "b"}, {lead.Lock().Fence(), "a"}}
	eventually(t, 10*time.Second, func() bool { return len(o.get()) >= len(want) }, "want %v delivered, got %v", want, o.get())
	require.NoError(t, lead.Proclaim(ctx, "c")) // a last one, after which nothing else may show
	want = append(want, observed{lead.Lock().Fence(), "c"})
	eventually(t, 10*time.Second, func() bool { return len(o.get()) >= len(want) }, "want %v delivered", want)
	require.Equal(t, want, o.get())
}

// TestCampaignStopsOnForeignHistory pins that a value none of our kinds
// writes at the election's history key fails the nodes that hold it, as
// at a lock's key: with a list there on 2 of 3 nodes, Campaign wins but
// cannot publish its term, and returns at once an error that says why
// (ErrUnreachable, the server's WRONGTYPE), instead of winning again
// until ctx ends. It leaves the election free.
func TestCampaignStopsOnForeignHistory(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	name := key(t)
	for _, cl := range clients[:2] {
		require.NoError(t, cl.RPush(ctx, redlock.KeyName("terms", name), "someone's data").Err())
	}
	el := rl.Election(name)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	lead, err := el.Campaign(cctx, "v", 20*time.Second)
	require.Nil(t, lead)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrUnreachable)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "Campaign retried until ctx ended")
	require.Contains(t, err.Error(), "WRONGTYPE")
	require.NotContains(t, err.Error(), "\n", "want a one-line error")
	_, err = el.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrNoLeader)
}

// TestObserveEndsWithClose pins that Client.Close closes an Observe
// channel whose receiver stopped reading: the observer does not outlive
// the Client.
func TestObserveEndsWithClose(t *testing.T) {
	_, clients := cluster(t, 3)
	rl, err := redlock.New(clients, redlock.WithNodeTimeout(testNodeTimeout))
	require.NoError(t, err)
	ctx := context.Background()
	el := rl.Election(key(t))
	lead, err := el.Campaign(ctx, "a", 20*time.Second)
	require.NoError(t, err)
	ch := el.Observe(ctx) // never read until Close
	require.NoError(t, lead.Proclaim(ctx, "b"))
	eventually(t, 10*time.Second, func() bool { return observing("observeOnce.func1(") },
		"want the observer waiting to deliver")
	require.NoError(t, lead.Resign(ctx))
	require.NoError(t, rl.Close())
	eventually(t, 10*time.Second, func() bool { return !observing("(*Election).observe(") }, "want the observer ended by Close")
	for range ch {
	}
}

// observing reports whether a goroutine of an Observe runs in fn: its
// loop, or its delivery.
func observing(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "redlock.(*Election)."+strings.TrimPrefix(fn, "(*Election)."))
}

// TestCampaignBacksOffWhenPublishFails: while 2 of 3 nodes fail the
// term's publication, Campaign wins, gives the leadership back, and
// tries again after its retry delay (WithRetryDelay), not at once; when
// its ctx ends it returns a one-line error that matches ErrNotObtained
// and ctx's error and says why the publication failed.
func TestCampaignBacksOffWhenPublishFails(t *testing.T) {
	_, clients := cluster(t, 3)
	proclaim := failing(wire.ScriptProclaim.Src)
	clients[0].AddHook(proclaim)
	clients[1].AddHook(proclaim)
	proclaim.armed.Store(true)
	rl := newClient(t, clients)
	const delay, ctxFor = 200 * time.Millisecond, time.Second
	ctx, cancel := context.WithTimeout(context.Background(), ctxFor)
	defer cancel()
	lead, err := rl.Election(key(t)).Campaign(ctx, "v", 20*time.Second, redlock.WithRetryDelay(delay))
	require.Nil(t, lead)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "injected failure")
	require.NotContains(t, err.Error(), "\n", "want a one-line error")
	// Each delay is at least delay/2: however slow the machine, no more
	// wins than that allows, two failed publications each.
	wins := proclaim.n.Load() / 2
	require.LessOrEqual(t, wins, int64(1+ctxFor/(delay/2)), "want Campaign to wait between wins")
}
