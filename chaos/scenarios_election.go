package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

// The election scenario: candidates on several clients campaign for one
// leadership (redlock.Election) while the leader's process is paused past
// its TTL, a node is killed and restarted empty under the restart guard,
// and a minority is partitioned. Each leadership is recorded as a Section
// of ModeLeader, so the checker finds two leaders valid at once (Overlaps)
// and terms that did not rise in election order (TermOrder); the scenario
// checks the failover bound and the paused leader's fenced write.

const (
	// electionCandidates is how many clients campaign.
	electionCandidates = 4
	// electionRetry is the candidates' retry delay (WithRetryDelay; the
	// library's default), jittered by ±50%: after a leader dies, a
	// candidate tries again within 1.5 of it.
	electionRetry = 50 * time.Millisecond
	// electionName is the election the candidates run.
	electionName = "chaos"
)

// failoverBound is the longest a dead leader's election may go without a
// new leader: the leadership's keys expire at most ttl (and the drift
// allowance) after its last extension, which was sent before it died; a
// candidate tries within 1.5 retry delays after that; a win takes the
// acquire round, the fencing round and the term's publication, each
// bounded by the per-node timeout; plus 300ms for a stalled 2-core
// machine (a request sent just before the pause may reach a node late).
func failoverBound(ttl time.Duration) time.Duration {
	return ttl + ttl/100 + 3*electionRetry/2 + 3*nodeTimeoutFor(ttl) + 300*time.Millisecond
}

// freezeHook pauses a client's process as far as its nodes can tell: while
// frozen, every dial and request of the go-redis clients that carry it
// waits (for its ctx, or until thawed), as if the process were stopped
// (SIGSTOP, a long GC pause). Requests that waited are sent after the
// thaw, late, as a paused process sends what it was about to send.
type freezeHook struct {
	mu   sync.Mutex
	open chan struct{} // closed while the client runs
}

var _ redis.Hook = (*freezeHook)(nil)

func newFreezeHook() *freezeHook {
	h := &freezeHook{open: make(chan struct{})}
	close(h.open)
	return h
}

// freeze stops the client until thaw.
func (h *freezeHook) freeze() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.open:
		h.open = make(chan struct{})
	default:
	}
}

// thaw lets the client run again.
func (h *freezeHook) thaw() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.open:
	default:
		close(h.open)
	}
}

