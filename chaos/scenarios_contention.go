package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// The contention scenario: many Clients, each with several goroutines,
// wait with Lock on one key, so that the library's wait queue
// (queue.go: a line per Client, a sorted set of waiting Clients on the
// key's queue node, releases naming the next waiter) carries every
// hand-off, while nodes are killed, paused and partitioned and waiting
// Clients die in the queue. Lock with WithFencing does not queue, so the
// contenders take plain locks and write nothing to the fenced resource:
// the checker judges their sections.

const (
	// contentionKey is the one key every contender waits for.
	contentionKey = "hot"
	// contentionClients is how many Clients wait at any time: a killed
	// one is replaced by a fresh Client at once.
	contentionClients = 8
	// contentionWorkers is how many goroutines of each Client call Lock
	// in a loop: they wait in their Client's line.
	contentionWorkers = 3
	// contentionHold is the longest hold: a hold lasts 5ms to this.
	contentionHold = 15 * time.Millisecond
	// contentionWaitBound is the longest a live waiter's Lock may wait
	// while a quorum is up (every fault of the scenario leaves three of
	// five nodes up): its ctx deadline, which ends a wait as starved.
	contentionWaitBound = 10 * time.Second
	// contentionSlack is the loaded machine's share of the dead-waiter
	// bound (race detector, two shared cores).
	contentionSlack = 250 * time.Millisecond
)

// The library's queue timings for a retry delay (queue.go: queuePoll,
// queueLife, namedFor), mirrored to bound what the scenario checks.
func queuePollFor(retryDelay time.Duration) time.Duration {
	return min(max(5*retryDelay, 100*time.Millisecond), time.Second)
}

func queueLifeFor(retryDelay time.Duration) time.Duration { return 4 * queuePollFor(retryDelay) }

func namedForFor(retryDelay time.Duration) time.Duration {
	return min(max(2*retryDelay, 20*time.Millisecond), 200*time.Millisecond)
}

// contentionRetryDelay is the library's default retry delay, which the
// contenders use.
const contentionRetryDelay = 50 * time.Millisecond

// deadWaiterBound is the longest a release that named a dead waiter may
// leave the key unheld while every node runs: the mark of the named
// waiter (namedFor) runs out, then the next check-in (each waiter checks
// in every jittered queuePoll, at most 1.5 of them; the new head's own
// check-in takes the key at once) lets the next waiter attempt.
func deadWaiterBound() time.Duration {
	return namedForFor(contentionRetryDelay) + 3*queuePollFor(contentionRetryDelay)/2 + contentionSlack
}

// queueNodeOf is the library's queue node of key (no key prefix) among
// n (the lab may stay coupled to the library's internals).
func queueNodeOf(key string, n int) int { return wire.QueueNode(key, n) }

// contender is one waiting Client and its workers.
type contender struct {
	n       int // its number in the run, from 1
	rl      *redlock.Client
	rcs     []redis.UniversalClient
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	workers []int // the workers' client ids in the History

	id      atomic.Pointer[string] // its waiter id in the queue, once it checked in
	dead    atomic.Bool
	holding atomic.Int32 // workers holding the key now
	waiting atomic.Int32 // workers inside Lock now
	served  atomic.Int32 // sections it had
	began   time.Duration
	died    time.Duration // when killed (under contention.mu)
}

// idHook learns a contender's waiter id from its check-ins at the queue
// node (key/queue.lua's ARGV[1]).
type idHook struct {
	c   *contender
	key string
}

var _ redis.Hook = idHook{}

func (h idHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h idHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.see(cmd.Args())
		return next(ctx, cmd)
	}
}

func (h idHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.see(cmd.Args())
		}
		return next(ctx, cmds)
	}
}

