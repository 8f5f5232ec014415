package redlock_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/seed543a70bd/redlock/internal/wire"
	"github.com/stretchr/testify/require"
)

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
	t.Parallel()
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
						time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond) // the leader's work between Proclaims
					}
					time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond) // and after them, still leading
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

// watch starts gathering what ch delivers, after seen.
func watch(ch <-chan redlock.Leader, seen ...observed) *observer {
	o := &observer{closed: make(chan struct{}), seen: seen}
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
		// Campaign returns at a quorum: node 2's publication may still
		// be on its way.
		eventually(t, 10*time.Second, func() bool { return campaign.n.Load() > 0 }, "Campaign did not fail on node 2")
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
	// What ch delivered before is seeded before the watcher starts: it
	// receives the next delivery at once.
	o := watch(ch, first)
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

// TestElectionObserveWithoutPubSub pins Observe's polling fallback: an
// observer whose ACL user may not subscribe still sees every leader and
// value it polls, within its polling interval.
func TestElectionObserveWithoutPubSub(t *testing.T) {
	t.Parallel()
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
