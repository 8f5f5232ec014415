package stress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/chaos"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

// stressSlack is the margin every call gets beyond what its documentation
// bounds it by: a round waits for its nodes at most max(per-node
// timeout, the library's first-contact or release wait, 250ms) =
// roundWait; an acquisition may run up to four such waits (the round, the clean-up of a lost one, a
// fenced acquisition's second round and its release), plus, for Lock, the
// time its ctx gives it; Extend and Unlock one. CI runs this on a loaded
// 2-core machine under -race, hence a whole second.
const stressSlack = time.Second

// stressLocker is a Client or MultiLock with the node timeout it was made
// with.
type stressLocker struct {
	name string
	acq  interface {
		TryLock(ctx context.Context, key string, ttl time.Duration, opts ...redlock.LockOption) (*redlock.Lock, error)
		Lock(ctx context.Context, key string, ttl time.Duration, opts ...redlock.LockOption) (*redlock.Lock, error)
		TryLockKeys(ctx context.Context, keys []string, ttl time.Duration, opts ...redlock.LockOption) (*redlock.Lock, error)
		LockKeys(ctx context.Context, keys []string, ttl time.Duration, opts ...redlock.LockOption) (*redlock.Lock, error)
		Do(ctx context.Context, key string, ttl time.Duration, fn func(context.Context) error, opts ...redlock.LockOption) error
	}
	client      *redlock.Client // acq, when it is a Client (the lock family is the Client's); nil for a MultiLock
	nodeTimeout time.Duration   // 0: the default, redlock.DefaultNodeTimeout
}

// roundWait is the longest a round of this locker waits for its nodes
// for a lock of ttl: its per-node timeout, or the library's first-contact
// and release waits (250ms each) when longer.
func (lk *stressLocker) roundWait(ttl time.Duration) time.Duration {
	nt := lk.nodeTimeout
	if nt == 0 {
		nt = redlock.DefaultNodeTimeout(ttl)
	}
	return max(nt, 250*time.Millisecond) // the first-contact and release waits
}

// stressRun is one TestStress run: its nodes, lockers, keys, history and
// the failures found so far.
type stressRun struct {
	t     *testing.T
	seed  int64
	dur   time.Duration
	clock *chaos.Clock
	rec   *chaos.Recorder

	nodes    []*redisnode.Node
	proxies  []*chaos.Proxy
	inspect  []redis.UniversalClient // straight to the nodes, for the leftover check
	resource redis.UniversalClient   // the fenced resource: a node of its own, never faulted
	quorum   []*stressLocker
	multi    []*stressLocker
	// inspector reads the nodes for Inspect, Leader and Observe: it
	// dials them directly, so that only killed and paused nodes, not
	// the proxies' latency, can make it disagree with the holders.
	inspector *redlock.Client
	// procFaultGen counts the starts and ends of kills and pauses: odd
	// while one lasts (see healthyFor).
	procFaultGen atomic.Int64
	// killGen counts the starts and ends of kills alone: odd while a
	// killed node is down (a paused one still answers a patient reader;
	// see observeAfterSplit).
	killGen atomic.Int64
	// healedAt is when the last kill or pause ended (the node answered
	// again), on s.clock; see dialBreakerGrace.
	healedAt atomic.Int64
	closers  []io.Closer
	network  []*redis.Client // the go-redis clients through the proxies
	baseline goleak.Option   // the goroutines after set-up

	families map[string]bool // the families of -stress.ops turned on (stress_contracts_test.go)
	burstLk  *redlock.Client // the burst family's Client: nodes dialled directly, node timeout stressBurstTimeout
	// contenders: the contend family's Clients (stress_contend_test.go).
	contenders []*stressLocker

	// calm is held for reading by every worker's step and every fault,
	// and for writing by a burst, which so has healthy nodes and the
	// machine to itself.
	calm sync.RWMutex

	prefix         string
	xprefix        string // keys the families write by hand, outside the leftover check; purged at the end
	plain, fenced  []string
	groups         [][]string
	pathRoot       string   // the root of the path tree of folder locks
	rw             []string // the keys of readers and writers
	sem            string   // the semaphore, of limit stressSemLimit
	processFaulted []int    // nodes that are killed and paused; the others only get latency

	mu       sync.Mutex
	failures []string
	ops      map[string]int
	faults   map[string]int
	downs    map[int][][2]time.Duration // per node: when it was killed or paused
	holds    map[string]*stressHold     // by token
	observed []observation              // what each Observe delivered (stress_election_test.go)
	pubs     map[string][]publication   // each leadership's publications, by election name and term (pubKey)
	oneNode  *redlock.Client            // a Client of node 0 alone (oneNodeStep)
	patient  *redlock.Client            // an observer that waits for every node (observeAfterSplit)
	direct   []redis.UniversalClient    // the go-redis clients that dial the nodes directly
	open     map[*stressHold]struct{}   // acquired and not yet unlocked
	fresh    int                        // fresh keys used so far

	restarts        map[int][]restart // per node, for the restart guard's check
	guardVotes      map[string]int    // per guarded Client: votes the guard should have refused
	guardFirst      map[string]string // and the first of them
	resumed         int               // AutoExtends resumed on a live lock
	resumedExtended int               // of which extended after resuming
}