// see reads a check-in's arguments: EVALSHA (or EVAL) of the queue
// script, 3 keys (the key, its queue, its mark), then the waiter id.
func (h idHook) see(args []any) {
	if len(args) < 7 || h.c.id.Load() != nil {
		return
	}
	if s, _ := args[1].(string); s != wire.ScriptQueue.SHA && s != wire.ScriptQueue.Src {
		return
	}
	if k, _ := args[3].(string); k != h.key {
		return
	}
	if id, ok := args[6].(string); ok {
		h.c.id.Store(&id)
	}
}

// naming is a release announcement (or a check-in's) that named a
// waiter of the queue.
type naming struct {
	at time.Duration
	id string
}

// contention is the state of one contention run.
type contention struct {
	e       *env
	ctx     context.Context // the workers'
	qn      int             // the key's queue node
	admin   []*redis.Client
	ttl     time.Duration
	queue   string // the queue's key
	named   string // the mark's key
	closers sync.WaitGroup

	mu       sync.Mutex
	all      []*contender
	byID     map[string]*contender
	namings  []naming
	waits    []time.Duration // live waiters' Lock waits, won or not
	faults   []window        // node faults, stretched by their recovery
	during   []window        // node faults, from the first fault to the last repair
	seen     int             // samples that found the queue non-empty
	samples  int
	problems map[string]string // sampled queue problems, first of each kind
}

