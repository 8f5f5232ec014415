package redlockgocron_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockgocron"
	"github.com/seed543a70bd/redlock/redlocktest"
)

// electorReplica is one replica of a service: its go-redis clients, its
// Client, its Elector and its scheduler.
type electorReplica struct {
	rc []redis.UniversalClient
	c  *redlock.Client
	e  *redlockgocron.Elector
	s  gocron.Scheduler
}

// newElector returns an Elector of its own Client over nodes, closed
// (before its Client) when the test ends.
func newElector(t *testing.T, nodes []*redlocktest.Node, name string, ttl time.Duration, opts ...redlockgocron.ElectorOption) electorReplica {
	t.Helper()
	rc := clients(t, nodes)
	c, err := redlock.New(rc, redlock.WithNodeTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatalf("redlock.New: want no error, got %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	e, err := redlockgocron.NewElector(c, name, t.Name(), ttl, opts...)
	if err != nil {
		t.Fatalf("NewElector: want no error, got %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return electorReplica{rc: rc, c: c, e: e}
}

// termRun is one run of a job: by which replica, under which term.
type termRun struct {
	sched int
	term  int64
	at    time.Time
}

// Three schedulers, each with its own Client and Elector over the same
// three nodes, run an every-second job. The replica that leads is
// stopped: by Close (the next leader is elected at once), or by closing
// its clients without resigning, as a replica that dies does (the next
// is elected once the leadership expires; its scheduler keeps ticking).
// Each tick runs at most once, strictly; every run is by a leader, with
// terms that rise from run to run; the next leader runs a tick within
// its bound: TTL plus the settle delay plus one tick, plus 5s for a
// loaded machine, whose rounds can miss the per-node timeout for
// seconds (the takeover times are logged).
func TestElectorOnlyLeaderRunsEachTickOnce(t *testing.T) {
	t.Parallel() // waits on ticks for seconds: beside the package's other long waits
	for _, tc := range []struct {
		name   string
		resign bool
	}{{"close", true}, {"clients-closed-without-resigning", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const ttl = time.Second
			nodes := redlocktest.Start(t, 3)
			name := key(t)
			ticks := newTickLog()
			var mu sync.Mutex
			var runs []termRun
			reps := make([]electorReplica, 3)
			for i := range reps {
				reps[i] = newElector(t, nodes, name, ttl)
				e := reps[i].e
				s, err := gocron.NewScheduler(gocron.WithDistributedElector(e))
				if err != nil {
					t.Fatalf("NewScheduler: want no error, got %v", err)
				}
				t.Cleanup(func() { _ = s.Shutdown() })
				reps[i].s = s
				job := func() {
					term := e.Term()
					ticks.add(i)
					mu.Lock()
					runs = append(runs, termRun{sched: i, term: term, at: time.Now()})
					mu.Unlock()
				}
				if _, err := s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(job), gocron.WithName(name)); err != nil {
					t.Fatalf("NewJob: want no error, got %v", err)
				}
			}
			for _, r := range reps {
				if err := r.e.Start(context.Background()); err != nil {
					t.Fatalf("Start: want no error, got %v", err)
				}
				r.s.Start()
			}
			runsBy := func(sched int, after time.Time) int {
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for _, r := range runs {
					if (sched < 0 || r.sched == sched) && r.at.After(after) {
						n++
					}
				}
				return n
			}
			eventually(t, 20*time.Second, "three runs", func() bool { return runsBy(-1, time.Time{}) >= 3 })
			leader := ticks.lastRunner()

			fault := time.Now()
			if tc.resign {
				if err := reps[leader].e.Close(); err != nil {
					t.Fatalf("Close: want no error, got %v", err)
				}
				t.Logf("Close returned in %v", time.Since(fault).Round(time.Millisecond))
				_ = reps[leader].s.Shutdown()
			} else {
				_ = reps[leader].c.Close()
				for _, c := range reps[leader].rc {
					_ = c.Close()
				}
			}
			var elected time.Duration
			eventually(t, ttl+redlockgocron.DefaultSettle+5*time.Second, "another replica leads", func() bool {
				for i, r := range reps {
					if i != leader && r.e.IsLeader(context.Background()) == nil {
						elected = time.Since(fault)
						return true
					}
				}
				return false
			})
			eventually(t, ttl+redlockgocron.DefaultSettle+5*time.Second, "another replica runs a tick", func() bool {
				mu.Lock()
				defer mu.Unlock()
				for _, r := range runs {
					if r.sched != leader && r.at.After(fault) {
						return true
					}
				}
				return false
			})
			mu.Lock()
			var first time.Time
			for _, r := range runs {
				if r.sched != leader && r.at.After(fault) {
					first = r.at
					break
				}
			}
			mu.Unlock()
			takeover := first.Sub(fault)
			t.Logf("takeover: elected and settled %v, first run %v after the fault", elected.Round(time.Millisecond), takeover.Round(time.Millisecond))
			if bound := ttl + redlockgocron.DefaultSettle + time.Second + 5*time.Second; takeover > bound {
				t.Errorf("first run by the next leader: want within %v of the fault, got %v", bound, takeover)
			}
			if !tc.resign {
				// Its leadership lost, its campaign ends: the Client is closed.
				eventually(t, ttl+5*time.Second, "the dead replica's campaign ends", func() bool {
					return errors.Is(reps[leader].e.Err(), redlock.ErrClosed)
				})
				if err := reps[leader].e.IsLeader(context.Background()); !errors.Is(err, redlockgocron.ErrNotLeader) || !errors.Is(err, redlock.ErrClosed) {
					t.Errorf("IsLeader of the dead replica: want ErrNotLeader and ErrClosed, got %v", err)
				}
			}
			eventually(t, 20*time.Second, "three runs after the takeover", func() bool { return runsBy(-1, first) >= 3 })
			for _, r := range reps {
				_ = r.s.Shutdown()
			}
			end := time.Now()

			mu.Lock()
			from := runs[0].at.Unix()
			mu.Unlock()
			skip := map[int64]bool{}
			for sec := fault.Unix(); sec <= first.Unix(); sec++ {
				skip[sec] = true
			}
			missed, line := ticks.check(t, from, end.Unix()-1, skip, 2)
			t.Logf("runs per tick (* = between the fault and the takeover): %s; missed otherwise: %d", line, missed)

			mu.Lock()
			defer mu.Unlock()
			owner := map[int64]int{}
			var last int64
			for _, r := range runs {
				if r.term == 0 {
					// The stopped leader's last run may start as its
					// leadership ends.
					if r.sched != leader || r.at.Before(fault) {
						t.Errorf("run by scheduler %d at %v: want a term, got 0 (ran while not leader)", r.sched, r.at)
					}
					continue
				}
				if o, ok := owner[r.term]; ok && o != r.sched {
					t.Errorf("term %d: run by schedulers %d and %d", r.term, o, r.sched)
				}
				owner[r.term] = r.sched
				if r.term < last {
					t.Errorf("terms of runs: want non-decreasing, got %d after %d", r.term, last)
				}
				last = r.term
				if r.sched == leader && r.at.After(fault.Add(ttl)) {
					t.Errorf("run by the stopped scheduler %d at %v, %v after the fault", r.sched, r.at, r.at.Sub(fault))
				}
			}
			t.Logf("leaderships that ran a tick: %d (terms %v)", len(owner), owner)
		})
	}
}

// Bad arguments are refused with an error matching ErrInvalid, and the
// methods of a nil *Elector return errors, never panic.
func TestElectorRefusesBadInput(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	c := newClient(t, nodes)
	var nilClient *redlock.Client
	var nilMulti *redlock.MultiLock
	for _, tc := range []struct {
		name string
		el   redlockgocron.Elections
		en   string
		val  string
		ttl  time.Duration
		opts []redlockgocron.ElectorOption
	}{
		{name: "nil elections", el: nil, en: "e", ttl: time.Second},
		{name: "nil *Client", el: nilClient, en: "e", ttl: time.Second},
		{name: "nil *MultiLock", el: nilMulti, en: "e", ttl: time.Second},
		{name: "empty name", el: c, en: "", ttl: time.Second},
		{name: "ttl below MinTTL", el: c, en: "e", ttl: redlockgocron.MinTTL - 1},
		{name: "zero ttl", el: c, en: "e", ttl: 0},
		{name: "value too long", el: c, en: "e", val: strings.Repeat("v", 4096+1), ttl: time.Second},
		{name: "negative settle", el: c, en: "e", ttl: time.Second, opts: []redlockgocron.ElectorOption{redlockgocron.WithSettle(-1)}},
		{name: "nil option", el: c, en: "e", ttl: time.Second, opts: []redlockgocron.ElectorOption{nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := redlockgocron.NewElector(tc.el, tc.en, tc.val, tc.ttl, tc.opts...)
			if !errors.Is(err, redlock.ErrInvalid) || e != nil {
				t.Errorf("NewElector: want nil and ErrInvalid, got %v, %v", e, err)
			}
		})
	}

	var e *redlockgocron.Elector
	if err := e.IsLeader(context.Background()); !errors.Is(err, redlockgocron.ErrNotLeader) {
		t.Errorf("nil IsLeader: want ErrNotLeader, got %v", err)
	}
	if err := e.Start(context.Background()); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("nil Start: want ErrInvalid, got %v", err)
	}
	if err := e.Close(); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("nil Close: want ErrInvalid, got %v", err)
	}
	if err := e.Err(); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("nil Err: want ErrInvalid, got %v", err)
	}
	if got := e.Term(); got != 0 {
		t.Errorf("nil Term: want 0, got %d", got)
	}

	// Options Campaign refuses end the campaign; IsLeader says why.
	bad, err := redlockgocron.NewElector(c, key(t), "v", time.Second,
		redlockgocron.WithElectionOptions(redlock.WithMetadata("m")))
	if err != nil {
		t.Fatalf("NewElector: want no error, got %v", err)
	}
	defer bad.Close()
	var nilCtx context.Context
	if err := bad.Start(nilCtx); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("Start(nil): want ErrInvalid, got %v", err)
	}
	if err := bad.Start(context.Background()); err != nil {
		t.Fatalf("Start: want no error, got %v", err)
	}
	eventually(t, 5*time.Second, "the campaign ends", func() bool { return bad.Err() != nil })
	if err := bad.IsLeader(context.Background()); !errors.Is(err, redlockgocron.ErrNotLeader) || !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("IsLeader after refused options: want ErrNotLeader and ErrInvalid, got %v", err)
	}
}