// newStressRun starts the nodes, proxies, go-redis clients and lockers.
//
// The lock nodes persist every write (appendonly, appendfsync always), so
// a killed node restarts with its keys and fence counters: no node loses
// data, which the fence check needs (a forgotten counter may legitimately
// go backwards) and which lets a killed node come back at once instead of
// after the longest TTL, as it must without persistence. Their data lives
// on tmpfs where there is one, where fsync costs nothing.
func newStressRun(t *testing.T, seed int64, d time.Duration, families map[string]bool) *stressRun {
	t.Helper()
	s := &stressRun{
		t: t, seed: seed, dur: d, families: families,
		clock:      chaos.NewClock(),
		ops:        map[string]int{},
		faults:     map[string]int{},
		downs:      map[int][][2]time.Duration{},
		holds:      map[string]*stressHold{},
		pubs:       map[string][]publication{},
		open:       map[*stressHold]struct{}{},
		restarts:   map[int][]restart{},
		guardVotes: map[string]int{},
		guardFirst: map[string]string{},
	}
	s.rec = chaos.NewRecorder(s.clock)
	s.nodes = redistest.NodesWith(t, stressNodes, redisnode.Options{Dir: stressDataDir(t), AppendOnly: true})
	t.Cleanup(func() {
		// Before the nodes are closed (cleanups run last first): on a
		// failure, whether each node ran and what it last logged, since
		// a node that stopped answering is often the first clue.
		if t.Failed() {
			for i, nd := range s.nodes {
				t.Logf("stress: node %d: %s", i, nd.Describe())
			}
		}
	})
	s.inspect = redistest.Clients(t, s.nodes)
	s.resource = redistest.Clients(t, redistest.Nodes(t, 1))[0]
	s.processFaulted = []int{0, 1}

	// The lockers with the pub/sub hand-off off dial the nodes through
	// the proxies, which slow them; those with it on (the default) dial
	// the nodes directly. Toxiproxy leaks a goroutine for good whenever a
	// connection closes while its latency toxic holds a reply, as the
	// hand-off's subscriptions do with release announcements in flight,
	// and TestMain's goleak would then fail the package.
	var proxied, direct []redis.UniversalClient
	for i, nd := range s.nodes {
		p, err := chaos.NewProxy(fmt.Sprintf("stress-node%d", i), nd.Addr())
		if err != nil {
			t.Fatalf("proxy for node %d: %v", i, err)
		}
		t.Cleanup(p.Close)
		s.proxies = append(s.proxies, p)
		c := stressNodeClient(t, p.Addr())
		c.AddHook(splitHook(i))
		s.network = append(s.network, c)
		proxied = append(proxied, c)
		dc := stressNodeClient(t, nd.Addr())
		dc.AddHook(splitHook(i))
		direct = append(direct, dc)
	}
	clients := func(handoff bool) []redis.UniversalClient {
		if handoff {
			return direct
		}
		return proxied
	}
	// WithTimeout clones share their parent's pool, and so its dials.
	clones := func(of []redis.UniversalClient) []redis.UniversalClient {
		out := make([]redis.UniversalClient, len(of))
		for i, c := range of {
			out[i] = c.(*redis.Client).WithTimeout(time.Second)
		}
		return out
	}

	// Node timeouts from 1ms up to the default: tiny ones lose most
	// rounds and leave late grants to clean up.
	for i, spec := range []stressSpec{
		{time.Millisecond, false}, {5 * time.Millisecond, false}, {20 * time.Millisecond, true},
		{100 * time.Millisecond, false}, {0, false}, {0, true}, {time.Millisecond, true}, {20 * time.Millisecond, false},
	} {
		c, err := redlock.New(clients(spec.handoff), spec.opts()...)
		if err != nil {
			t.Fatalf("redlock.New: %v", err)
		}
		s.quorum = append(s.quorum, &stressLocker{name: spec.name("client", i), acq: c, client: c, nodeTimeout: spec.nodeTimeout})
		s.addCloser(c)
	}
	if families[famClone] {
		// The restart guard watches the dials of the nodes' clients,
		// so its Clients dial the nodes directly; one over the plain
		// clients, one over clones, and an unguarded one over clones of
		// the proxied clients.
		for i, spec := range []struct {
			stressSpec
			guard, clone bool
		}{
			{stressSpec{0, true}, true, true}, {stressSpec{20 * time.Millisecond, true}, true, false}, {stressSpec{5 * time.Millisecond, false}, false, true},
		} {
			nodes := clients(spec.handoff)
			name := spec.name("client", len(s.quorum))
			if spec.clone {
				nodes = clones(nodes)
				name = strings.TrimSuffix(name, ")") + ", WithTimeout clones)"
			}
			opts := spec.opts()
			if spec.guard {
				name = strings.TrimSuffix(name, ")") + fmt.Sprintf(", restart guard %v)", stressGuard)
				opts = append(opts, redlock.WithRestartGuard(stressGuard), redlock.WithObserver(guardObserver{s: s, name: name}.observe))
			}
			c, err := redlock.New(nodes, opts...)
			if err != nil && spec.guard && spec.clone && errors.Is(err, redlock.ErrInvalid) {
				// Refusing the guard where it cannot watch the dials
				// is not silently turning it off.
				t.Logf("stress: %s refused by New: %v", name, err)
				continue
			}
			if err != nil {
				t.Fatalf("redlock.New for the %s family's Client %d: %v", famClone, i, err)
			}
			s.quorum = append(s.quorum, &stressLocker{name: name, acq: c, client: c, nodeTimeout: spec.nodeTimeout})
			s.addCloser(c)
		}
	}
	if families[famContend] {
		if err := s.newContenders(clients); err != nil {
			t.Fatal(err)
		}
	}
	if families[famBurst] {
		// Clients of its own, so that a burst's queue is no other's.
		var own []redis.UniversalClient
		for _, nd := range s.nodes {
			c := redis.NewClient(&redis.Options{Addr: nd.Addr(), ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
			t.Cleanup(func() { _ = c.Close() })
			own = append(own, c)
		}
		c, err := redlock.New(own, redlock.WithNodeTimeout(stressBurstTimeout), redlock.WithHandoff(false))
		if err != nil {
			t.Fatalf("redlock.New for the bursts: %v", err)
		}
		s.burstLk = c
		s.addCloser(c)
	}
	for i, spec := range []stressSpec{{20 * time.Millisecond, false}, {0, true}, {5 * time.Millisecond, false}} {
		m, err := redlock.NewMultiLock(clients(spec.handoff), spec.opts()...)
		if err != nil {
			t.Fatalf("redlock.NewMultiLock: %v", err)
		}
		s.multi = append(s.multi, &stressLocker{name: spec.name("multilock", i), acq: m, nodeTimeout: spec.nodeTimeout})
		s.addCloser(m)
	}
	ins, err := redlock.New(direct)
	if err != nil {
		t.Fatalf("redlock.New for the inspector: %v", err)
	}
	s.inspector = ins
	s.addCloser(ins)
	// A Client of one node, process-faulted, with a per-node timeout far
	// longer than the contexts its calls get (oneNodeStep).
	one, err := redlock.New(direct[:1], redlock.WithNodeTimeout(10*time.Second))
	if err != nil {
		t.Fatalf("redlock.New for the one-node Client: %v", err)
	}
	s.oneNode = one
	s.addCloser(one)
	// An observer whose reads wait seconds for each node, so that, while
	// no node is killed, every node answers them, on a loaded machine
	// too (observeAfterSplit).
	var slowReads []redis.UniversalClient
	for _, nd := range s.nodes {
		slowReads = append(slowReads, patientNodeClient(t, nd.Addr()))
	}
	pat, err := redlock.New(slowReads, redlock.WithNodeTimeout(patientTimeout))
	if err != nil {
		t.Fatalf("redlock.New for the patient observer: %v", err)
	}
	s.patient = pat
	s.addCloser(pat)
	s.direct = direct
	t.Cleanup(s.closeLockers)

	s.prefix = key(t) + ":"
	s.xprefix = strings.TrimSuffix(s.prefix, ":") + "~x:"
	for i := range 4 {
		s.plain = append(s.plain, fmt.Sprintf("%sk%d", s.prefix, i))
	}
	s.groups = [][]string{{s.plain[0], s.plain[1]}, {s.plain[1], s.plain[2], s.plain[3]}}
	s.fenced = []string{s.prefix + "f0", s.prefix + "f1"}
	s.pathRoot = s.prefix + "p"
	s.rw = []string{s.prefix + "rw0", s.prefix + "rw1"}
	s.sem = s.prefix + "sem"
	s.baseline = goleak.IgnoreCurrent()
	return s
}

// stressDataDir returns a directory for the nodes' append-only files,
// removed when the test ends: on /dev/shm when it exists.
func stressDataDir(t *testing.T) string {
	t.Helper()
	st, err := os.Stat("/dev/shm")
	if err != nil || !st.IsDir() {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "redlock-stress-*")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) }) // after the nodes, registered later, are closed
	return dir
}

