package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// A round sends one request to every node concurrently and decides as soon
// as the outcome is known: `need` votes won, or so many nodes failed or
// refused that `need` votes are impossible. It never waits for the slowest
// node: a node that has not answered within the per-node timeout counts as
// failed, whether or not its go-redis client honours context deadlines.

type opKind uint8

const (
	opAcquire opKind = iota
	opExtend
	opRelease
	opFence // the second round of a fenced acquire: see fence.go
)

func (o opKind) String() string {
	switch o {
	case opAcquire:
		return "lock"
	case opExtend:
		return "extend"
	case opFence:
		return "fence"
	}
	return "unlock"
}

// request is what a round sends to every node.
type request struct {
	op     opKind
	keys   []string
	token  string
	ttl    time.Duration
	fenced bool      // acquire: also raise the fence counters (acquire_fenced.lua)
	fence  int64     // opFence: the fencing token to raise the counters to
	notify bool      // release: announce it on the release channel (pubsub.go)
	origin time.Time // validity is measured from here; zero: the round's start
	fkeys  []string  // keys followed by their fence counters, when fenced or opFence
}

// reply is one node's answer.
type reply struct {
	st    NodeStatus
	fence int64 // fenced acquire: the node's counter after the grant
	err   error
}

type round struct {
	c        *Client
	req      *request
	op       opKind
	keys     []string
	token    string
	ttl      time.Duration
	need     int
	timeout  time.Duration
	start    time.Time
	origin   time.Time       // validity is measured from here (start, or the acquire's start)
	detached context.Context // for releases the caller cannot cancel

	mu       sync.Mutex
	res      []NodeResult
	inflight []bool
	ok, bad  int
	decided  bool
	won      bool
	expired  bool
	validity time.Duration
	fences   []int64 // fenced acquire: each granting node's counter
	fence    int64   // fenced acquire: the largest counter of the winning quorum
	fsync    bool    // fenced acquire: every node of the winning quorum had that counter
	done     chan struct{}

	// unlocked is set by Unlock on the lock this acquire round won: a
	// grant that arrives after it is released at once, so that a SET
	// overtaken by Unlock's DEL leaves no key behind.
	unlocked atomic.Bool
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
func (c *Client) run(ctx context.Context, op opKind, keys []string, token string, ttl time.Duration, cfg *config) outcome {
	return c.runReq(ctx, &request{
		op: op, keys: keys, token: token, ttl: ttl,
		fenced: op == opAcquire && cfg.fencing,
		notify: op == opRelease,
	}, cfg)
}

// runReq is run for a prepared request.
func (c *Client) runReq(ctx context.Context, req *request, cfg *config) outcome {
	op, keys, token, ttl := req.op, req.keys, req.token, req.ttl
	if (req.fenced || op == opFence) && req.fkeys == nil {
		req.fkeys = fenceKeys(keys)
	}
	if !c.allIdentified.Load() {
		c.identifyAll(ctx, cfg.timeoutFor(ttl))
	}
	n := len(c.nodes)
	rd := &round{
		c: c, req: req, op: op, keys: keys, token: token, ttl: ttl,
		need:     c.need,
		timeout:  cfg.timeoutFor(ttl),
		detached: context.WithoutCancel(ctx),
		res:      make([]NodeResult, n),
		inflight: make([]bool, n),
		done:     make(chan struct{}),
	}
	if req.fenced {
		rd.fences = make([]int64, n)
	}
	cfgCopy := *cfg
	nodeCtx := ctx
	if op == opRelease {
		// Unlock is a clean-up: the caller's cancellation must not leave
		// our keys behind. Each node call is still bounded by the timeout.
		nodeCtx = rd.detached
	}
	rd.start = time.Now()
	rd.origin = req.origin
	if rd.origin.IsZero() {
		rd.origin = rd.start
	}
	for i, nd := range c.nodes {
		// All set before any reply can be reported and read them.
		rd.res[i] = NodeResult{Node: i, Addr: nd.addr}
		rd.inflight[i] = true
	}
	var g errgroup.Group
	for i, nd := range c.nodes {
		g.Go(func() error {
			cctx, cancel := context.WithTimeout(nodeCtx, rd.timeout)
			r := c.exec(cctx, nd, req)
			cancel()
			rd.report(i, r, &cfgCopy)
			return nil // a node's failure is an outcome, not a group error
		})
	}
	// The group is deliberately not waited for: late replies are handled
	// by report, which releases a late win of a lost acquisition.

	timer := time.NewTimer(rd.timeout)
	var ctxErr error
	select {
	case <-rd.done:
	case <-timer.C:
	case <-nodeCtx.Done(): // never for a release
		ctxErr = ctx.Err()
	}
	timer.Stop()

	rd.mu.Lock()
	if !rd.decided {
		rd.decided = true
		for i := range rd.res {
			if rd.inflight[i] && ctxErr == nil {
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
		return out
	}
	rd.won = false // a cancelled win is released like a loss
	out.err = rd.errorLocked(ctxErr)
	var release []*node
	if op == opAcquire {
		for i, nd := range c.nodes {
			if !rd.inflight[i] && (rd.res[i].Status == NodeOK || rd.res[i].Status == NodeFailed) {
				release = append(release, nd)
			}
		}
	}
	rd.mu.Unlock()
	if len(release) > 0 {
		rd.releaseAll(release)
	}
	return out
}

// report records node i's reply and decides the round when it can.
func (rd *round) report(i int, r reply, cfg *config) {
	st, err := r.st, r.err
	lat := time.Since(rd.start)
	rd.mu.Lock()
	rd.inflight[i] = false
	if rd.decided {
		late := rd.op == opAcquire && (!rd.won || rd.unlocked.Load()) && (st == NodeOK || st == NodeFailed)
		rd.mu.Unlock()
		if late {
			// Our SET may have landed after the round was lost, or
			// after the lock it won was released.
			rd.release(rd.c.nodes[i])
		}
		return
	}
	rd.res[i] = NodeResult{Node: i, Addr: rd.res[i].Addr, Status: st, Err: err, Latency: lat}
	if st == NodeOK {
		rd.ok++
		if rd.fences != nil {
			rd.fences[i] = r.fence
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
		if rd.op != opRelease {
			rd.validity = validity(rd.ttl, lat+rd.start.Sub(rd.origin), cfg.driftFactor)
			if rd.validity <= 0 {
				rd.won, rd.expired = false, true
			}
		}
		close(rd.done)
	case rd.bad > len(rd.res)-rd.need:
		rd.decided = true
		close(rd.done)
	}
	rd.mu.Unlock()
}

// errorLocked builds the error of a lost round. rd.mu must be held.
func (rd *round) errorLocked(ctxErr error) *QuorumError {
	e := &QuorumError{
		Op: rd.op.String(), Keys: rd.keys, Quorum: rd.need, OK: rd.ok,
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
// cancellation cannot cut short.
func (rd *round) releaseAll(nodes []*node) {
	var wg sync.WaitGroup
	for _, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rd.release(nd)
		}()
	}
	wg.Wait()
}

func (rd *round) release(nd *node) {
	ctx, cancel := context.WithTimeout(rd.detached, rd.timeout)
	defer cancel()
	// A clean-up, not an Unlock: no announcement, so that the releases of
	// split votes do not wake every waiter into another split.
	_ = rd.c.exec(ctx, nd, &request{op: opRelease, keys: rd.keys, token: rd.token, ttl: rd.ttl})
}

// call runs one request on one node and classifies the reply. A release
// is announced to waiters.
func (c *Client) call(ctx context.Context, nd *node, op opKind, keys []string, token string, ttl time.Duration) (NodeStatus, error) {
	r := c.exec(ctx, nd, &request{op: op, keys: keys, token: token, ttl: ttl, notify: op == opRelease})
	return r.st, r.err
}

// exec runs one request on one node and classifies the reply. With the
// restart guard on, a grant from a node that restarted too recently is
// turned into a failure (see guard.go). A reply of the wrong type, and a
// panic of go-redis on a malformed reply, are node failures.
func (c *Client) exec(ctx context.Context, nd *node, req *request) (rep reply) {
	defer func() {
		if p := recover(); p != nil {
			rep = reply{st: NodeFailed, err: fmt.Errorf("redlock: malformed reply: go-redis panicked: %v", p)}
		}
	}()
	if !nd.identified.Load() {
		if err := c.identify(ctx, nd); err != nil {
			return reply{st: NodeFailed, err: nodeErr(ctx, err)}
		}
	}
	guarded := nd.guard != nil && req.op != opRelease
	var sent time.Time
	if guarded {
		sent = time.Now()
		if err := nd.guard.young(sent); err != nil {
			return reply{st: NodeFailed, err: err}
		}
	}
	var res any
	var err error
	switch req.op {
	case opAcquire:
		if req.fenced {
			res, err = scriptAcquireFenced.Run(ctx, nd.c, req.fkeys, req.token, pxMillis(req.ttl)).Result()
		} else {
			res, err = scriptAcquire.Run(ctx, nd.c, req.keys, req.token, pxMillis(req.ttl)).Result()
		}
	case opExtend:
		res, err = scriptExtend.Run(ctx, nd.c, req.keys, req.token, pxMillis(req.ttl)).Result()
	case opFence:
		res, err = scriptFence.Run(ctx, nd.c, req.fkeys, req.token, req.fence).Result()
	default:
		if req.notify {
			res, err = scriptRelease.Run(ctx, nd.c, req.keys, req.token, releasePrefix).Result()
		} else {
			res, err = scriptRelease.Run(ctx, nd.c, req.keys, req.token).Result()
		}
	}
	if err != nil {
		return reply{st: NodeFailed, err: nodeErr(ctx, err)}
	}
	v, f, ok := parseReply(res, req.op == opAcquire && req.fenced)
	if !ok {
		return reply{st: NodeFailed, err: errUnexpectedReply(res)}
	}
	var st NodeStatus
	switch v {
	case 1:
		st = NodeOK
	case 0:
		st = NodeAbsent
		if req.op == opAcquire {
			st = NodeTaken
		}
	case -1:
		st = NodeTaken
	}
	if guarded && st == NodeOK {
		if err := nd.guard.admit(ctx, nd, sent); err != nil {
			return reply{st: NodeFailed, err: nodeErr(ctx, err)}
		}
	}
	return reply{st: st, fence: f}
}

// parseReply checks a script's reply: an integer 1, 0 or -1, or for a
// fenced acquire {1, f} with f > 0 or {0, 0}. Anything else (a string of
// digits, a RESP3 type, another number) is not what our scripts return.
func parseReply(res any, fenced bool) (v, f int64, ok bool) {
	if !fenced {
		v, ok = res.(int64)
		return v, 0, ok && (v == 1 || v == 0 || v == -1)
	}
	arr, ok := res.([]any)
	if !ok || len(arr) != 2 {
		return 0, 0, false
	}
	v, ok1 := arr[0].(int64)
	f, ok2 := arr[1].(int64)
	switch {
	case !ok1 || !ok2:
		return 0, 0, false
	case v == 1 && f > 0, v == 0 && f == 0:
		return v, f, true
	}
	return 0, 0, false
}

// nodeErr marks a request cut short by the per-node deadline as a timeout.
func nodeErr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errors.Join(ErrNodeTimeout, err)
	}
	return err
}
