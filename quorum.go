package redlock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// A round sends one request to every node concurrently and decides as soon
// as the outcome is known: `need` votes won, or so many nodes failed or
// refused that `need` votes are impossible. It never waits for the slowest
// node: a node that has not answered within the per-node timeout counts as
// failed, whether or not its go-redis client honours context deadlines.

// opKind is what a round does; its String is the API's Op.
type opKind = wire.Op

const (
	opAcquire = wire.OpAcquire
	opExtend  = wire.OpExtend
	opRelease = wire.OpRelease
	opFence   = wire.OpFence // the second round of a fenced acquire: see fence.go
	// A leadership's Proclaim (election.go): a round of its own, which
	// the Observer does not see.
	opProclaim = wire.OpProclaim
)

// opOf returns the exported name of o.
func opOf(o opKind) Op { return Op(o.String()) }

// request is what a round sends to every node: its wire form (w), and
// what the round needs besides.
type request struct {
	w      wire.Request
	keys   []string  // as the caller gave them; w.Keys are on the wire
	prefix string    // WithKeyPrefix: put before every key and channel on the wire
	origin time.Time // validity is measured from here; zero: the round's start
	// floor (acquire, extend) is the lock's Lock.floor; nil otherwise.
	floor *atomic.Int64
	// unlocked (acquire) is the lock's Lock.unlocked: set by Unlock. A
	// node's pipe runs Unlock's release after our acquire there (see
	// internal/node), except where the acquire failed (a timeout): its
	// SET may still land after the release, so a failure reported after
	// unlocked is released again (round.Report).
	unlocked *atomic.Bool
	// over (extend) is the lock's Lock.over: set once the lock has
	// ended. A node that an extension healed, or on which it failed
	// (and so may still heal later), is released when its reply comes
	// after that (round.Report).
	over *atomic.Bool
	fam  *family // a path, read or permit lock (family.go); nil for a key lock
	// userToken: the token was given with WithToken, and may be reused
	// by a later lock: its failed releases are not retried.
	userToken bool
}

// prepare builds req's wire form for n nodes (wire.Request.Prepare):
// the keys on the wire with the key prefix, their fence counters, the
// lock's kind, and the release channel of an announced release.
func (req *request) prepare(n int) {
	w := &req.w
	keys := prefixKeys(req.prefix, req.keys)
	if w.Fenced || w.Op == opFence || (w.Op == opExtend && w.Fence > 0) {
		keys = fenceKeys(keys)
	}
	if f := req.fam; f != nil {
		w.Kind = wire.Kind(f.kind)
		if f.kind == kindPermit {
			w.Sem = &f.sem
		}
	}
	var ann wire.Announce
	if w.Notify || w.Op == wire.OpQueue {
		ann = wire.Announce{Channel: req.prefix + releasePrefix, PrefixLen: len(req.prefix)}
	}
	w.Prepare(n, keys, ann)
}

// exec runs req on nd alone, outside the nodes' pipes (see
// node.Node.Exec).
func (c *Client) exec(ctx context.Context, nd *node.Node, req *request) wire.Reply {
	if req.w.Argv == nil {
		req.prepare(1)
	}
	return nd.Exec(ctx, &req.w)
}

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
	res      []NodeResult // Status NodePending: no reply yet
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
func (c *Client) run(ctx context.Context, op opKind, l *Lock, ttl time.Duration) outcome {
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
	if op == opRelease && l.fam == nil && len(l.keys) == 1 && c.releaseQ != nil && c.queueable(l.keys[0], l.cfg.prefix) {
		// The release names the key's next waiter (queue.go).
		req.w.Queue = c.releaseQ
	}
	return c.runReq(ctx, req, l.cfg)
}

// lowerFloor lowers *floor (nanoseconds; 0: none) to ttl.
func lowerFloor(floor *atomic.Int64, ttl time.Duration) {
	for {
		cur := floor.Load()
		if cur != 0 && cur <= int64(ttl) {
			return
		}
		if floor.CompareAndSwap(cur, int64(ttl)) {
			return
		}
	}
}