// stressNodeClient returns a go-redis client for addr with
// redistest.Client's short timeouts and no retries.
func stressNodeClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:          addr,
		DialTimeout:   250 * time.Millisecond,
		ReadTimeout:   500 * time.Millisecond,
		WriteTimeout:  500 * time.Millisecond,
		MaxRetries:    -1,
		DialerRetries: 1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// patientNodeClient is stressNodeClient with socket timeouts longer
// than patientTimeout, for the patient observer.
func patientNodeClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:          addr,
		DialTimeout:   patientTimeout,
		ReadTimeout:   patientTimeout + time.Second,
		WriteTimeout:  patientTimeout + time.Second,
		MaxRetries:    -1,
		DialerRetries: 1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// patientTimeout is the patient observer's per-node timeout: far longer
// than a read takes on a running node, even on a loaded machine, and
// than a pause lasts (processFaults: at most 1.5s).
const patientTimeout = 3 * time.Second

// stressSpec is how one locker is made.
type stressSpec struct {
	nodeTimeout time.Duration // 0: the default
	handoff     bool          // the pub/sub hand-off (then the nodes are dialled directly)
}

func (sp stressSpec) opts() []redlock.Option {
	opts := []redlock.Option{redlock.WithHandoff(sp.handoff)}
	if sp.nodeTimeout > 0 {
		opts = append(opts, redlock.WithNodeTimeout(sp.nodeTimeout))
	}
	return opts
}

