package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// A node's requests go through its pipe. While a request (or a batch) is
// in flight to a node, the requests that rounds hand to that node queue
// up, and the next batch sends all of them in one go-redis pipeline: one
// write and one read for the lot, on our side and on the server's. The
// goroutine that runs a node's requests (its leader) is one of the
// client's errgroup (Close waits for the group). It keeps going until the
// queue is empty, so queued requests cost neither a goroutine nor a
// channel; then it parks for up to LeaderLinger, and the next request of
// an idle node wakes it rather than start a goroutine. A fresh goroutine
// per request cost more than the wake-up: its stack grew (copied) two or
// three times in go-redis on every request, 20% of the client's CPU in
// an uncontended Lock+Unlock. A leader idle for LeaderLinger ends, so an
// idle client, even one never closed, keeps no goroutine.
//
// A pipe also orders a node's requests: they are executed in the order
// rounds handed them over, because a batch is sent only after the
// previous one's replies arrived. An Unlock's release therefore never
// overtakes the acquire it undoes on a node where that acquire was still
// in flight, and needs no second release to catch it (see round.report).
// The one exception is a request that failed (a timeout, a dropped
// connection): it may still be in the server's socket buffer when the
// next request goes out on another connection. Such requests are
// treated as possibly landed, and released again.

// Round is what a job reports its node's reply to: one round of the
// host (the quorum).
type Round interface {
	// Report records node i's reply, once per job.
	Report(i int, r wire.Reply)
	// Lost reports whether the round is an acquire decided and lost, so
	// that its queued requests need not be sent.
	Lost() bool
}

// Job is one node's part of a round, or a batch of extensions (Batch).
type Job struct {
	R       Round
	Req     *wire.Request // R's request, prepared for every node
	B       *Batch        // a batch: R and Req are nil
	I       int           // the node's index in the round
	Ctx     context.Context
	Timeout time.Duration // the round's per-node timeout; a batch's first lock's
	// Resend: sent before on the direct path, on a connection closed
	// under it (RunDirect); sent again with pristine arguments.
	Resend bool
}

// pipe queues the jobs of one node; see above.
type pipe struct {
	mu     sync.Mutex
	busy   bool  // a leader, or a direct caller (direct), is running
	parked bool  // a leader waits for work on wake
	queue  []Job // waiting for the next batch
	spare  []Job // the previous batch's slice, for reuse
	// wake hands work to a parked leader: sent once by the submit that
	// clears parked, so that it never blocks (capacity 1).
	wake chan struct{}
	// since is when the leader took up the work it runs now (busy): the
	// node has not answered it for time.Since(since).
	since time.Time
	// room is closed when the leader takes the queue up, for the rounds
	// that found it full (see submit); made by the first of them.
	room chan struct{}
	// direct: the caller that holds busy runs its own request (RunDirect,
	// direct.go) on dc, which nothing else drops meanwhile.
	direct    bool
	dc        directConn
	slowUntil time.Time // no direct path before then
}

// A node's queue is bounded by maxQueue, for memory: a round whose
// request finds that many waiting waits for room (waitRoom) within its
// own wait for the node, its context, and until it is decided. Room
// comes each time the leader takes the queue up, which it does as soon
// as the node answers the request in flight: a node that answers, if
// slowly, is never counted failed for the queue's length. Only a node
// that has not answered for the round's per-node timeout, with a full
// queue, fails the request at once (silentError): it could not answer
// within that timeout any more. Extension batches of the scheduler
// (Batch) do not wait, which would hold every other lock's
// extensions up: they queue past the bound, a few per tick and node.

// LeaderLinger is how long an idle node's leader waits for the next
// request before it ends.
const LeaderLinger = 250 * time.Millisecond

// Queued returns how many requests wait in nd's queue.
func (nd *Node) Queued() int {
	nd.pipe.mu.Lock()
	defer nd.pipe.mu.Unlock()
	return len(nd.pipe.queue)
}

