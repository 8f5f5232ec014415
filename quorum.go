package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// A round sends one request to every node concurrently and decides as soon
// as the outcome is known: `need` votes won, or so many nodes failed or
// refused that `need` votes are impossible. It never waits for the slowest
// node: a node that has not answered within the per-node timeout counts as
// failed, whether or not its go-redis client honours context deadlines.

type round struct {
	c       *Client
	cfg     *config // the call's: observer and logger
	req     *request
	op      opKind
	keys    []string
	token   string
	ttl     time.Duration
	need    int
	timeout time.Duration
	start   time.Time
	origin  time.Time       // validity is measured from here (start, or the acquire's start)
	parent  context.Context // the caller's; releases run detached from its cancellation
	drift   float64         // the drift factor

	mu       sync.Mutex
	res      []NodeResult // Status statusPending: no reply yet
	left     int          // jobs not yet reported
	ok, bad  int
	decided  bool
	won      bool
	expired  bool
	validity time.Duration
	fences   []int64 // fenced acquire: each granting node's counter
	fence    int64   // fenced acquire: the largest counter of the winning quorum
	fsync    bool    // fenced acquire: every node of the winning quorum had that counter
	done     chan struct{}
	tick     *tick         // an extension batch's (scheduler.go), told of the decision; nil otherwise
	settled  chan struct{} // closed by the last report; nil when nobody waits for it
	// late marks the nodes of a won acquire whose grant (or failure,
	// which may have landed) was reported after the decision. Were the
	// win then cut short by ctx, they must be released too: they are in
	// no other list. A bit set, so that marking allocates nothing.
	late nodeSet
	// none marks the nodes that certainly did not apply the request: it
	// was never sent, or refused before sending. Nothing to release.
	none nodeSet
	// healed marks the nodes of an extension that put the lock back
	// (wire.Reply.Healed), whenever they replied: released should the
	// lock be over (Lock.dropHealed).
	healed nodeSet
	hand   *handTally // a hand-on's (wire.Request.Prev, handon.go); nil otherwise
}

// outcome is what a round decided.
type outcome struct {
	won      bool
	validity time.Duration // acquire/extend: ttl - elapsed - drift at the decision
	start    time.Time
	err      *QuorumError // nil when won
	rd       *round

	// Fenced acquire: the fencing token (largest counter of the winning
	// quorum) and whether every node of that quorum already holds it, in
	// which case no second round is needed (see fence.go).
	fence       int64
	fenceSynced bool
}

// run fans the request out and blocks until the outcome is decided, the
// per-node timeout passes, or ctx is done. An acquire is fenced when cfg
// says so; a release is announced to waiters (see pubsub.go).
// An acquire or extend passes l's floor (see Lock.floor), lowered to
// ttl when a request fails and so may still land later.
func runRound(ctx context.Context, c *Client, op opKind, l *Lock, ttl time.Duration) outcome {
	return runReq(ctx, c, roundReq(c, op, l, ttl), l.cfg)
}

// roundReq builds the request of runRound.
func roundReq(c *Client, op opKind, l *Lock, ttl time.Duration) *request {
	req := &request{
		w: wire.Request{
			Op: op, Token: l.token, TTL: ttl,
			Fenced: op == opAcquire && l.cfg.fencing,
			Notify: op == opRelease,
		},
		keys: l.keys,
		fam:  l.fam,

		userToken: l.cfg.token != "",
	}
	if op != opRelease {
		req.floor = &l.floor
	}
	if op == opAcquire {
		req.unlocked = &l.unlocked
		req.w.Intent = l.intent
	}
	if op == opExtend {
		// A node that lost the lock is healed with what the holder had
		// there (extend/kinds.lua): its value, its fencing token.
		req.w.Token, req.w.Fence, req.over = l.heldValue(), l.fence, &l.over
	}
	if op == opRelease && l.fam == nil && len(l.keys) == 1 && c.releaseQ != nil && queueable(c, l.keys[0], l.cfg.prefix) {
		// The release names the key's next waiter (queue.go).
		req.w.Queue = c.releaseQ
	}
	return req
}