// contentionRun is the contention scenario: see its Doc in Scenarios and
// docs/chaos.md.
func contentionRun(ctx context.Context, e *env) error {
	c := &contention{
		e: e, qn: queueNodeOf(contentionKey, e.cl.N()), ttl: e.p.TTL,
		byID: map[string]*contender{}, problems: map[string]string{},
	}
	c.queue, c.named = wire.QueueKeys(contentionKey)
	for i := range e.cl.N() {
		c.admin = append(c.admin, e.cl.Admin(i))
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.ctx = wctx
	stopWatch := c.watch(wctx)
	for range contentionClients {
		if err := c.spawn(); err != nil {
			cancel()
			c.stopAll()
			stopWatch()
			return err
		}
	}
	runErr := c.cycles(ctx)
	stopped := e.rec.Clock().Now()
	cancel()
	c.stopAll()
	stopWatch()
	c.closers.Wait()
	if runErr != nil {
		return runErr
	}
	c.checkStarvation(stopped)
	c.checkDeadWaiters()
	c.checkProgress()
	c.checkQueueSamples()
	c.checkLeftovers(ctx)
	return ctx.Err()
}

// cycles runs the scenario's fault cycles, as many as fit in Duration
// (at least one): kill the queue's head waiter with every node running;
// partition one node and pause the queue node, killing a waiter
// meanwhile; kill a node (the queue node every other cycle) and restart
// it empty after the guard, pausing another meanwhile; then a calm tail,
// so that the replacements of the killed Clients wait with every node
// up.
func (c *contention) cycles(ctx context.Context) error {
	e := c.e
	clock := e.rec.Clock()
	const tail = time.Second // past a killed node's recovery stretch
	const cycle = 2450*time.Millisecond + tail
	n := e.p.rounds(cycle, 1)
	end := clock.Now() + e.p.Duration
	if err := sleep(ctx, 300*time.Millisecond); err != nil {
		return err
	}
	for i := range n {
		// Calm: the head dies; the next release names it. On a loaded
		// machine that naming may come late, and a head picked a moment
		// before its turn may be granted before it dies: the faults wait
		// for a naming (3s at most) and the grant it leads to, and until
		// a dead waiter's gap has been measured with every node up
		// (checkDeadWaiters), another head dies, three in all at most.
		for try := 1; ; try++ {
			c.mu.Lock()
			before := len(c.namings)
			c.mu.Unlock()
			if err := c.killWaiter(ctx, true); err != nil {
				return err
			}
			if c.awaitDeadNaming(ctx, before, 3*time.Second) {
				if err := sleep(ctx, deadWaiterBound()); err != nil {
					return err
				}
			}
			if gaps, _ := c.deadGaps(); len(gaps) > 0 || try == 3 {
				if try > 1 {
					e.note("cycle %d: %d heads killed before a dead waiter's gap was measured with every node up", i+1, try)
				}
				break
			}
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
		// The queue node paused and another node cut off: check-ins
		// time out, waiters fall back to retrying; one of them dies.
		x := c.other(c.qn)
		if err := e.cl.Partition(x); err != nil {
			return err
		}
		if err := e.cl.Pause(c.qn); err != nil {
			return err
		}
		w := window{from: clock.Now()}
		err := sleep(ctx, 150*time.Millisecond)
		if err == nil {
			err = c.killWaiter(ctx, false)
		}
		if err == nil {
			err = sleep(ctx, 650*time.Millisecond)
		}
		if rerr := e.cl.Resume(c.qn); rerr != nil {
			return rerr
		}
		if herr := e.cl.Heal(x); herr != nil {
			return herr
		}
		w.to = clock.Now()
		c.fault(w, 300*time.Millisecond)
		if err != nil {
			return err
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
		// A node killed mid-lock (the queue node in even cycles: the
		// queue is lost) and restarted empty after the guard; another
		// paused meanwhile. Two of five out: a majority answers.
		victim := c.qn
		if i%2 == 1 {
			victim = c.other(c.qn)
		}
		if err := e.rec.WaitHeld(ctx); err != nil {
			return err
		}
		w = window{from: clock.Now()}
		restarted := make(chan error, 1)
		go func() { restarted <- e.cl.RestartAfter(ctx, victim, e.p.guard()) }()
		err = sleep(ctx, 150*time.Millisecond)
		if err == nil {
			y := c.other(victim)
			if err = e.cl.Pause(y); err == nil {
				err = sleep(ctx, 400*time.Millisecond)
				if rerr := e.cl.Resume(y); rerr != nil && err == nil {
					err = rerr
				}
			}
		}
		if rerr := <-restarted; rerr != nil && err == nil {
			err = rerr
		}
		w.to = clock.Now()
		// go-redis redials a node that refused its dials once a second.
		c.fault(w, time.Second)
		if err != nil {
			return err
		}
		rest := tail
		if i == n-1 {
			rest = max(rest, end-clock.Now())
		}
		if err := sleep(ctx, rest); err != nil {
			return err
		}
	}
	return nil
}

// other returns a random node other than not.
func (c *contention) other(not int) int {
	for {
		if i := rand.IntN(c.e.cl.N()); i != not {
			return i
		}
	}
}

// fault records a node fault's window, stretched by recovery.
func (c *contention) fault(w window, recovery time.Duration) {
	c.mu.Lock()
	c.during = append(c.during, w)
	w.to += recovery
	c.faults = append(c.faults, w)
	c.mu.Unlock()
}

// spawn starts a new waiting Client with contentionWorkers workers.
func (c *contention) spawn() error {
	e := c.e
	rcs := e.cl.Clients()
	ct := &contender{rcs: rcs, began: e.rec.Clock().Now()}
	rcs[c.qn].(*redis.Client).AddHook(idHook{c: ct, key: contentionKey})
	rl, err := redlock.New(rcs)
	if err != nil {
		return err
	}
	ct.rl = rl
	ctx, cancel := context.WithCancel(c.ctx)
	ct.cancel = cancel
	c.mu.Lock()
	c.all = append(c.all, ct)
	ct.n = len(c.all)
	c.mu.Unlock()
	for range contentionWorkers {
		id := e.newClientID()
		ct.workers = append(ct.workers, id)
		ct.wg.Go(func() { c.work(ctx, ct, id) })
	}
	return nil
}

// stopAll stops every live contender (their workers release what they
// hold) and closes their Clients.
func (c *contention) stopAll() {
	c.mu.Lock()
	all := slices.Clone(c.all)
	c.mu.Unlock()
	for _, ct := range all {
		ct.cancel()
	}
	for _, ct := range all {
		ct.wg.Wait()
		if !ct.dead.Load() {
			_ = ct.rl.Close()
		}
	}
}

// work is one worker: Lock the key (waiting up to contentionWaitBound),
// hold 5ms to contentionHold, Unlock, and again at once.
func (c *contention) work(ctx context.Context, ct *contender, id int) {
	e := c.e
	clock := e.rec.Clock()
	for ctx.Err() == nil {
		t0 := clock.Now()
		ct.waiting.Add(1)
		lctx, cancel := context.WithTimeout(ctx, contentionWaitBound)
		l, err := ct.rl.Lock(lctx, contentionKey, c.ttl)
		cancel()
		ct.waiting.Add(-1)
		t1 := clock.Now()
		if !ct.dead.Load() {
			c.mu.Lock()
			c.waits = append(c.waits, t1-t0)
			c.mu.Unlock()
		}
		if err != nil {
			if ctx.Err() != nil {
				return // the run is over, or the Client died
			}
			e.rec.Attempt(Attempt{Client: id, Key: contentionKey, Start: t0, Latency: t1 - t0, Reason: reasonOf(err)})
			if errors.Is(err, context.DeadlineExceeded) {
				e.failf("starved: client %d (Client %d) waited %s in Lock without the lock (bound %v, a quorum up throughout): %v", id, ct.n, ms(t1-t0), contentionWaitBound, err)
			} else {
				e.failf("Lock of client %d (Client %d) returned early after %s: %v", id, ct.n, ms(t1-t0), err)
			}
			_ = sleep(ctx, jitter(10*time.Millisecond))
			continue
		}
		e.rec.Attempt(Attempt{Client: id, Key: contentionKey, Start: t0, Latency: t1 - t0, OK: true})
		ct.holding.Add(1)
		e.rec.Open()
		e.open.Store(l, Section{
			Client: id, Key: contentionKey, Token: l.Token(),
			Attempt: t0, Acquired: t1, Released: Never, Deadline: clock.Of(time.Now().Add(l.Validity())),
		})
		if !ct.dead.Load() {
			holdValid(ctx, l, 5*time.Millisecond+rand.N(contentionHold-5*time.Millisecond), nil)
		}
		if ct.dead.Load() {
			// Its process is gone: it never releases, and its lock
			// stays until its TTL.
			e.abandon(l)
			ct.holding.Add(-1)
			return
		}
		ct.served.Add(1)
		e.releaseFamily(l)
		ct.holding.Add(-1)
	}
}

// killWaiter kills a waiting Client as a SIGKILL would: its connections
// close at once, its workers stop without a word to the nodes, and its
// entry stays in the queue. With head it picks the queue's lowest-ranked
// live Client that holds nothing, while the key is held (so that the next
// release names it), else any live Client that waits and holds nothing.
// A fresh Client replaces it.
func (c *contention) killWaiter(ctx context.Context, head bool) error {
	e := c.e
	var victim *contender
	rank := -1
	if head {
		deadline := time.Now().Add(500 * time.Millisecond)
		for victim == nil && time.Now().Before(deadline) {
			if err := e.rec.WaitHeld(ctx); err != nil {
				return err
			}
			qctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			ids, err := c.admin[c.qn].ZRange(qctx, c.queue, 0, -1).Result()
			cancel()
			if err == nil {
				c.mu.Lock()
				for r, id := range ids {
					if ct := c.byIDLocked(id); ct != nil && !ct.dead.Load() && ct.holding.Load() == 0 {
						victim, rank = ct, r
						break
					}
				}
				c.mu.Unlock()
			}
			if victim == nil {
				if err := sleep(ctx, 5*time.Millisecond); err != nil {
					return err
				}
			}
		}
	}
	if victim == nil {
		c.mu.Lock()
		var cands []*contender
		for _, ct := range c.all {
			if !ct.dead.Load() && ct.holding.Load() == 0 && ct.waiting.Load() > 0 && ct.id.Load() != nil {
				cands = append(cands, ct)
			}
		}
		c.mu.Unlock()
		if len(cands) == 0 {
			e.failf("no waiting Client to kill at %s", ms(e.rec.Clock().Now()))
			return nil
		}
		victim = cands[rand.IntN(len(cands))]
	}
	c.mu.Lock()
	victim.dead.Store(true)
	victim.died = e.rec.Clock().Now()
	c.mu.Unlock()
	for _, rc := range victim.rcs {
		_ = rc.Close()
	}
	victim.cancel()
	where := "waiting"
	if rank >= 0 {
		where = fmt.Sprintf("rank %d of the queue", rank)
	}
	e.note("Client %d (clients %v) killed, %s", victim.n, victim.workers, where)
	c.closers.Go(func() {
		victim.wg.Wait()
		_ = victim.rl.Close()
	})
	return c.spawn()
}

// byIDLocked returns the contender whose waiter id is id, learning ids
// from the hooks as they come. c.mu is held.
func (c *contention) byIDLocked(id string) *contender {
	if ct, ok := c.byID[id]; ok {
		return ct
	}
	for _, ct := range c.all {
		if p := ct.id.Load(); p != nil {
			c.byID[*p] = ct
		}
	}
	return c.byID[id]
}

// watch records the queue node's namings (its release channel) and
// samples the queue every 25ms, until stop: the queue and the mark must
// always carry an expiry within queueLife and namedFor, and the queue
// never hold more waiters than Clients ever waited.
func (c *contention) watch(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	ps := c.admin[c.qn].Subscribe(ctx, redlock.KeyName("release", contentionKey))
	clock := c.e.rec.Clock()
	var wg sync.WaitGroup
	wg.Go(func() {
		ch := ps.Channel(redis.WithChannelSize(4096))
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-ch:
				if !ok {
					return
				}
				if id, _, ok := wire.ParseNamed(m.Payload); ok {
					c.mu.Lock()
					c.namings = append(c.namings, naming{at: clock.Now(), id: id})
					c.mu.Unlock()
				}
			}
		}
	})
	life, named := queueLifeFor(contentionRetryDelay), namedForFor(contentionRetryDelay)
	wg.Go(func() {
		t := time.NewTicker(25 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			sctx, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
			pl := c.admin[c.qn].Pipeline()
			qttl, mttl, card := pl.PTTL(sctx, c.queue), pl.PTTL(sctx, c.named), pl.ZCard(sctx, c.queue)
			_, err := pl.Exec(sctx)
			scancel()
			if err != nil {
				continue // the node is down or paused
			}
			c.mu.Lock()
			c.samples++
			if card.Val() > 0 {
				c.seen++
			}
			if n := int64(len(c.all)); card.Val() > n {
				c.problem("size", "the queue held %d waiters, more than the %d Clients that ever waited", card.Val(), n)
			}
			c.checkTTL("queue", c.queue, qttl.Val(), life)
			c.checkTTL("mark", c.named, mttl.Val(), named)
			c.mu.Unlock()
		}
	})
	return func() {
		cancel()
		_ = ps.Close()
		wg.Wait()
	}
}

// awaitDeadNaming waits, within d, for a naming after the first `since`
// of a waiter that is dead, and reports whether one came.
func (c *contention) awaitDeadNaming(ctx context.Context, since int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		for _, nm := range c.namings[since:] {
			if ct := c.byIDLocked(nm.id); ct != nil && ct.dead.Load() {
				c.mu.Unlock()
				return true
			}
		}
		c.mu.Unlock()
		if sleep(ctx, 10*time.Millisecond) != nil {
			return false
		}
	}
	return false
}