// Submit hands j to nd: to the running leader's next batch when nd is
// busy, else to its parked leader, else to a new leader on a goroutine
// of the client's group. Rounds call it in node order from their own
// goroutine, so a node sees a caller's requests in the order the caller
// made them.
//
// When nd's queue is full (see maxQueue) it returns a channel, closed
// when there may be room, and j is not taken: the round waits and calls
// submit again (waitRoom). A full queue behind a request that nd has
// not answered for j's per-node timeout fails j at once, unsent.
func (nd *Node) Submit(j Job) (full <-chan struct{}) {
	p := &nd.pipe
	p.mu.Lock()
	if p.busy {
		if len(p.queue) >= maxQueue {
			if silent := time.Since(p.since); silent >= j.Timeout {
				n := len(p.queue)
				p.mu.Unlock()
				j.fail(nd, &silentError{silent: silent, queued: n})
				return nil
			}
			if j.B == nil {
				if p.room == nil {
					p.room = make(chan struct{})
				}
				room := p.room
				p.mu.Unlock()
				return room
			}
		}
		p.queue = append(p.queue, j)
		p.mu.Unlock()
		return nil
	}
	p.busy = true
	p.since = time.Now()
	if p.parked {
		p.parked = false
		p.queue = append(p.queue, j)
		p.mu.Unlock()
		p.wake <- struct{}{}
		return nil
	}
	if p.wake == nil {
		p.wake = make(chan struct{}, 1)
	}
	p.mu.Unlock()
	nd.h.Spawn(func() error {
		nd.lead(j, true)
		return nil // a node's failure is an outcome, not a group error
	}, true)
	return nil
}

// fail reports j failed on nd with err, unsent.
func (j Job) fail(nd *Node, err error) {
	r := wire.Reply{St: wire.StatusFailed, Err: err, Unsent: true}
	if j.B != nil {
		j.B.fail(nd, r)
		return
	}
	j.R.Report(j.I, r)
}

// lead runs j (if run; by value: a pointer would move every Submit's j
// to the heap), then batches of queued jobs until none is left, then
// parks (see park) and starts over when woken.
func (nd *Node) lead(j Job, run bool) {
	p := &nd.pipe
	var lc leaderConn // the leader's own connection (leaderconn.go)
	defer lc.drop()
	if run {
		nd.runJob(&lc, j)
	}
	var idle parkTimer // park's
	for {
		p.mu.Lock()
		batch := p.queue
		if len(batch) == 0 {
			p.busy = false
			if nd.isClosed() {
				// After Close: a leader of the last Extends and Unlocks
				// (see spawn), which must not wait for more.
				p.mu.Unlock()
				idle.stop()
				return
			}
			p.parked = true
			p.mu.Unlock()
			if !nd.park(p, &idle, &lc, time.Now()) {
				return
			}
			continue
		}
		p.queue, p.spare = p.spare[:0], nil
		p.since = time.Now()
		if p.room != nil {
			close(p.room)
			p.room = nil
		}
		p.mu.Unlock()

		if len(batch) == 1 {
			nd.runJob(&lc, batch[0])
		} else {
			nd.runBatch(&lc, batch)
		}
		clear(batch) // drop the rounds for the collector

		p.mu.Lock()
		if p.spare == nil {
			p.spare = batch[:0]
		}
		p.mu.Unlock()
	}
}