// runReq is run for a built request.
func (c *Client) runReq(ctx context.Context, req *request, cfg *config) outcome {
	n := len(c.nodes)
	if req.w.Argv == nil {
		req.prefix = cfg.prefix
		req.prepare(n)
	}
	rd := c.newRound(ctx, req, cfg)
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
		// so that a server given twice is reported (ErrDuplicateNode)
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
	fired := len(full) > 0 && c.waitRoom(rd, full, rooms, nodeCtx, timer)
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

// waitRoom submits the requests of rd to the nodes listed in full, whose
// queues were full (see node.Node.Submit), in node order, each as soon as its
// queue has room. It gives up on a node, reporting its request failed
// and unsent, when rd is decided (a release left out is retried in the
// background), when ctx ends, or when timer, the round's
// wait, fires; it reports whether the timer fired.
func (c *Client) waitRoom(rd *round, full []int, rooms []<-chan struct{}, ctx context.Context, timer *time.Timer) (fired bool) {
	for k, i := range full {
		nd := c.nodes[i]
		j := node.Job{R: rd, Req: &rd.req.w, I: i, Ctx: ctx, Timeout: rd.timeout}
		room := rooms[k]
		var err error
		for room != nil && err == nil && !fired {
			select {
			case <-room:
				room = nd.Submit(j)
			case <-rd.done:
				err = errNotSentDecided
			case <-ctx.Done():
				err = node.NodeErr(ctx, ctx.Err())
			case <-timer.C:
				fired = true
			}
		}
		if fired {
			err = node.ErrRoomTimeout
		}
		if err != nil {
			rd.Report(i, wire.Reply{St: wire.StatusFailed, Err: err, Unsent: true})
		}
	}
	return fired
}

// errNotSentDecided is the error of a request that waited for room in
// its node's queue until its round was decided without it.
var errNotSentDecided = errors.New("redlock: not sent: the round was decided while the node's queue was full")

// newRound returns a round of req with every node pending, started now.
// Its requests are sent by the caller: runReq, or an extension batch
// (scheduler.go).
func (c *Client) newRound(ctx context.Context, req *request, cfg *config) *round {
	rd := &round{done: make(chan struct{})}
	c.initRound(rd, ctx, req, cfg, make([]NodeResult, len(c.nodes)), time.Now())
	return rd
}

// initRound sets rd up as newRound does, with res (one per node) for its
// results, started at start (before any of its requests is sent). An
// extension batch (scheduler.go) allocates its rounds and their
// results in slabs, and gives them no done channel: it asks decided.
func (c *Client) initRound(rd *round, ctx context.Context, req *request, cfg *config, res []NodeResult, start time.Time) {
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
		rd.res[i] = NodeResult{Node: i, Addr: nd.Addr}
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
			if rd.res[i].Status == NodePending && ctxErr == nil {
				// Exactly ErrNodeTimeout, unjoined: see below.
				rd.res[i].Status = NodeFailed
				rd.res[i].Err = ErrNodeTimeout
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
			// with the bare ErrNodeTimeout) are released by report when
			// their reply comes: it sees rd.won false from now on. Those
			// that replied between a win's decision and now (lateOK)
			// are released here.
			r := &rd.res[i]
			if rd.none.has(i) {
				continue
			}
			if r.Status == NodeOK || (r.Status == NodeFailed && r.Err != ErrNodeTimeout) || rd.late.has(i) {
				release = append(release, nd)
				uncertain = append(uncertain, r.Status == NodeFailed)
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
	st, err := NodeStatus(r.St), r.Err
	lat := time.Since(rd.start)
	if rd.cfg.obs != nil || rd.cfg.log != nil {
		// Before the decision, so that the replies that decided a round
		// are observed before the round is.
		rd.observeNode(i, r, lat)
	}
	if rd.op == opRelease {
		defer rd.c.flights.Done()
		if st == NodeFailed {
			// Retried in the background until the node answers
			// (retryRelease); deferred: run once rd.mu is released, and
			// queued before Close can see the release as done.
			defer rd.c.retryRelease(rd.c.nodes[i], rd.req, rd.ttl, err, 0)
		}
	}
	if rd.req.over != nil && (r.Healed || (st == NodeFailed && !r.Unsent && !r.Refused)) {
		// Deferred: after rd.healed is updated below and rd.mu
		// released.
		defer rd.undoHeal(i, st == NodeFailed)
	}
	rd.mu.Lock()
	rd.left--
	if r.Healed {
		rd.healed.add(i)
	}
	last := rd.left == 0
	if last && rd.settled != nil {
		close(rd.settled)
	}
	none := r.Unsent || r.Refused
	if st == NodeFailed && !none && rd.req.floor != nil {
		// The request may still land, later than the next one: see
		// Lock.floor.
		lowerFloor(rd.req.floor, rd.ttl)
	}
	if rd.decided {
		// Our SET may have landed after the round was lost; or, where
		// the request failed, after the lock it won was released (see
		// unlocked). A release that fails is retried (retryRelease).
		grant := rd.op == opAcquire && !none && (st == NodeOK || st == NodeFailed)
		late := grant && (!rd.won || (st == NodeFailed && rd.req.unlocked != nil && rd.req.unlocked.Load()))
		if grant && rd.won {
			rd.late.add(i) // the win may yet be cut short by ctx (runReq)
		}
		rd.mu.Unlock()
		if late {
			rd.release(rd.c.nodes[i], st == NodeFailed)
		}
		return
	}
	rd.res[i] = NodeResult{Node: i, Addr: rd.res[i].Addr, Status: st, Err: err, Latency: lat, Holder: r.Holder, HolderTTL: r.HolderTTL}
	if none {
		rd.none.add(i)
	}
	if st == NodeOK {
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

// undoHeal releases node i of an extension whose lock is over: the
// extension healed the node (or failed there, and so may have), after
// the lock's last chance to release it. Unlock hands its release to
// every node after setting Lock.over, so an extension that ran after
// that release on a node replies after Lock.over was set, and is
// released again here; one that ran before it was undone by it.
// uncertain: the extension failed, and may still land. The release runs
// on a goroutine of its own, counted for Close: Report runs on the
// node's pipe leader, which must not wait for it.
func (rd *round) undoHeal(i int, uncertain bool) {
	if rd.req.over.Load() {
		rd.c.flights.Add(1)
		go func() {
			defer rd.c.flights.Done()
			rd.release(rd.c.nodes[i], uncertain)
		}()
	}
}

// timers recycles the rounds' timers: since Go 1.23 a stopped timer can
// be reset with no stale tick to drain.
var timers = sync.Pool{New: func() any { return time.NewTimer(time.Hour) }}

func getTimer(d time.Duration) *time.Timer {
	t := timers.Get().(*time.Timer)
	t.Reset(d)
	return t
}

func putTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
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

// errorLocked builds the error of a lost round. rd.mu must be held.
func (rd *round) errorLocked(ctxErr error) *QuorumError {
	e := &QuorumError{
		Op: opOf(rd.op), Keys: rd.keys, Quorum: rd.need, OK: rd.ok,
		Nodes: append([]NodeResult(nil), rd.res...),
	}
	switch {
	case rd.op == opAcquire || rd.op == opFence:
		e.reasons = append(e.reasons, ErrNotObtained)
	case ctxErr == nil:
		// A cancelled Extend proves nothing about the lock; anything else
		// that missed its quorum cannot show the lock is held.
		e.reasons = append(e.reasons, ErrNotHeld)
	}
	if ctxErr != nil {
		e.reasons = append(e.reasons, ctxErr)
		return e
	}
	if rd.expired {
		e.reasons = append(e.reasons, ErrExpired)
		return e
	}
	var taken, absent, failed int
	for _, r := range rd.res {
		switch r.Status {
		case NodeTaken:
			taken++
		case NodeAbsent:
			absent++
		case NodeFailed:
			failed++
		}
	}
	limit := len(rd.res) - rd.need // the most nodes that may say no
	switch {
	case taken+absent > limit:
		if taken > 0 && (rd.op == opAcquire || rd.op == opFence) {
			e.reasons = append(e.reasons, ErrContended)
		}
	case failed > limit:
		e.reasons = append(e.reasons, ErrUnreachable)
	default:
		if taken > 0 && (rd.op == opAcquire || rd.op == opFence) {
			e.reasons = append(e.reasons, ErrContended)
		}
		e.reasons = append(e.reasons, ErrUnreachable)
	}
	return e
}

// releaseAll releases the lost attempt's keys on nodes concurrently and
// waits, bounded by the per-node timeout, under a context the caller's
// cancellation cannot cut short. A release that fails, or that is still
// in flight when the wait ends and then fails, is retried in the
// background (retryRelease).
func (rd *round) releaseAll(nodes []*node.Node, uncertain []bool) {
	var wg sync.WaitGroup
	for k, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rd.release(nd, uncertain[k])
		}()
	}
	// Bounded here too: go-redis may not honour the context deadline.
	node.WaitTimeout(wg.Wait, rd.timeout)
}

// release is the clean-up release of this acquire round's token on nd.
// Its request gets at least releaseTimeout: it spends no validity, and a
// release cut at a per-node timeout of a few milliseconds on a loaded
// machine would leave the key for its whole TTL. When it fails all the
// same, it is retried in the background (retryRelease).
//
// uncertain says the acquire failed on nd (a timeout, a dropped
// connection) rather than granting: it may still sit in the server's
// socket and run after this release, which went out on another
// connection. Then a release that found nothing is checked once more,
// node.RetryRecheck later.
func (rd *round) release(nd *node.Node, uncertain bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rd.parent), max(rd.timeout, releaseTimeout))
	defer cancel()
	// A clean-up, not an Unlock: no announcement, so that the releases of
	// split votes do not wake every waiter into another split.
	start := time.Now()
	req := &request{w: wire.Request{Op: opRelease, Token: rd.token, TTL: rd.ttl}, keys: rd.req.keys, prefix: rd.req.prefix, fam: rd.req.fam, userToken: rd.req.userToken}
	rd.c.flights.Add(1)
	r := rd.c.exec(ctx, nd, req)
	rd.c.flights.Done()
	if rd.cfg.obs != nil || rd.cfg.log != nil {
		rd.observeCleanup(nd, r, time.Since(start))
	}
	switch {
	case r.St == wire.StatusFailed:
		rd.c.retryRelease(nd, req, rd.ttl, r.Err, 0)
	case uncertain && r.St != wire.StatusOK:
		rd.c.retryRelease(nd, req, rd.ttl, nil, node.RetryRecheck)
	}
}

// retryRelease hands req, a release that failed on nd, to nd's
// background retries (node.Node.RetryRelease) until the key has expired
// by itself: ttl, the TTL the released token was set with, plus drift.
// err is the failure; with a positive recheck, req did not fail but
// found nothing while the request it undoes may still land. Releases of
// a closed go-redis client are dropped, and so are those of a token
// given with WithToken, which a later lock may reuse: a retry sent after
// it would delete that lock's key.
func (c *Client) retryRelease(nd *node.Node, req *request, ttl time.Duration, err error, recheck time.Duration) {
	if errors.Is(err, redis.ErrClosed) || req.userToken {
		return
	}
	nd.RetryRelease(&req.w, req.keys, time.Now().Add(ttl+drift(ttl, c.cfg.driftFactor)), recheck)
}

// nodeSet is a set of node indexes: a bit mask for the first 64, a map
// beyond (rare: a client of more than 64 nodes).
type nodeSet struct {
	bits uint64
	more map[int]bool
}

func (s *nodeSet) add(i int) {
	if i < 64 {
		s.bits |= 1 << i
		return
	}
	if s.more == nil {
		s.more = make(map[int]bool)
	}
	s.more[i] = true
}

func (s *nodeSet) has(i int) bool {
	if i < 64 {
		return s.bits&(1<<i) != 0
	}
	return s.more[i]
}

// quorumCount says whether what k of the answered nodes of n hold is on
// a quorum of need: surely (k ≥ need), or possibly (may: the nodes that
// did not answer could make up the rest). The reads (Inspect, Leader,
// Observe) judge what they saw with it; a round counts its votes in
// Report.
func quorumCount(k, answered, n, need int) (sure, may bool) {
	return k >= need, k+(n-answered) >= need
}

var (
	_ node.Round = (*round)(nil)
	_ node.Round = (*readRound)(nil)
)

// A read sends one request to every node, through the nodes' queues as a
// round's, and collects every node's answer: Inspect and an election's
// reads need each node's, not the first quorum of votes. It waits until
// every node answered, the per-node timeout passed, or ctx ended.
type readRound struct {
	start time.Time
	mu    sync.Mutex
	reps  []wire.Reply
	lats  []time.Duration // when each reply came, from start
	left  int
	all   chan struct{} // closed by the last reply
}

// Report records node i's reply.
func (r *readRound) Report(i int, rep wire.Reply) {
	lat := time.Since(r.start)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reps[i], r.lats[i] = rep, lat
	r.left--
	if r.left == 0 {
		close(r.all)
	}
}

// Lost is false: a read is never cut short by a decision.
func (r *readRound) Lost() bool { return false }

// read sends w (prepared for every node) to every node and returns their
// replies and latencies as they stand when every node answered, timeout
// passed, or ctx ended (then with ctx's error): a node still pending
// is failed with ErrNodeTimeout. Requests still queued or in flight go on
// in the nodes' pipes; their replies are dropped.
func (c *Client) read(ctx context.Context, w *wire.Request, timeout time.Duration) ([]wire.Reply, []time.Duration, error) {
	n := len(c.nodes)
	r := &readRound{start: time.Now(), reps: make([]wire.Reply, n), lats: make([]time.Duration, n), left: n, all: make(chan struct{})}
	for i := range r.reps {
		r.reps[i].St = wire.StatusPending
	}
	direct := n == 1 && c.nodes[0].RunDirect(node.Job{R: r, Req: w, Ctx: ctx, Timeout: timeout})
	timer := getTimer(timeout)
	defer putTimer(timer)
	var err error
	for i, nd := range c.nodes {
		if direct {
			break
		}
		room := nd.Submit(node.Job{R: r, Req: w, I: i, Ctx: ctx, Timeout: timeout})
		for room != nil && err == nil {
			// The node's queue is full: wait for room, within the read's
			// own wait (see node.Node.Submit).
			select {
			case <-room:
				room = nd.Submit(node.Job{R: r, Req: w, I: i, Ctx: ctx, Timeout: timeout})
			case <-timer.C:
				err = errTimedOut
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		select {
		case <-r.all:
		case <-timer.C:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err == errTimedOut {
		err = nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	reps, lats := slices.Clone(r.reps), slices.Clone(r.lats)
	for i := range reps {
		if reps[i].St == wire.StatusPending {
			reps[i] = wire.Reply{St: wire.StatusFailed, Err: ErrNodeTimeout}
			lats[i] = time.Since(r.start)
		}
	}
	return reps, lats, err
}

// errTimedOut ends a read's wait for room at its timeout: the nodes not
// reached then count as timed out.
var errTimedOut = errors.New("redlock: read timed out")