func (sp stressSpec) name(kind string, i int) string {
	nt := "default node timeout"
	if sp.nodeTimeout > 0 {
		nt = fmt.Sprintf("node timeout %v", sp.nodeTimeout)
	}
	how := "through the proxies"
	if sp.handoff {
		how = "hand-off, direct"
	}
	return fmt.Sprintf("%s %d (%s, %s)", kind, i, nt, how)
}

// addCloser remembers v for closeLockers when it has a Close method (the
// background release retries of a Client or MultiLock).
func (s *stressRun) addCloser(v any) {
	if c, ok := v.(io.Closer); ok {
		s.closers = append(s.closers, c)
	}
}

// closeLockers closes the lockers that can be closed, once.
func (s *stressRun) closeLockers() {
	s.mu.Lock()
	cs := s.closers
	s.closers = nil
	s.mu.Unlock()
	for _, c := range cs {
		if err := c.Close(); err != nil {
			s.failf("closing a locker: want nil, got %v", err)
		}
	}
}

// run runs the workers and the fault injectors for d, then heals every
// node and waits for every worker. It reports false if the workers had
// not all returned stressHangAfter after the workload ended.
func (s *stressRun) run(d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var workers, injectors sync.WaitGroup
	for id := range stressWorkers {
		rng := rand.New(rand.NewPCG(uint64(s.seed), uint64(id)))
		workers.Go(func() { s.worker(ctx, id, rng) })
	}
	// Two injectors over disjoint nodes, one fault at a time each: at
	// most two of five nodes are faulty, so a majority always answers.
	injectors.Go(func() {
		s.processFaults(ctx, rand.New(rand.NewPCG(uint64(s.seed), 1000)), s.processFaulted)
	})
	injectors.Go(func() {
		s.latencyFaults(ctx, rand.New(rand.NewPCG(uint64(s.seed), 1001)), []int{2, 3})
	})
	if s.families[famBurst] {
		injectors.Go(func() { s.bursts(ctx, rand.New(rand.NewPCG(uint64(s.seed), 1002))) })
	}
	for i, lk := range s.contenders {
		for j := range stressContendWorkers {
			id := stressContendID + i*stressContendWorkers + j
			rng := rand.New(rand.NewPCG(uint64(s.seed), uint64(id)))
			workers.Go(func() { s.contend(ctx, id, lk, rng) })
		}
	}
	<-ctx.Done()
	if !waitGroup(&injectors, stressHangAfter) {
		s.failf("hang: fault injectors had not healed the nodes %v after the workload ended", stressHangAfter)
	}
	return waitGroup(&workers, stressHangAfter)
}

