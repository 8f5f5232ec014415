package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	"github.com/seed543a70bd/redlock/internal/wire"
)

// TestElectionCampaignProclaimResignHandsOff pins the life of a
// leadership: Leader reports its value and term, Proclaim changes the
// value under the same term, Resign hands leadership to a waiting
// candidate at once (hand-off, not its minute-long retry delay), with a
// higher term, and a second Resign returns nil.
func TestElectionCampaignProclaimResignHandsOff(t *testing.T) {
	_, clients := cluster(t, 3)
	var refused refusals
	a, b := newClient(t, clients), newClient(t, clients, redlock.WithObserver(refused.observe))
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
	refused.awaitWaiting(t, clients, 1) // the candidate's first attempt was refused
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
	t.Parallel()
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
			// the next extension finds it missing. An extension between
			// two nodes' deletions heals the ones done, so delete
			// again until the loss.
			deadline := time.After(10 * time.Second)
			for {
				for _, c := range clients {
					require.NoError(t, c.Del(ctx, redlock.KeyName("election", name)).Err())
				}
				select {
				case <-fctx.Done():
					return nil
				case <-time.After(200 * time.Millisecond):
				case <-deadline:
					return errors.New("want fn's ctx cancelled when leadership is lost")
				}
			}
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
	t.Parallel()
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
	t.Parallel()
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
		waiting, refused := refusedOnce()
		go func() {
			l, err := next.Election(name).Campaign(ctx, "new", ttl, waiting)
			got <- time.Now()
			if err != nil {
				b.Error(err)
				return
			}
			_ = l.Resign(ctx)
		}()
		select { // the candidate waits
		case <-refused:
		case <-time.After(10 * time.Second):
			b.Fatal("the candidate was not refused within 10s")
		}
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

// TestCampaignBacksOffWhenPublishFails: while 2 of 3 nodes fail the
// term's publication, Campaign wins, gives the leadership back, and
// tries again after its retry delay (WithRetryDelay), not at once; when
// its ctx ends it returns a one-line error that matches ErrNotObtained
// and ctx's error and says why the publication failed.
func TestCampaignBacksOffWhenPublishFails(t *testing.T) {
	t.Parallel()
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