// runReq is run for a built request.
func runReq(ctx context.Context, c *Client, req *request, cfg *config) outcome {
	n := len(c.nodes)
	if req.w.Argv == nil {
		req.prefix = cfg.prefix
		req.prepare(n)
	}
	rd := newRound(ctx, c, req, cfg)
	op := req.w.Op
	if req.w.Fenced {
		rd.fences = make([]int64, n)
	}
	nodeCtx := ctx
	if op == opRelease {
		// Unlock is a clean-up: the caller's cancellation must not leave
		// our keys behind. The round is still bounded by the timeout.
		nodeCtx = context.WithoutCancel(ctx)
	}
	wait := rd.timeout
	if op == opRelease {
		// A release does not spend validity: it waits at least
		// releaseTimeout for its quorum. It does not wait for the other
		// nodes: every node more costs the slowest node's time (measured:
		// +200µs p50 uncontended, 3x with one node 20ms slower). A
		// process about to exit calls Close, which waits for them.
		wait = max(wait, releaseTimeout)
		c.flights.Add(n)
	}
	if c.first.CompareAndSwap(false, true) {
		// The client's first round waits for every node's first contact,
		// so that a server given twice is reported ("duplicate node")
		// before anything is won; later a duplicate is still refused on
		// its first contact, and never votes twice. A first contact
		// dials (TCP, TLS, AUTH) and so gets firstContactTimeout if that
		// is longer than the per-node timeout.
		rd.settled = make(chan struct{})
		wait = max(wait, firstContactTimeout)
	}
	// The round waits for the nodes for the per-node timeout (the timer
	// below), not for the slowest. Their requests are not cut short at
	// that timeout: they run under the caller's context (detached for a
	// release), bounded by the go-redis client's own timeouts, so that a
	// first contact that must dial (TLS, a slow network) completes for
	// the next round's benefit, and a late reply is still handled:
	// report releases a late grant of a lost acquisition. The requests
	// run on the nodes' pipe leaders, goroutines of the client's group
	// (Close waits for them): a round counts votes, not goroutines.
	//
	// A Client of one node whose pipe is idle runs the request on the
	// caller's goroutine (node.Node.RunDirect), bounded by the per-node
	// timeout there; on more nodes the others' hand-offs would cost the
	// same, and the round waits for the slowest anyway.
	direct := n == 1 && rd.settled == nil &&
		c.nodes[0].RunDirect(node.Job{R: rd, Req: &req.w, Ctx: nodeCtx, Timeout: rd.timeout})
	if direct {
		select {
		case <-rd.done:
			if op == opRelease && req.fam == nil {
				c.hub.wakeLocal(req.keys) // released: see below
			}
			return rd.finish(nil)
		default: // handed to a leader: waited for below
		}
	}
	timer := getTimer(wait)
	var full []int
	var rooms []<-chan struct{}
	for i, nd := range c.nodes {
		if direct {
			break
		}
		if room := nd.Submit(node.Job{R: rd, Req: &req.w, I: i, Ctx: nodeCtx, Timeout: rd.timeout}); room != nil {
			full, rooms = append(full, i), append(rooms, room)
		}
	}
	// The timer also bounds the wait for room in full queues (waitRoom).
	fired := len(full) > 0 && waitRoom(c, rd, full, rooms, nodeCtx, timer)
	if op == opRelease && req.fam == nil && !direct && !fired {
		// The release is in every node's pipe: a waiting Lock of this
		// Client woken now queues its attempt behind it on each node,
		// often into the same batch, instead of waiting for the nodes'
		// announcements (see hub.wakeLocal).
		c.hub.wakeLocal(req.keys)
	}

	var ctxErr error
	if !fired {
		select {
		case <-rd.done:
			if rd.settled != nil {
				select {
				case <-rd.settled:
				case <-timer.C:
				case <-nodeCtx.Done():
				}
				// tryLock refuses a win if a duplicate turned up.
			}
		case <-timer.C:
		case <-nodeCtx.Done(): // never for a release
			ctxErr = ctx.Err()
		}
	}
	putTimer(timer)
	return rd.finish(ctxErr)
}