// processFaults kills (and restarts) or pauses (and resumes) one of nodes
// at a time, for random periods, until ctx ends; it leaves them running.
func (s *stressRun) processFaults(ctx context.Context, rng *rand.Rand, nodes []int) {
	for sleepCtx(ctx, 100*time.Millisecond+time.Duration(rng.Int64N(int64(900*time.Millisecond)))) {
		i := nodes[rng.IntN(len(nodes))]
		nd := s.nodes[i]
		down := 50*time.Millisecond + time.Duration(rng.Int64N(int64(1450*time.Millisecond)))
		kill := rng.IntN(2) == 0
		if !s.calmRLock(ctx) {
			return
		}
		s.procFaultGen.Add(1)
		from := s.clock.Now()
		if kill {
			s.killGen.Add(1)
			s.fault("kill", i, chaos.EventKill, "")
			if err := nd.Kill(); err != nil {
				s.calm.RUnlock()
				s.failf("killing node %d: %v", i, err)
				return
			}
			s.mu.Lock()
			s.restarts[i] = append(s.restarts[i], restart{killed: s.clock.Now(), restarting: -1})
			s.mu.Unlock()
			sleepCtx(ctx, down) // no data is lost: no need to outwait the TTLs
			s.mu.Lock()
			s.restarts[i][len(s.restarts[i])-1].restarting = s.clock.Now()
			s.mu.Unlock()
			if err := nd.Restart(); err != nil {
				s.calm.RUnlock()
				s.failf("restarting node %d: %v", i, err)
				return
			}
			s.rec.Event(i, chaos.EventRestart, "")
			s.killGen.Add(1)
		} else {
			s.fault("pause", i, chaos.EventPause, "")
			if err := nd.Pause(); err != nil {
				s.calm.RUnlock()
				s.failf("pausing node %d: %v", i, err)
				return
			}
			sleepCtx(ctx, down)
			if err := nd.Resume(); err != nil {
				s.calm.RUnlock()
				s.failf("resuming node %d: %v", i, err)
				return
			}
			s.rec.Event(i, chaos.EventResume, "")
		}
		s.mu.Lock()
		s.downs[i] = append(s.downs[i], [2]time.Duration{from, s.clock.Now()})
		s.mu.Unlock()
		s.healedAt.Store(int64(s.clock.Now()))
		s.procFaultGen.Add(1)
		s.calm.RUnlock()
	}
}

// latencyFaults delays the replies of one of nodes at a time, through its
// proxy (for the lockers that dial through the proxies), for random
// periods until ctx ends; it leaves them fast. The delays stay below the
// clients' 500ms read timeout: a slow node still executes every request
// it gets, so no release to it is lost.
func (s *stressRun) latencyFaults(ctx context.Context, rng *rand.Rand, nodes []int) {
	delays := []time.Duration{5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond}
	for sleepCtx(ctx, 100*time.Millisecond+time.Duration(rng.Int64N(int64(900*time.Millisecond)))) {
		i := nodes[rng.IntN(len(nodes))]
		d := delays[rng.IntN(len(delays))]
		slow := 100*time.Millisecond + time.Duration(rng.Int64N(int64(1900*time.Millisecond)))
		if !s.calmRLock(ctx) {
			return
		}
		s.fault("latency", i, chaos.EventSlow, fmt.Sprintf("latency %v", d))
		err := s.proxies[i].SetLatency(d, d/10)
		if err == nil {
			sleepCtx(ctx, slow)
			err = s.proxies[i].SetLatency(0, 0)
		}
		s.calm.RUnlock()
		if err != nil {
			s.failf("slowing or healing node %d: %v", i, err)
			return
		}
		s.rec.Event(i, chaos.EventHeal, "")
	}
}

// calmRLock takes calm for reading, as a step or a fault does, and
// reports whether ctx is still live then; it holds calm only if so.
func (s *stressRun) calmRLock(ctx context.Context) bool {
	s.calm.RLock()
	if ctx.Err() != nil {
		s.calm.RUnlock()
		return false
	}
	return true
}

// fault counts and records the start of a fault on node i.
func (s *stressRun) fault(kind string, i int, ev chaos.EventKind, detail string) {
	s.mu.Lock()
	s.faults[kind]++
	s.mu.Unlock()
	s.rec.Event(i, ev, detail)
}