// wait returns when the client runs, or ctx ends (its error); waited says
// whether it was frozen.
func (h *freezeHook) wait(ctx context.Context) (waited bool, err error) {
	h.mu.Lock()
	ch := h.open
	h.mu.Unlock()
	select {
	case <-ch:
		return false, nil
	default:
	}
	select {
	case <-ch:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

func (h *freezeHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if _, err := h.wait(ctx); err != nil {
			return nil, err
		}
		return next(ctx, network, addr)
	}
}

func (h *freezeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if _, err := h.wait(ctx); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (h *freezeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if _, err := h.wait(ctx); err != nil {
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// candidate is one campaigning client.
type candidate struct {
	id   int
	rl   *redlock.Client
	el   *redlock.Election
	hook *freezeHook

	mu       sync.Mutex
	ld       *redlock.Leadership // while it leads
	pinned   bool                // the scenario pauses it: it does not resign on its own
	stepping bool                // it is resigning: not to be paused now
	frozen   bool                // paused since it last looked
}

// takeFrozen reports whether c was paused since it last asked.
func (c *candidate) takeFrozen() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.frozen
	c.frozen = false
	return f
}

// pauseRecord is one pause of a leader and what followed.
type pauseRecord struct {
	client  int
	term    int64
	at, to  time.Duration // the pause
	what    string
	cut     bool  // a minority was partitioned
	late    bool  // the leader wrote after the thaw
	lateErr error // the resource's answer
}

// electionRun is the state of one election scenario.
type electionRun struct {
	e     *env
	key   string
	cands []*candidate
	obs   *redlock.Client
	wg    sync.WaitGroup

	mu       sync.Mutex
	pauses   []*pauseRecord
	observed []redlock.Leader
	// observedAt is when each of observed was delivered, on the run's
	// clock.
	observedAt []time.Duration
}

func election(ctx context.Context, e *env) error {
	r := &electionRun{e: e, key: redlock.KeyName("election", electionName)}
	defer r.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := r.start(ctx); err != nil {
		return err
	}
	clock, ttl := e.rec.Clock(), e.p.TTL
	// Nodes 3 and 4 take the restart and the partition, one after the
	// other: nodes 0-2 stay healthy, so a majority always answers, and
	// while a restarted node's guard refuses its vote, only it is out.
	victims := []int{3, 4}
	end := clock.Now() + e.p.Duration
	var parts []window
	for cycle := 0; cycle == 0 || clock.Now() < end; cycle++ {
		if err := r.pauseLeader(ctx, "while every node runs", false); err != nil {
			return err
		}
		if _, err := r.waitLeader(ctx); err != nil {
			return err
		}
		v := victims[cycle%2]
		if err := e.cl.Restart(v); err != nil { // memory lost; the guard refuses its vote
			return err
		}
		if err := sleep(ctx, ttl); err != nil {
			return err
		}
		for _, v := range victims {
			if err := e.cl.Partition(v); err != nil {
				return err
			}
		}
		w := window{from: clock.Now()}
		err := r.pauseLeader(ctx, fmt.Sprintf("while nodes %d and %d are partitioned", victims[0]+1, victims[1]+1), true)
		for _, v := range victims {
			if herr := e.cl.Heal(v); herr != nil {
				return herr
			}
		}
		w.to = clock.Now()
		parts = append(parts, w)
		if err != nil {
			return err
		}
	}
	if _, err := r.waitLeader(ctx); err != nil {
		return err
	}
	cancel()
	r.wg.Wait()
	r.check(parts)
	return nil
}

// start makes the candidates and the observer and runs them until ctx
// ends.
func (r *electionRun) start(ctx context.Context) error {
	e := r.e
	for range electionCandidates {
		h := newFreezeHook()
		nodes := e.cl.Clients()
		for _, c := range nodes {
			c.AddHook(h)
		}
		rl, err := redlock.New(nodes, redlock.WithRestartGuard(e.p.guard()), redlock.WithRetryDelay(electionRetry))
		if err != nil {
			return err
		}
		c := &candidate{id: e.newClientID(), rl: rl, el: rl.Election(electionName), hook: h}
		r.cands = append(r.cands, c)
		r.wg.Go(func() { r.campaign(ctx, c) })
	}
	obs, err := redlock.New(e.cl.Clients())
	if err != nil {
		return err
	}
	r.obs = obs
	ch := obs.Election(electionName).Observe(ctx)
	clock := e.rec.Clock()
	r.wg.Go(func() {
		for l := range ch {
			r.mu.Lock()
			r.observed = append(r.observed, l)
			r.observedAt = append(r.observedAt, clock.Now())
			r.mu.Unlock()
		}
	})
	return nil
}

// close thaws every candidate, waits for them and closes the clients.
func (r *electionRun) close() {
	for _, c := range r.cands {
		c.hook.thaw()
	}
	r.wg.Wait()
	for _, c := range r.cands {
		_ = c.rl.Close()
	}
	if r.obs != nil {
		_ = r.obs.Close()
	}
}

// campaign is one candidate: campaign, lead for a while, resign; again.
func (r *electionRun) campaign(ctx context.Context, c *candidate) {
	clock := r.e.rec.Clock()
	for ctx.Err() == nil {
		t0 := clock.Now()
		ld, err := c.el.Campaign(ctx, fmt.Sprintf("candidate %d", c.id), r.e.p.TTL)
		t1 := clock.Now()
		if err != nil && ctx.Err() != nil {
			return
		}
		r.e.rec.Attempt(Attempt{Client: c.id, Key: r.key, Start: t0, Latency: t1 - t0, OK: err == nil, Reason: reasonOf(err)})
		if err != nil {
			_ = sleep(ctx, jitter(electionRetry))
			continue
		}
		r.lead(ctx, c, ld, t0, t1)
		_ = sleep(ctx, jitter(10*time.Millisecond))
	}
}

// lead acts as leader: a fenced write with the term at once and every
// quarter TTL, a Proclaim one time in four, for half a TTL to two and a
// half TTLs (across several extensions), then Resign. It stops when Done
// closes or ctx ends. A leader the scenario paused checked its
// leadership before the pause and writes once after it, with its old
// term, as a paused process would.
func (r *electionRun) lead(ctx context.Context, c *candidate, ld *redlock.Leadership, t0, t1 time.Duration) {
	e, clock, ttl := r.e, r.e.rec.Clock(), r.e.p.TTL
	l := ld.Lock()
	sec := Section{
		Client: c.id, Key: r.key, Token: l.Token(), Fence: ld.Lock().Fence(), Mode: ModeLeader,
		Attempt: t0, Acquired: t1, Released: Never, Deadline: clock.Of(time.Now().Add(l.Validity())),
	}
	e.rec.Open()
	c.mu.Lock()
	c.ld = ld
	c.mu.Unlock()
	_ = e.write(ctx, c.id, l)
	until := time.Now().Add(ttl/2 + rand.N(2*ttl))
	for n := 0; ; n++ {
		t := time.NewTimer(ttl / 4)
		select {
		case <-ctx.Done():
		case <-ld.Lock().Done():
		case <-t.C:
		}
		t.Stop()
		_, _ = c.hook.wait(context.Background()) // paused: nothing runs
		paused := c.takeFrozen()
		if paused {
			// It checked its leadership before the pause, and now acts
			// (once the pause is over, if it began since the wait).
			_, _ = c.hook.wait(context.Background())
			r.lateWrite(c.id, e.write(ctx, c.id, l))
		}
		if ctx.Err() != nil || ld.Lock().Validity() <= 0 || isDone(ld.Lock().Done()) {
			break
		}
		c.mu.Lock()
		if time.Now().After(until) && !c.pinned {
			c.stepping = true
			c.mu.Unlock()
			break
		}
		c.mu.Unlock()
		if !paused {
			_ = e.write(ctx, c.id, l)
		}
		if rand.IntN(4) == 0 {
			pctx, cancel := context.WithTimeout(ctx, ttl)
			err := ld.Proclaim(pctx, fmt.Sprintf("candidate %d, proclaim %d", c.id, n))
			cancel()
			if err != nil && !errors.Is(err, redlock.ErrNotHeld) && !errors.Is(err, redlock.ErrUnreachable) &&
				!errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				e.failf("client %d: Proclaim: want nil, ErrNotHeld, ErrUnreachable or its ctx's deadline, got %v", c.id, err)
			}
		}
	}
	// No pause can begin once c.ld is nil; one that began after the last
	// look still gets its late write, after the thaw.
	c.mu.Lock()
	c.ld, c.pinned, c.stepping = nil, false, false
	frozen := c.frozen
	c.frozen = false
	c.mu.Unlock()
	if frozen {
		_, _ = c.hook.wait(context.Background())
		r.lateWrite(c.id, e.write(ctx, c.id, l))
	}
	sec.Released, sec.Deadline = clock.Now(), clock.Of(time.Now().Add(l.Validity()))
	e.rec.Section(sec)
	e.rec.Close()
	if err := ld.Resign(context.Background()); err != nil && !errors.Is(err, redlock.ErrNotHeld) {
		e.failf("client %d: Resign: want nil or ErrNotHeld, got %v", c.id, err)
	}
}

// laterTermWritten reports whether the resource accepted a write with a
// term above term that ended before at.
func laterTermWritten(ws []Write, term int64, at time.Duration) bool {
	for _, w := range ws {
		if w.Accepted && w.Fence > term && w.End < at {
			return true
		}
	}
	return false
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// lateWrite records the write a paused leader made after its thaw, on
// its latest pause.
func (r *electionRun) lateWrite(client int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.pauses) - 1; i >= 0; i-- {
		if p := r.pauses[i]; p.client == client && !p.late {
			p.late, p.lateErr = true, err
			return
		}
	}
}

// waitLeader waits until a candidate leads, for at most recoveryWait.
func (r *electionRun) waitLeader(ctx context.Context) (*candidate, error) {
	deadline := time.Now().Add(recoveryWait)
	for {
		for _, c := range r.cands {
			c.mu.Lock()
			ok := c.ld != nil && !c.stepping && c.ld.Lock().Validity() > 0
			c.mu.Unlock()
			if ok {
				return c, nil
			}
		}
		if time.Now().After(deadline) {
			r.e.failf("no leader within %v", recoveryWait)
			return nil, fmt.Errorf("no leader within %v", recoveryWait)
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// pauseLeader pauses the current leader's process past its validity,
// until another leader has been elected and has had a quarter TTL to
// write with its term (or for the failover bound and recoveryWait, if
// none is), then lets it run again.
func (r *electionRun) pauseLeader(ctx context.Context, what string, cut bool) error {
	e := r.e
	for {
		c, err := r.waitLeader(ctx)
		if err != nil {
			return err
		}
		c.mu.Lock()
		ld := c.ld
		if ld == nil || c.stepping {
			c.mu.Unlock()
			continue // it resigned meanwhile: take the next leader
		}
		c.pinned, c.frozen = true, true
		c.hook.freeze()
		c.mu.Unlock()
		p := &pauseRecord{client: c.id, term: ld.Lock().Fence(), at: e.rec.Clock().Now(), what: what, cut: cut}
		r.mu.Lock()
		r.pauses = append(r.pauses, p)
		r.mu.Unlock()
		e.note("leader client %d (term %d) pauses past its TTL %s", c.id, ld.Lock().Fence(), what)
		_, err = r.awaitNext(ctx, p.term, failoverBound(e.p.TTL)+recoveryWait) // check reports a missing leader
		if err == nil {
			err = sleep(ctx, e.p.TTL/4)
		}
		c.hook.thaw()
		r.mu.Lock()
		p.to = e.rec.Clock().Now()
		r.mu.Unlock()
		e.note("client %d wakes", c.id)
		return err
	}
}

// awaitNext waits until a candidate leads with a term above term, the
// paused leadership's, for at most d; it reports whether one did. Any
// other candidate's leadership would not do: a leader paused earlier
// still holds its deposed one (c.ld) for the moments between its thaw
// and its look at Validity, so a pause that began right after a thaw
// would end at once, never past its TTL.
func (r *electionRun) awaitNext(ctx context.Context, term int64, d time.Duration) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		for _, c := range r.cands {
			c.mu.Lock()
			ok := c.ld != nil && c.ld.Lock().Fence() > term
			c.mu.Unlock()
			if ok {
				return true, nil
			}
		}
		if !time.Now().Before(deadline) {
			return false, nil
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return false, err
		}
	}
}

// check asserts the failover bound after every pause, that a paused
// leader's late write was refused once a later leader had written, that
// leaders were elected while the minority was partitioned, and that
// Observe delivered in term order, without duplicates, never "no
// leader", and missed no leadership (see below).
func (r *electionRun) check(parts []window) {
	e := r.e
	h := e.rec.History()
	// While a minority is partitioned every other node must grant, so two
	// candidates that each win one of them split the vote and retry: the
	// next leader may take splitRetries retries more, each within 1.5
	// retry delays (measured: 506-743ms against 955ms without them).
	const splitRetries = 3
	split := splitRetries * 3 * electionRetry / 2
	cutBound := failoverBound(e.p.TTL) + split
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pauses {
		d, ok := FailoverAfter(h.Sections, r.key, p.client, p.at)
		bound, why := failoverBound(e.p.TTL), fmt.Sprintf("TTL %s + 1.5 retry delays + 3 node timeouts + 300ms", ms(e.p.TTL))
		if p.cut {
			bound, why = cutBound, why+fmt.Sprintf(" + %v for %d split votes", split, splitRetries)
		}
		switch {
		case !ok:
			e.failf("no leader was elected after client %d's pause at %s %s", p.client, ms(p.at), p.what)
			continue
		case d > bound:
			e.failf("failover took %s after client %d's pause at %s %s: want at most %s (%s)",
				ms(d), p.client, ms(p.at), p.what, ms(bound), why)
		}
		if p.at+d >= p.to {
			// The paused leader may have led on: the failover measured
			// is then a later one's, and its late write goes unchecked.
			e.failf("client %d's pause at %s %s ended at %s, before the next leader was elected (%s after the pause began): want it paused until then",
				p.client, ms(p.at), p.what, ms(p.to), ms(d))
		}
		e.note("failover %s after client %d's pause %s", ms(d), p.client, p.what)
		if !p.late {
			e.failf("client %d never wrote after its pause at %s", p.client, ms(p.at))
		} else if p.at+d < p.to {
			if !errors.Is(p.lateErr, redlock.ErrStaleFence) {
				e.failf("client %d's write with term %d after its pause, once a later leader was elected: want ErrStaleFence, got %v", p.client, p.term, p.lateErr)
			}
			// Refused for the later leader's term, not for its own earlier
			// write with the same term, which FencedSet also refuses.
			if !laterTermWritten(h.Writes, p.term, p.to) {
				e.failf("no leader after client %d (term %d) wrote a higher term before it woke at %s: the late write's refusal proves nothing", p.client, p.term, ms(p.to))
			}
		}
	}
	for _, w := range parts {
		n := 0
		for _, s := range h.Sections {
			if s.Mode == ModeLeader && s.Acquired >= w.from && s.Acquired < w.to {
				n++
			}
		}
		if n == 0 {
			e.failf("no leader elected while the minority was partitioned (%s to %s)", ms(w.from), ms(w.to))
		}
	}
	seen := map[redlock.Leader]bool{}
	var last int64
	for i, l := range r.observed {
		k := redlock.Leader{Value: l.Value, Term: l.Term}
		switch {
		case l.Term <= 0:
			e.failf("Observe delivered %d: %+v, want a leader", i, l)
		case l.Term < last:
			e.failf("Observe delivered term %d after term %d: want term order", l.Term, last)
		case seen[k]:
			e.failf("Observe delivered term %d (%q) twice", l.Term, l.Value)
		}
		seen[k], last = true, max(last, l.Term)
	}
	if len(r.observed) == 0 {
		e.failf("Observe delivered no leader")
	}
	// Observe misses no leadership whose term lies between two it
	// delivered: Campaign returned once the term was in a quorum of
	// nodes' histories. A restart loses a node's copy, so a leadership
	// is exempt when a node restarted between its attempt and the
	// delivery of a later term.
	var restarts []time.Duration
	for _, ev := range h.Events {
		if ev.Kind == EventRestart {
			restarts = append(restarts, ev.At)
		}
	}
	delivered := map[int64]bool{}
	for _, l := range r.observed {
		delivered[l.Term] = true
	}
	for _, s := range h.Sections {
		if s.Mode != ModeLeader || s.Key != r.key || delivered[s.Fence] || len(r.observed) == 0 || r.observed[0].Term >= s.Fence {
			continue
		}
		j := slices.IndexFunc(r.observed, func(l redlock.Leader) bool { return l.Term > s.Fence })
		if j < 0 || slices.ContainsFunc(restarts, func(at time.Duration) bool { return at >= s.Attempt && at <= r.observedAt[j] }) {
			continue
		}
		e.failf("Observe missed the leadership of term %d (client %d, elected at %s): it delivered term %d at %s, and no node restarted in between",
			s.Fence, s.Client, ms(s.Acquired), r.observed[j].Term, ms(r.observedAt[j]))
	}
}