// newRound returns a round of req with every node pending, started now.
// Its requests are sent by the caller: runReq, or an extension batch
// (scheduler.go).
func newRound(ctx context.Context, c *Client, req *request, cfg *config) *round {
	rd := &round{done: make(chan struct{})}
	initRound(c, rd, ctx, req, cfg, make([]NodeResult, len(c.nodes)), time.Now())
	return rd
}

// initRound sets rd up as newRound does, with res (one per node) for its
// results, started at start (before any of its requests is sent). An
// extension batch (scheduler.go) allocates its rounds and their
// results in slabs, and gives them no done channel: it asks decided.
func initRound(c *Client, rd *round, ctx context.Context, req *request, cfg *config, res []NodeResult, start time.Time) {
	keys := req.keys
	need := c.need
	if req.fam != nil {
		keys = req.fam.shown // errors and events name the lock, not its keys
		if req.fam.need > 0 {
			need = req.fam.need
		}
	}
	rd.c, rd.cfg, rd.req, rd.op, rd.keys, rd.token, rd.ttl = c, cfg, req, req.w.Op, keys, req.w.Token, req.w.TTL
	rd.need = need
	rd.timeout = cfg.timeoutFor(req.w.TTL)
	rd.drift = cfg.driftFactor
	rd.res = res
	rd.left = len(res)
	rd.parent = ctx
	rd.start = start
	rd.origin = req.origin
	if rd.origin.IsZero() {
		rd.origin = rd.start
	}
	for i, nd := range c.nodes {
		// All set before any reply can be reported and read them.
		rd.res[i] = NodeResult{Node: i, Addr: nd.Addr, Status: statusPending}
	}
	if req.w.Prev != "" {
		rd.hand = &handTally{nodes: append([]NodeResult(nil), rd.res...), decided: make(chan struct{})}
	}
}

// isDecided reports whether rd's outcome is known.
func (rd *round) isDecided() bool {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rd.decided
}

// finish decides a round whose wait is over: nodes still pending count
// as timed out (unless ctxErr, the caller's context ended), the outcome
// is observed, and a lost acquire is released where it may have landed.
func (rd *round) finish(ctxErr error) outcome {
	c, cfg, op := rd.c, rd.cfg, rd.op
	rd.mu.Lock()
	if !rd.decided {
		rd.decided = true
		for i := range rd.res {
			if rd.res[i].Status == statusPending && ctxErr == nil {
				// Exactly errNodeTimeout, unjoined: see below.
				rd.res[i].Status = statusFailed
				rd.res[i].Err = errNodeTimeout
				rd.res[i].Latency = time.Since(rd.start)
			}
		}
	}
	out := outcome{won: rd.won && ctxErr == nil, validity: rd.validity, start: rd.start, rd: rd,
		fence: rd.fence, fenceSynced: rd.fsync}
	if out.won {
		rd.mu.Unlock()
		if cfg.obs != nil {
			rd.observeRound(out)
		}
		return out
	}
	rd.won = false // a cancelled win is released like a loss
	out.err = rd.errorLocked(ctxErr)
	var release []*node.Node
	var uncertain []bool // the acquire failed there: it may land later
	if op == opAcquire {
		for i, nd := range c.nodes {
			// Nodes still in flight (pending, or marked timed out above
			// with the bare errNodeTimeout) are released by report when
			// their reply comes: it sees rd.won false from now on. Those
			// that replied between a win's decision and now (lateOK)
			// are released here.
			r := &rd.res[i]
			if rd.none.has(i) {
				continue
			}
			if r.Status == statusOK || (r.Status == statusFailed && r.Err != errNodeTimeout) || rd.late.has(i) {
				release = append(release, nd)
				uncertain = append(uncertain, r.Status == statusFailed)
			}
		}
	}
	rd.mu.Unlock()
	if cfg.obs != nil {
		rd.observeRound(out)
	}
	if len(release) > 0 {
		rd.releaseAll(release, uncertain)
	}
	return out
}