// checkTTL records a sampled key that exists without an expiry, or with
// one longer than limit (plus 50ms of rounding). c.mu is held.
func (c *contention) checkTTL(kind, key string, ttl, limit time.Duration) {
	switch {
	case ttl == -1:
		c.problem(kind+"-ttl", "%s exists without an expiry", key)
	case ttl > limit+50*time.Millisecond:
		c.problem(kind+"-ttl", "%s expires in %s, beyond its %v", key, ms(ttl), limit)
	}
}

// problem records the first sampled problem of each kind. c.mu is held.
func (c *contention) problem(kind, format string, args ...any) {
	if _, ok := c.problems[kind]; !ok {
		c.problems[kind] = fmt.Sprintf("at %s: ", ms(c.e.rec.Clock().Now())) + fmt.Sprintf(format, args...)
	}
}

// checkStarvation checks that every Client alive at the end was served
// (they all waited from their start; the last replacement starts about
// 2.5s before the end: see cycles), and
// notes the longest wait of a live waiter; a wait that reached
// contentionWaitBound failed the run as it ended.
func (c *contention) checkStarvation(stopped time.Duration) {
	e := c.e
	c.mu.Lock()
	defer c.mu.Unlock()
	var unserved []string
	least := -1
	for _, ct := range c.all {
		if ct.dead.Load() {
			continue
		}
		n := int(ct.served.Load())
		if least < 0 || n < least {
			least = n
		}
		if n == 0 {
			unserved = append(unserved, fmt.Sprintf("Client %d (clients %v, waiting since %s)", ct.n, ct.workers, ms(ct.began)))
		}
	}
	if len(unserved) > 0 {
		e.failf("starved: %d live Client(s) never served by %s: %s", len(unserved), ms(stopped), strings.Join(unserved, ", "))
	}
	e.note("waits of live waiters: %d, p50 %s, p99 %s, longest %s; least-served live Client: %d sections",
		len(c.waits), ms(percentile(c.waits, 0.5)), ms(percentile(c.waits, 0.99)), ms(percentile(c.waits, 1)), least)
}