// waitGroup waits for wg at most d and reports whether it finished.
func waitGroup(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// count counts one operation of kind.
func (s *stressRun) count(kind string) {
	s.mu.Lock()
	s.ops[kind]++
	s.mu.Unlock()
}

// failf records a failure, reported with the seed when the run ends.
func (s *stressRun) failf(format string, args ...any) {
	s.mu.Lock()
	s.failures = append(s.failures, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// checkBound records a failure when a call took longer than its bound.
func (s *stressRun) checkBound(worker int, what string, took, bound time.Duration) {
	if took > bound {
		s.failf("worker %d: %s: want a return within %v, got %v", worker, what, bound, took)
	}
}

// holdStarted registers a hold by its token, as open.
func (s *stressRun) holdStarted(h *stressHold) {
	s.mu.Lock()
	s.holds[h.l.Token()] = h
	s.open[h] = struct{}{}
	s.mu.Unlock()
}

// holdEnded marks a hold as unlocked.
func (s *stressRun) holdEnded(h *stressHold) {
	s.mu.Lock()
	delete(s.open, h)
	s.mu.Unlock()
}

// replay returns the command that replays this run's choices.
func (s *stressRun) replay() string {
	cmd := fmt.Sprintf("go test -race -run '^TestStress$' ./stress -args -stress.seed=%d", s.seed)
	if s.dur != 30*time.Second {
		cmd += fmt.Sprintf(" -stress=%v", s.dur)
	}
	if *stressOps != "all" {
		cmd += fmt.Sprintf(" -stress.ops=%s", *stressOps)
	}
	return cmd
}

// seedNote is appended to every failure message.
func (s *stressRun) seedNote() string {
	return fmt.Sprintf("\n\t[seed %d; replay: %s]", s.seed, s.replay())
}

// checkHistory checks the recorded holds and fenced writes: no overlap,
// no stale fenced write accepted, fences rising between holds in real
// time order.
func (s *stressRun) checkHistory(h chaos.History) {
	for _, v := range chaos.Check(h) {
		msg := "want no two holders at once and no stale fenced write, got " + v.String()
		if v.Kind == chaos.Overlap {
			msg += "\n\t\tA: " + s.describe(h.Sections[v.A]) + "\n\t\tB: " + s.describe(h.Sections[v.B])
		}
		s.failf("%s", msg)
	}
	for _, msg := range fenceRegressions(h.Sections) {
		s.failf("%s", msg)
	}
}

// describe says who held a section and what they did.
func (s *stressRun) describe(sec chaos.Section) string {
	s.mu.Lock()
	h := s.holds[sec.Token]
	s.mu.Unlock()
	span := fmt.Sprintf("[%v, %v] deadline %v", ms(sec.Acquired), ms(sec.Released), ms(sec.Deadline))
	if h == nil {
		return fmt.Sprintf("worker %d in Do's fn %s", sec.Client, span)
	}
	return span + " " + h.String()
}

func ms(d time.Duration) string {
	if d == chaos.Never {
		return "never"
	}
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// fenceRegressions returns a message for every fenced hold B of a key
// whose fence is not above that of a hold A of the key acquired (A's call
// returned) before B's call started: the fencing claim of fence.go.
func fenceRegressions(secs []chaos.Section) []string {
	byKey := map[string][]chaos.Section{}
	for _, sec := range secs {
		if sec.Fence > 0 {
			byKey[sec.Key] = append(byKey[sec.Key], sec)
		}
	}
	var out []string
	for k, list := range byKey {
		sort.Slice(list, func(i, j int) bool { return list[i].Acquired < list[j].Acquired })
		best := make([]int, len(list)) // best[i]: the highest fence among list[:i+1]
		for i := range list {
			best[i] = i
			if i > 0 && list[best[i-1]].Fence >= list[i].Fence {
				best[i] = best[i-1]
			}
		}
		for _, b := range list {
			n := sort.Search(len(list), func(i int) bool { return list[i].Acquired >= b.Attempt })
			if n == 0 {
				continue
			}
			if a := list[best[n-1]]; b.Fence <= a.Fence {
				out = append(out, fmt.Sprintf("%q: want a fence above %d (worker %d, acquired at %s) for worker %d's hold attempted later at %s, got %d",
					k, a.Fence, a.Client, ms(a.Acquired), b.Client, ms(b.Attempt), b.Fence))
			}
		}
	}
	sort.Strings(out)
	return out
}

// checkUnlocked checks that every lock a worker got was unlocked.
func (s *stressRun) checkUnlocked() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h := range s.open {
		s.failures = append(s.failures, fmt.Sprintf("want every lock unlocked by its worker, got one still open: %s", h))
	}
}

// leftover is a lock key found on a node after quiescence.
type leftover struct {
	node  int
	key   string
	value string
	pttl  time.Duration
}

// checkLeftovers waits up to stressSettle for every lock key to be gone
// from every node, and fails for each key left. A release that found a
// node killed or paused is retried once the node is back (see
// Client.Close), so no key is excused. If keys are left, it waits for the
// longest TTL and checks that they expired. It returns the number of keys
// left.
func (s *stressRun) checkLeftovers() int {
	var left []leftover
	var err error
	// A scan may fail while a node's go-redis pool still fails its dials
	// fast after a restart (see dialBreakerGrace): polled like the keys.
	pollFor(max(stressSettle, dialBreakerGrace), 50*time.Millisecond, func() bool {
		left, err = s.scanLockKeys()
		return err == nil && len(left) == 0
	})
	if err != nil {
		s.failf("scanning the nodes for lock keys: %v", err)
	}
	var blamed []leftover
	longest := time.Duration(0) // the longest any key left may live
	for _, lo := range left {
		longest = max(longest, lo.pttl)
		blamed = append(blamed, lo)
		s.failf("want no lock key left %v after quiescence, got %s", stressSettle, s.describeLeftover(lo))
	}
	if len(blamed) == 0 {
		return len(left)
	}
	// Nothing sets a key after quiescence: once the longest PTTL has
	// passed, a key still there was extended since (an extender that
	// outlived its lock) or has no TTL.
	wait := min(longest, stressMaxTTL) + time.Second
	time.Sleep(wait) // waiting out the TTLs
	left2, err := s.scanLockKeys()
	if err != nil {
		s.failf("scanning the nodes for lock keys: %v", err)
	}
	for _, lo := range left2 {
		s.failf("want every key gone %v after quiescence (the longest PTTL then, plus 1s), got %s", stressSettle+wait, s.describeLeftover(lo))
	}
	return len(left)
}

// scanLockKeys lists the lock keys (not the fence counters) on every
// node: the keys under the run's prefix, which include the read-write
// keys' readers (ReadersKey) and the semaphore, the path tree's
// holder keys and intention records, which begin with "{" + the tree's
// root + "}" (KeyName "path"), and the elections' keys (KeyName "election"). An
// election's history (KeyName("terms", name)) is skipped when it has a TTL,
// as the fence counters are: it is not lock state, and it outlives the
// leaderships by design (for max(10×ttl, 1 minute)) so that observers
// that fell behind still read it; one without a TTL is a leak, listed.
func (s *stressRun) scanLockKeys() ([]leftover, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []leftover
	var errs []error
	for i, c := range s.inspect {
		for _, pattern := range []string{s.prefix + "*", "{" + s.prefix + "*", redlock.KeyName("election", s.prefix) + "*"} {
			it := c.Scan(ctx, 0, pattern, 1000).Iterator()
			for it.Next(ctx) {
				k := it.Val()
				p, _ := c.PTTL(ctx, k).Result()
				if strings.HasSuffix(k, ":fence") || (strings.HasSuffix(k, ":terms") && p > 0) {
					continue
				}
				out = append(out, leftover{node: i, key: k, value: keyValue(ctx, c, k), pttl: p})
			}
			if err := it.Err(); err != nil {
				errs = append(errs, fmt.Errorf("node %d: %w", i, err))
			}
		}
	}
	return out, errors.Join(errs...)
}

// keyValue returns a key's value: a string's, or a sorted set's members
// (readers, permits, intention records) as "member=score" joined by
// spaces.
func keyValue(ctx context.Context, c redis.UniversalClient, k string) string {
	if c.Type(ctx, k).Val() != "zset" {
		v, _ := c.Get(ctx, k).Result()
		return v
	}
	zs, _ := c.ZRangeWithScores(ctx, k, 0, -1).Result()
	parts := make([]string, len(zs))
	for i, z := range zs {
		parts[i] = fmt.Sprintf("%v=%v", z.Member, z.Score)
	}
	return strings.Join(parts, " ")
}

// describeLeftover says where a key was left and whose token it holds
// (for a sorted set, the first of its members that is a hold's token).
func (s *stressRun) describeLeftover(lo leftover) string {
	s.mu.Lock()
	tok, _, _ := strings.Cut(lo.value, "\x00") // a value with metadata: token, NUL, metadata
	h := s.holds[tok]
	for _, m := range strings.Fields(lo.value) {
		if h == nil {
			h = s.holds[strings.SplitN(m, "=", 2)[0]]
		}
	}
	s.mu.Unlock()
	whose := "an unknown token: a lost or cancelled attempt's, or a Do's lock"
	if h != nil {
		whose = "the token of an unlocked hold: " + h.String()
	}
	return fmt.Sprintf("node %d: %q = %q, PTTL %v, %s", lo.node, lo.key, lo.value, lo.pttl, whose)
}

// checkGoroutines checks that the goroutines are back to the baseline
// taken after set-up. It first closes the lockers' go-redis clients, the
// test's own, so that the proxies' goroutines for their connections end.
// The redis-server processes restarted since then each have a goroutine
// that waits for them (and os/exec's copying ones); those are the
// test's, not the library's. So is a proxy server's own shutdown
// goroutine (toxiproxy's freeBlocker, one per proxy, not per
// connection): a fresh-clone CI run once found a new one after
// quiescence, which its seed's replay did not show again. The library
// creates no proxy; a connection it left open would show as the
// proxy's link goroutines, which stay checked.
//
// The check is repeated for up to goroutineGrace: a go-redis pool whose
// dials failed keeps a goroutine that probes the node once a second
// (ConnPool.tryDial, see dialBreakerGrace), and it notices that its
// pool was closed, or that the node answers, only at its next probe.
func (s *stressRun) checkGoroutines() {
	for _, c := range s.network {
		_ = c.Close()
	}
	var err error
	pollFor(goroutineGrace, 100*time.Millisecond, func() bool {
		err = goleak.Find(s.baseline,
			goleak.IgnoreAnyFunction("github.com/seed543a70bd/redlock/internal/redisnode.(*Node).startLocked.func1"),
			goleak.IgnoreAnyFunction("os/exec.(*Cmd).Start.func2"),
			goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2.(*Proxy).freeBlocker"),
		)
		return err == nil
	})
	if err != nil {
		s.failf("want goroutines back to the baseline after quiescence, got %v", err)
	}
}

// pollFor calls done every interval until it reports true or d has
// passed, and reports whether it did. For what has no event to await:
// a node's keys expiring, a go-redis pool's redial, goroutines ending.
func pollFor(d, interval time.Duration, done func() bool) bool {
	deadline := time.Now().Add(d)
	for !done() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
	return true
}

// goroutineGrace bounds how long checkGoroutines waits for goroutines
// to end: a probe's second and its dial (dialBreakerGrace), and as much
// again for a loaded machine.
const goroutineGrace = 2 * dialBreakerGrace

// report logs what the run did.
func (s *stressRun) report(d time.Duration, h chaos.History, left int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t.Logf("stress: seed %d, workload %v, %d workers, %d nodes, families %s", s.seed, d, stressWorkers, stressNodes, *stressOps)
	s.t.Logf("stress: operations: %s", counts(s.ops))
	s.t.Logf("stress: faults: %s", counts(s.faults))
	if s.families[famResume] {
		s.t.Logf("stress: AutoExtends resumed on a live lock %d, of which extended after resuming %d", s.resumed, s.resumedExtended)
	}
	s.t.Logf("stress: holds checked %d (%s), fenced writes %d, keys left after quiescence %d, failures %d",
		len(h.Sections), counts(holdsByMode(h.Sections)), len(h.Writes), left, len(s.failures))
}

// holdsByMode counts sections by what they held.
func holdsByMode(secs []chaos.Section) map[string]int {
	out := map[string]int{}
	for _, sec := range secs {
		switch {
		case sec.Mode != "":
			out[string(sec.Mode)]++
		case sec.Fence > 0:
			out["fenced"]++
		default:
			out["exclusive"]++
		}
	}
	return out
}

// checkFamilyProgress fails a run of at least 10s in which a kind of the
// lock family was never held: its rules would then have been checked on
// nothing.
func (s *stressRun) checkFamilyProgress(d time.Duration, h chaos.History) {
	if d < 10*time.Second {
		return
	}
	by := holdsByMode(h.Sections)
	s.mu.Lock()
	ops := counts(s.ops)
	s.mu.Unlock()
	for _, m := range []chaos.Mode{chaos.ModePath, chaos.ModeRead, chaos.ModePermit} {
		if by[string(m)] == 0 {
			s.failf("want %s holds in a %v run, got none; operations: %s", m, d, ops)
		}
	}
}

// counts formats a count per kind, sorted by kind.
func counts(m map[string]int) string {
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// emitFailures fails the test with every recorded failure (the first 30),
// each with the seed and the replay command.
func (s *stressRun) emitFailures() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.failures {
		if i == 30 {
			s.t.Errorf("... and %d more failures%s", len(s.failures)-30, s.seedNote())
			break
		}
		s.t.Errorf("%s%s", f, s.seedNote())
	}
}

// allStacks returns every goroutine's stack.
func allStacks() string {
	buf := make([]byte, 1<<22)
	return string(buf[:runtime.Stack(buf, true)])
}