// nodeRequests counts node requests, as an observer.
type nodeRequests struct{ n atomic.Int64 }

// Observe counts the node events.
func (o *nodeRequests) Observe(e redlock.Event) {
	if e.Kind == "node" {
		o.n.Add(1)
	}
}

// A new leader answers IsLeader with nil only the settle delay after its
// election, and its Term then is positive; before, Term is 0. IsLeader
// makes no request to the nodes: a thousand calls cost fewer than a
// thousand node requests (extensions alone, one round per few seconds
// of a 10s TTL), where one round each would cost three thousand.
func TestElectorSettlesBeforeLeading(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	const settle = 1500 * time.Millisecond
	obs := &nodeRequests{}
	c := newClient(t, nodes, redlock.WithObserver(obs.Observe))
	e, err := redlockgocron.NewElector(c, key(t), "v", 10*time.Second, redlockgocron.WithSettle(settle))
	if err != nil {
		t.Fatalf("NewElector: want no error, got %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	start := time.Now()
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("Start: want no error, got %v", err)
	}
	if err := e.IsLeader(context.Background()); !errors.Is(err, redlockgocron.ErrNotLeader) {
		t.Errorf("IsLeader right after Start: want ErrNotLeader, got %v", err)
	}
	if got := e.Term(); got != 0 {
		t.Errorf("Term before leading: want 0, got %d", got)
	}
	eventually(t, 10*time.Second, "leader", func() bool { return e.IsLeader(context.Background()) == nil })
	if got := time.Since(start); got < settle {
		t.Errorf("IsLeader nil: want no sooner than %v after Start, got %v", settle, got)
	}
	if got := e.Term(); got <= 0 {
		t.Errorf("Term of the leader: want > 0, got %d", got)
	}
	before := obs.n.Load()
	for range 1000 {
		if err := e.IsLeader(context.Background()); err != nil {
			t.Fatalf("IsLeader of the leader: want nil, got %v", err)
		}
	}
	if got := obs.n.Load() - before; got >= 1000 {
		t.Errorf("node requests during 1000 IsLeader calls: want fewer than 1000, got %d", got)
	}
}

// IsLeader and Term called from many goroutines while the leader is
// closed twice at once and again, and another is elected: Close returns
// once the leadership is resigned, after which the closed Elector never
// answers nil; the next leader's term is greater; Start after Close is
// refused.
func TestElectorConcurrentIsLeaderAndClose(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	name := key(t)
	// A 10s TTL: the next leader within 5s proves the hand-off.
	reps := []electorReplica{
		newElector(t, nodes, name, 10*time.Second, redlockgocron.WithSettle(0)),
		newElector(t, nodes, name, 10*time.Second, redlockgocron.WithSettle(0)),
	}
	for _, r := range reps {
		if err := r.e.Start(context.Background()); err != nil {
			t.Fatalf("Start: want no error, got %v", err)
		}
	}
	leader := -1
	eventually(t, 10*time.Second, "a leader", func() bool {
		for i, r := range reps {
			if r.e.IsLeader(context.Background()) == nil {
				leader = i
				return true
			}
		}
		return false
	})
	term := reps[leader].e.Term()
	if term <= 0 {
		t.Fatalf("Term: want > 0, got %d", term)
	}

	var closed atomic.Bool
	var afterClose atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				runtime.Gosched() // leave the cores to the hand-off on a loaded machine
				wasClosed := closed.Load()
				for _, r := range reps {
					_ = r.e.Term()
				}
				if reps[leader].e.IsLeader(context.Background()) == nil && wasClosed {
					afterClose.Add(1)
				}
			}
		})
	}
	var closeErrs [2]error
	var cg sync.WaitGroup
	for i := range closeErrs {
		cg.Go(func() { closeErrs[i] = reps[leader].e.Close() })
	}
	cg.Wait()
	closed.Store(true)
	for i, err := range closeErrs {
		if err != nil {
			t.Errorf("Close %d at once: want nil, got %v", i, err)
		}
	}
	if err := reps[leader].e.Close(); err != nil {
		t.Errorf("third Close: want nil, got %v", err)
	}
	other := reps[1-leader].e
	eventually(t, 5*time.Second, "the other leads (hand-off, not expiry)", func() bool { return other.IsLeader(context.Background()) == nil })
	close(stop)
	wg.Wait()
	if n := afterClose.Load(); n > 0 {
		t.Errorf("IsLeader of the closed Elector after Close: want never nil, got nil %d times", n)
	}
	if got := other.Term(); got <= term {
		t.Errorf("next leader's term: want > %d, got %d", term, got)
	}
	if err := reps[leader].e.Start(context.Background()); !errors.Is(err, redlock.ErrClosed) {
		t.Errorf("Start after Close: want ErrClosed, got %v", err)
	}
	if err := other.Start(context.Background()); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("second Start: want ErrInvalid, got %v", err)
	}
}