// deadGap is a measured dead waiter's gap: from its naming to the next
// grant, with every node up.
type deadGap struct{ named, next time.Duration }

// deadGaps returns the gaps measured so far: after a naming of a waiter
// that was dead before the next grant (killed before it was named, or
// named a moment before it was killed), the time to that grant, when
// no node fault (or its recovery) overlaps it. skipped says why each
// other naming of a dead waiter was not measured.
func (c *contention) deadGaps() (gaps []deadGap, skipped []string) {
	h := c.e.rec.History()
	c.mu.Lock()
	namings, faults := slices.Clone(c.namings), slices.Clone(c.faults)
	dead := map[string]time.Duration{}
	for _, ct := range c.all {
		if p := ct.id.Load(); p != nil && ct.dead.Load() {
			dead[*p] = ct.died
		}
	}
	c.mu.Unlock()
	acquired := make([]time.Duration, 0, len(h.Sections))
	for _, s := range h.Sections {
		acquired = append(acquired, s.Acquired)
	}
	slices.Sort(acquired)
	for i, nm := range namings {
		died, ok := dead[nm.id]
		if !ok {
			continue
		}
		j, _ := slices.BinarySearch(acquired, nm.at)
		if j == len(acquired) {
			skipped = append(skipped, fmt.Sprintf("named at %s: no grant after it yet", ms(nm.at)))
			continue
		}
		next := acquired[j]
		if next < died {
			// It may have taken its turn before it died.
			skipped = append(skipped, fmt.Sprintf("named at %s: granted at %s, before it died at %s", ms(nm.at), ms(next), ms(died)))
			continue
		}
		if i+1 < len(namings) && namings[i+1].at < next {
			// The next naming's gap includes this one's when that waiter
			// too was dead by the grant. One killed later (in a fault
			// step) was alive then, and the grant was its turn.
			if died2, ok := dead[namings[i+1].id]; ok && died2 <= next {
				continue
			}
		}
		if faulted(faults, nm.at, next) {
			skipped = append(skipped, fmt.Sprintf("named at %s: a node fault overlaps its gap to %s", ms(nm.at), ms(next)))
			continue
		}
		gaps = append(gaps, deadGap{nm.at, next})
	}
	return gaps, skipped
}