// park waits, parked since last, for a submit to hand the leader work
// (true), for up to LeaderLinger, or until Close (false: the leader
// ends, and the next submit starts a new one).
//
// The leader's own connection, if it holds one, goes back to the pool
// once the leader has been parked for leaderConnIdle, which the timer
// checks every leaderConnCheck: a parked leader that kept it for the
// whole of LeaderLinger kept it from the pool's other users (with a few
// Clients on one small go-redis pool, the parked leaders of some would
// take every connection, and another's requests wait past the node
// timeout).
//
// One timer serves both (see parkTimer), re-armed only when it fires
// or when a connection is taken: resetting it on every park would cost
// more than the park, and so did a second timer in the select, checked
// every 5ms (about 15% more p50 on back-to-back calls; see
// leaderConnCheck for the check's own cost).
func (nd *Node) park(p *pipe, idle *parkTimer, lc *leaderConn, last time.Time) bool {
	t := idle.arm(lc.holds())
	for {
		select {
		case <-p.wake:
			return true
		case <-nd.h.Closed:
		case <-t.C:
			parked := time.Since(last)
			if lc.holds() && parked >= leaderConnIdle {
				lc.drop() // idle: see leaderConn
			}
			if d := LeaderLinger - parked; d > 0 {
				idle.reset(d, lc.holds())
				continue
			}
			// Spent: armed again at once, also when the leader goes on
			// below, or its next park would wait without one.
			idle.reset(LeaderLinger, false)
		}
		p.mu.Lock()
		if !p.parked {
			// A submit handed us work at the same moment; its wake is
			// sent or on its way.
			p.mu.Unlock()
			<-p.wake
			return true
		}
		p.parked = false
		p.mu.Unlock()
		idle.stop()
		return false
	}
}

// parkTimer is a leader's park timer: due at LeaderLinger after a park
// began, or sooner, every leaderConnCheck, while the leader holds a
// connection of its own.
type parkTimer struct {
	t  *time.Timer
	at time.Time // when it is due
}

// arm returns the timer, made on first use, brought forward to
// leaderConnCheck from now if the leader holds a connection (held) and
// it is due later than that.
func (pt *parkTimer) arm(held bool) *time.Timer {
	if pt.t == nil {
		pt.t = time.NewTimer(LeaderLinger)
		pt.reset(LeaderLinger, held)
	} else if held && time.Until(pt.at) > leaderConnCheck {
		pt.reset(leaderConnCheck, false)
	}
	return pt.t
}

// reset arms the timer for d, or for leaderConnCheck if that is sooner
// and the leader holds a connection.
func (pt *parkTimer) reset(d time.Duration, held bool) {
	if held {
		d = min(d, leaderConnCheck)
	}
	pt.t.Reset(d)
	pt.at = time.Now().Add(d)
}

func (pt *parkTimer) stop() {
	if pt.t != nil {
		pt.t.Stop()
	}
}

// runJob runs one job on its own and reports it to its round.
func (nd *Node) runJob(lc *leaderConn, j Job) {
	if j.B != nil {
		nd.execBatch(j.B) // through the pool: a batch alone is rare
		return
	}
	if j.R.Lost() {
		j.R.Report(j.I, wire.Reply{St: wire.StatusFailed, Err: errRoundLost, Unsent: true})
		return
	}
	j.R.Report(j.I, nd.execVia(j.Ctx, j.Req, lc, j.Resend))
}

// runBatch sends jobs in one pipeline and reports each to its round, in
// order. A job whose ctx is already done is reported failed unsent.
func (nd *Node) runBatch(lc *leaderConn, jobs []Job) {
	if !nd.identified.Load() {
		// Rare (a node not reached yet): the single path identifies it.
		for _, j := range jobs {
			nd.runJob(lc, j)
		}
		return
	}
	reps := make([]wire.Reply, len(jobs))
	sent := make([]time.Time, len(jobs))
	cmds := make([]*redis.Cmd, len(jobs))
	live := 0
	for k, j := range jobs {
		if err := j.Ctx.Err(); err != nil {
			reps[k] = wire.Reply{St: wire.StatusFailed, Err: NodeErr(j.Ctx, err), Unsent: true}
			continue
		}
		if j.B != nil {
			var rep *wire.Reply
			if sent[k], rep = nd.before(batchProbe); rep != nil {
				reps[k] = *rep
				continue
			}
			cmds[k] = redis.NewCmd(j.Ctx, wire.BatchArgs(j.B.Argv, false)...)
			live++
			continue
		}
		if j.R.Lost() {
			reps[k] = wire.Reply{St: wire.StatusFailed, Err: errRoundLost, Unsent: true}
			continue
		}
		var rep *wire.Reply
		if sent[k], rep = nd.before(j.Req); rep != nil {
			reps[k] = *rep
			continue
		}
		args := j.Req.Args(nd.Idx)
		if j.Resend {
			args = j.Req.Pristine()
		}
		cmds[k] = redis.NewCmd(j.Ctx, args...)
		live++
	}
	if live > 0 {
		nd.sendBatch(lc, jobs, cmds, reps, sent)
	}
	for k, j := range jobs {
		switch {
		case j.B == nil:
			j.R.Report(j.I, reps[k])
		case cmds[k] == nil: // refused before sending
			j.B.fail(nd, reps[k])
		default:
			// Delivered by sendBatch.
		}
	}
}