// Report records node i's reply and decides the round when it can.
func (rd *round) Report(i int, r wire.Reply) {
	st, err := statusOf(r.St), r.Err
	lat := time.Since(rd.start)
	if rd.cfg.obs != nil || rd.cfg.log != nil {
		// Before the decision, so that the replies that decided a round
		// are observed before the round is.
		rd.observeNode(i, r, lat)
	}
	if rd.op == opRelease {
		defer rd.c.flights.Done()
		if st == statusFailed {
			// Retried in the background until the node answers
			// (retryRelease); deferred: run once rd.mu is released, and
			// queued before Close can see the release as done.
			defer retryRelease(rd.c, rd.c.nodes[i], rd.req, rd.ttl, err, 0)
		}
	}
	if rd.req.over != nil && (r.Healed || (st == statusFailed && !r.Unsent && !r.Refused)) {
		// Deferred: after rd.healed is updated below and rd.mu
		// released.
		defer rd.undoHeal(i, st == statusFailed)
	}
	if rd.hand != nil && (st != statusOK || r.Free) {
		// The hand-on did not take the key from its holder here.
		defer rd.releasePrev(i, st == statusFailed && !r.Unsent && !r.Refused)
	}
	rd.mu.Lock()
	rd.left--
	if rd.hand != nil {
		rd.countHand(i, st, r.Free, err, lat)
	}
	if r.Healed {
		rd.healed.add(i)
	}
	last := rd.left == 0
	if last && rd.settled != nil {
		close(rd.settled)
	}
	none := r.Unsent || r.Refused
	if st == statusFailed && !none && rd.req.floor != nil {
		// The request may still land, later than the next one: see
		// Lock.floor.
		lowerFloor(rd.req.floor, rd.ttl)
	}
	if rd.decided {
		// Our SET may have landed after the round was lost; or, where
		// the request failed, after the lock it won was released (see
		// unlocked). A release that fails is retried (retryRelease).
		grant := rd.op == opAcquire && !none && (st == statusOK || st == statusFailed)
		late := grant && (!rd.won || (st == statusFailed && rd.req.unlocked != nil && rd.req.unlocked.Load()))
		if grant && rd.won {
			rd.late.add(i) // the win may yet be cut short by ctx (runReq)
		}
		rd.mu.Unlock()
		if late {
			rd.release(rd.c.nodes[i], st == statusFailed)
		}
		return
	}
	rd.res[i] = NodeResult{Node: i, Addr: rd.res[i].Addr, Status: st, Err: err, Latency: lat, Holder: r.Holder, HolderTTL: r.HolderTTL}
	if none {
		rd.none.add(i)
	}
	if st == statusOK {
		rd.ok++
		if rd.fences != nil {
			rd.fences[i] = r.Fence
		}
	} else {
		rd.bad++
	}
	switch {
	case rd.ok >= rd.need:
		rd.decided = true
		rd.won = true
		if rd.fences != nil {
			rd.fence, rd.fsync = quorumFence(rd.res, rd.fences)
		}
		if rd.op != opRelease && rd.op != opProclaim {
			rd.validity = validity(rd.ttl, lat+rd.start.Sub(rd.origin), rd.drift)
			if rd.validity <= 0 {
				rd.won, rd.expired = false, true
			}
		}
		if rd.done != nil {
			close(rd.done)
		}
	case rd.bad > len(rd.res)-rd.need:
		rd.decided = true
		if rd.done != nil {
			close(rd.done)
		}
	}
	if rd.decided && rd.tick != nil {
		rd.tick.decided()
	}
	rd.mu.Unlock()
}

// Lost reports whether rd is an acquire that was decided and lost, so
// that its queued requests need not be sent.
func (rd *round) Lost() bool {
	if rd.op != opAcquire {
		return false
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rd.decided && !rd.won
}

var (
	_ node.Round = (*round)(nil)
	_ node.Round = (*readRound)(nil)
)