// checkDeadWaiters checks what a dead waiter costs: each measured gap
// (deadGaps) is within deadWaiterBound, and at least one was measured.
func (c *contention) checkDeadWaiters() {
	e := c.e
	bound := deadWaiterBound()
	gaps, skipped := c.deadGaps()
	longest := time.Duration(0)
	for _, g := range gaps {
		gap := g.next - g.named
		longest = max(longest, gap)
		if gap > bound {
			e.failf("a dead waiter held the queue up: named at %s, next grant at %s (%s > %s: namedFor %v + 1.5 queuePoll %v + %v)",
				ms(g.named), ms(g.next), ms(gap), ms(bound), namedForFor(contentionRetryDelay), queuePollFor(contentionRetryDelay), contentionSlack)
		}
	}
	if len(gaps) == 0 {
		c.mu.Lock()
		namings := len(c.namings)
		c.mu.Unlock()
		e.failf("no naming of a dead waiter was seen with every node up (%d namings; dead waiters' namings: %s): the dead-waiter bound went unchecked",
			namings, strings.Join(append(skipped, "none other"), "; "))
		return
	}
	e.note("dead waiters named with every node up: %d, next grant after %s at most (bound %s)", len(gaps), ms(longest), ms(bound))
}

// faulted reports whether [from, to] overlaps a fault window.
func faulted(faults []window, from, to time.Duration) bool {
	for _, w := range faults {
		if from < w.to && to >= w.from {
			return true
		}
	}
	return false
}