// sendBatch pipelines the non-nil cmds and fills reps. A script that the
// node no longer has cached (NOSCRIPT, after a restart or on a node that
// never ran it) is run again with EVAL, in its place in the order,
// unless a later request of the same batch with the same token already
// ran: running the earlier one after it could, say, set a key that the
// later release has already deleted. Such a request is reported failed
// instead (it did nothing on the node). A later request that got
// NOSCRIPT too did nothing yet, and is run again after this one, so the
// order holds: an Extend and an Unlock of one lock batched on a node
// that has neither script both run. Likewise a refused setnx acquire
// runs its script (setReply) only when no later request with its token
// ran, and is reported taken otherwise. The batch goes through the
// leader's own connection lc, and once more through the pool when that
// connection was closed under it (see leaderConn).
func (nd *Node) sendBatch(lc *leaderConn, jobs []Job, cmds []*redis.Cmd, reps []wire.Reply, sent []time.Time) {
	// The batch serves several rounds: it must not fail because one of
	// their contexts ends (each round is bounded by its own timer), nor
	// carry one caller's values into the others' requests: a go-redis
	// tracing hook would put the whole pipeline, with every caller's
	// keys and tokens, into the first caller's trace. A batch of one
	// caller keeps that caller's values.
	var first context.Context
	shared := false
	for k := range cmds {
		if cmds[k] == nil {
			continue
		}
		if first == nil {
			first = jobs[k].Ctx
		} else if jobs[k].Ctx != first {
			shared = true
		}
	}
	bctx := context.WithoutCancel(first)
	if shared {
		bctx = context.Background()
	}
	// With replica sync, one WAIT after the batch covers each of its
	// writes (replicas.go); a request sent again below sends its own.
	wait := false
	for k, cmd := range cmds {
		req := jobs[k].Req
		if jobs[k].B != nil {
			req = batchProbe
		}
		if cmd != nil && nd.waits(req) {
			wait = true
			break
		}
	}
	var batchAcks acks
	send := func(s sender) (p any) {
		defer func() { p = recover() }()
		pl := s.Pipeline()
		for _, cmd := range cmds {
			if cmd != nil {
				_ = pl.Process(bctx, cmd)
			}
		}
		var w *redis.IntCmd
		if wait {
			w = waitIn(bctx, pl, nd.replicas)
		}
		_, _ = pl.Exec(bctx)
		if w != nil {
			batchAcks = acksOf(w)
		}
		return nil
	}
	s, own := lc.get(nd)
	panicked := send(s)
	if own && panicked == nil && closedUnder(firstErr(cmds)) {
		lc.drop()
		for k, cmd := range cmds {
			switch {
			case cmd == nil:
			case jobs[k].B != nil:
				cmds[k] = redis.NewCmd(jobs[k].Ctx, wire.BatchArgs(jobs[k].B.Argv, false)...)
			default:
				cmds[k] = redis.NewCmd(jobs[k].Ctx, jobs[k].Req.Pristine()...)
			}
		}
		s, own = nd.C, false
		panicked = send(s)
	}
	if own && panicked != nil {
		lc.drop()
	}
	for k, cmd := range cmds {
		if cmd == nil {
			continue
		}
		if b := jobs[k].B; b != nil {
			if panicked != nil {
				b.fail(nd, wire.Reply{St: wire.StatusFailed, Err: fmt.Errorf("redlock: malformed reply: go-redis panicked: %v", panicked)})
				continue
			}
			res, err := cmd.Result()
			a := batchAcks
			if wire.IsNoScript(err) {
				// Extensions only touch what exists: out of order is
				// harmless.
				res, err = nd.do(bctx, nd.C, batchProbe, wire.BatchArgs(b.Argv, true), &a)
			}
			nd.deliver(b, res, err, sent[k], a)
			if own && err != nil {
				// The rest of the batch has its replies already; what
				// it still sends (a script run again) goes through the
				// pool, not the connection given back.
				lc.drop()
				s, own = nd.C, false
			}
			continue
		}
		req := jobs[k].Req
		if panicked != nil {
			reps[k] = wire.Reply{St: wire.StatusFailed, Err: fmt.Errorf("redlock: malformed reply: go-redis panicked: %v", panicked)}
			continue
		}
		res, err := cmd.Result()
		a := batchAcks
		if wire.IsNoScript(err) {
			if !req.LateHarmless() && laterSameTokenRan(jobs, cmds, k) {
				reps[k] = wire.Reply{St: wire.StatusFailed, Err: fmt.Errorf("redlock: script not cached on the node and not retried out of order: %w", err)}
				continue
			}
			res, err = nd.eval(jobs[k].Ctx, s, req, &a)
		}
		if req.Setnx {
			if err == redis.Nil && laterSameTokenRan(jobs, cmds, k) {
				// Refused, and a later request with our token (the
				// lock's release) already ran: what the key held is
				// settled, and the script would run out of order.
				reps[k] = wire.Reply{St: wire.StatusTaken}
				continue
			}
			res, err = nd.setReply(jobs[k].Ctx, s, req, res, err, &a)
		}
		reps[k] = nd.synced(req, nd.after(jobs[k].Ctx, req, res, err, sent[k]), a)
		if own && connBroken(reps[k]) {
			lc.drop() // as above
			s, own = nd.C, false
		}
	}
}