// When Start's ctx ends, the leader resigns: another is elected well
// before the TTL, the first never leads again, and Close still returns.
// A Start whose ctx is already done never leads.
func TestElectorCtxEndResigns(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	name := key(t)
	a := newElector(t, nodes, name, 10*time.Second, redlockgocron.WithSettle(0))
	b := newElector(t, nodes, name, 10*time.Second, redlockgocron.WithSettle(0))
	ctx, cancel := context.WithCancel(context.Background())
	if err := a.e.Start(ctx); err != nil {
		t.Fatalf("Start: want no error, got %v", err)
	}
	eventually(t, 10*time.Second, "a leads", func() bool { return a.e.IsLeader(context.Background()) == nil })
	if err := b.e.Start(context.Background()); err != nil {
		t.Fatalf("Start: want no error, got %v", err)
	}
	cancel()
	eventually(t, 5*time.Second, "b leads (hand-off, not expiry)", func() bool { return b.e.IsLeader(context.Background()) == nil })
	if err := a.e.IsLeader(context.Background()); !errors.Is(err, redlockgocron.ErrNotLeader) {
		t.Errorf("IsLeader after ctx ended: want ErrNotLeader, got %v", err)
	}
	if err := a.e.Close(); err != nil {
		t.Errorf("Close after ctx ended: want nil, got %v", err)
	}
	if err := a.e.Err(); err != nil {
		t.Errorf("Err after ctx ended: want nil, got %v", err)
	}

	cname := key(t)
	c := newElector(t, nodes, cname, time.Second, redlockgocron.WithSettle(0))
	done, stop := context.WithCancel(context.Background())
	stop()
	if err := c.e.Start(done); err != nil {
		t.Fatalf("Start with a done ctx: want no error, got %v", err)
	}
	if err := c.e.Close(); err != nil {
		t.Errorf("Close: want nil, got %v", err)
	}
	if err := c.e.IsLeader(context.Background()); !errors.Is(err, redlockgocron.ErrNotLeader) {
		t.Errorf("IsLeader: want ErrNotLeader, got %v", err)
	}
	if !free(t, newClient(t, nodes), redlock.KeyName("election", cname)) {
		t.Errorf("election key of a campaign that never ran: want free, got held")
	}
}