// checkProgress checks that locks were granted during every node fault:
// a majority was up throughout. A grant counts by when Lock returned (a
// waiter's Lock call began long before, in its Client's line).
func (c *contention) checkProgress() {
	h := c.e.rec.History()
	c.mu.Lock()
	faults := slices.Clone(c.during)
	c.mu.Unlock()
	for i, w := range faults {
		granted := 0
		first := Never
		for _, s := range h.Sections {
			if s.Acquired >= w.from && s.Acquired < w.to {
				granted++
				first = min(first, s.Acquired)
			}
		}
		c.e.note("fault %d (%s to %s): %d granted, the first %s after it began", i+1, ms(w.from), ms(w.to), granted, ms(first-w.from))
		if granted == 0 {
			c.e.failf("no progress: no lock granted during fault %d (%s to %s); %s", i+1, ms(w.from), ms(w.to), h.activity(w.from, w.to))
		}
	}
}

// checkQueueSamples reports the sampled queue problems, and fails a run
// in which the queue was never seen: its waiters did not queue.
func (c *contention) checkQueueSamples() {
	c.mu.Lock()
	defer c.mu.Unlock()
	kinds := make([]string, 0, len(c.problems))
	for k := range c.problems {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		c.e.failf("queue: %s", c.problems[k])
	}
	if c.seen == 0 {
		c.e.failf("the queue %s was never seen on node %d (%d samples): the waiters did not queue there", c.queue, c.qn+1, c.samples)
	}
}

// checkLeftovers waits, at most queueLife after the last check-in (the
// run's end) plus the TTL of a dead holder's lock and a second of
// slack, for every key of the lock (the key, its queue, its mark; any
// key under its name) to be gone from every node.
func (c *contention) checkLeftovers(ctx context.Context) {
	bound := max(queueLifeFor(contentionRetryDelay), c.ttl) + time.Second
	deadline := time.Now().Add(bound)
	for {
		left := c.leftovers(ctx)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) || sleep(ctx, 50*time.Millisecond) != nil {
			c.e.failf("keys left %v after the run: %s", bound, strings.Join(left, ", "))
			return
		}
	}
}

// leftovers lists the keys under contentionKey on every node, with
// their PTTL.
func (c *contention) leftovers(ctx context.Context) []string {
	var out []string
	for i, a := range c.admin {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		keys, err := a.Keys(sctx, contentionKey+"*").Result()
		if err != nil {
			out = append(out, fmt.Sprintf("node %d: %v", i+1, err))
		}
		for _, k := range keys {
			out = append(out, fmt.Sprintf("node %d: %s (pttl %v)", i+1, k, a.PTTL(sctx, k).Val()))
		}
		cancel()
	}
	return out
}