// firstErr returns the error of the first non-nil command.
func firstErr(cmds []*redis.Cmd) error {
	for _, cmd := range cmds {
		if cmd != nil {
			return cmd.Err()
		}
	}
	return nil
}

// laterSameTokenRan reports whether a request after k in the batch was
// sent with k's token and may have run (a read has no token, and no
// order to keep): any reply but NOSCRIPT, which
// says the node did nothing (see sendBatch). The later requests' replies
// are still those of the pipeline when sendBatch asks, as it goes in
// order.
func laterSameTokenRan(jobs []Job, cmds []*redis.Cmd, k int) bool {
	for m := k + 1; m < len(jobs); m++ {
		if cmds[m] != nil && jobs[m].Req != nil && jobs[k].Req.Token != "" && jobs[m].Req.Token == jobs[k].Req.Token && !wire.IsNoScript(cmds[m].Err()) {
			return true
		}
	}
	return false
}

// maxQueue bounds the requests of rounds that wait for one node's
// leader, for memory: see pipe.
const maxQueue = 4096

// silentError is the error of a request refused because its node has
// not answered for the per-node timeout and maxQueue requests already
// wait for it. It matches ErrNodeTimeout.
type silentError struct {
	silent time.Duration
	queued int
}

func (e *silentError) Error() string {
	return fmt.Sprintf("redlock: node timeout: not sent: the node has not answered for %v, and %d requests wait for it", e.silent.Round(time.Millisecond), e.queued)
}

func (e *silentError) Unwrap() error { return ErrNodeTimeout }

// ErrRoomTimeout is the error of a request that found its node's queue
// full and no room came within the round's wait.
var ErrRoomTimeout = fmt.Errorf("%w: not sent: the node's queue (%d requests) stayed full", ErrNodeTimeout, maxQueue)

// errRoundLost is the error of a queued acquire whose round was lost
// before its turn came: it is not sent.
var errRoundLost = errors.New("redlock: not sent: the round was already lost")