// Two replicas whose timers for one tick fire 300ms apart (a skewed
// clock or a late timer), and a leader that resigns right after its run:
// the next leader, elected at once, does not run the tick again, since
// it leads only the settle delay after its election.
func TestElectorSettleKeepsSkewedTickOnce(t *testing.T) {
	t.Parallel() // waits on ticks for seconds: beside the package's other long waits
	nodes := redlocktest.Start(t, 3)
	name := key(t)
	const skew = 300 * time.Millisecond
	settle := redlockgocron.WithSettle(2 * time.Second)
	a := newElector(t, nodes, name, 10*time.Second, settle)
	b := newElector(t, nodes, name, 10*time.Second, settle)
	if err := a.e.Start(context.Background()); err != nil {
		t.Fatalf("Start: want no error, got %v", err)
	}
	eventually(t, 10*time.Second, "a leads", func() bool { return a.e.IsLeader(context.Background()) == nil })
	if err := b.e.Start(context.Background()); err != nil {
		t.Fatalf("Start: want no error, got %v", err)
	}
	at := time.Now().Add(time.Second)
	ran := make(chan string, 4)
	for _, r := range []struct {
		host string
		e    *redlockgocron.Elector
		at   time.Time
	}{{"a", a.e, at}, {"b", b.e, at.Add(skew)}} {
		s, err := gocron.NewScheduler(gocron.WithDistributedElector(r.e))
		if err != nil {
			t.Fatalf("NewScheduler: want no error, got %v", err)
		}
		t.Cleanup(func() { _ = s.Shutdown() })
		_, err = s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartDateTime(r.at)),
			gocron.NewTask(func() { ran <- r.host }), gocron.WithName(name))
		if err != nil {
			t.Fatalf("NewJob: want no error, got %v", err)
		}
		s.Start()
	}
	select {
	case h := <-ran:
		if h != "a" {
			t.Fatalf("first run: want by the leader a, got %s", h)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no run within 10s")
	}
	closed := time.Now()
	if err := a.e.Close(); err != nil {
		t.Fatalf("Close: want no error, got %v", err)
	}
	// b's timer fires at at+skew; it would run by then, or a stall later.
	select {
	case h := <-ran:
		t.Errorf("the tick: want one run, got a second by %s, %v after the leader resigned", h, time.Since(closed))
	case <-time.After(time.Until(at.Add(skew)) + 1500*time.Millisecond):
	}
}
