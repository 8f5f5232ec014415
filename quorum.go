package redlock

import (
	"context"
	"errors"
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
)

func (o opKind) String() string {
	switch o {
	case opAcquire:
		return "lock"
	case opExtend:
		return "extend"
	}
	return "unlock"
}

type round struct {
	c        *Client
	op       opKind
	keys     []string
	token    string
	ttl      time.Duration
	need     int
	timeout  time.Duration
	start    time.Time
	detached context.Context // for releases the caller cannot cancel

	mu       sync.Mutex
	res      []NodeResult
	inflight []bool
	ok, bad  int
	decided  bool
	won      bool
	expired  bool
	validity time.Duration
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
}

// run fans the request out and blocks until the outcome is decided, the
// per-node timeout passes, or ctx is done.
func (c *Client) run(ctx context.Context, op opKind, keys []string, token string, ttl time.Duration, cfg *config) outcome {
	if !c.allIdentified.Load() {
		c.identifyAll(ctx, cfg.timeoutFor(ttl))
	}
	n := len(c.nodes)
	rd := &round{
		c: c, op: op, keys: keys, token: token, ttl: ttl,
		need:     c.need,
		timeout:  cfg.timeoutFor(ttl),
		detached: context.WithoutCancel(ctx),
		res:      make([]NodeResult, n),
		inflight: make([]bool, n),
		done:     make(chan struct{}),
	}
	cfgCopy := *cfg
	nodeCtx := ctx
	if op == opRelease {
		// Unlock is a clean-up: the caller's cancellation must not leave
		// our keys behind. Each node call is still bounded by the timeout.
		nodeCtx = rd.detached
	}
	rd.start = time.Now()
	var g errgroup.Group
	for i, nd := range c.nodes {
		rd.res[i] = NodeResult{Node: i, Addr: nd.addr}
		rd.inflight[i] = true
		g.Go(func() error {
			cctx, cancel := context.WithTimeout(nodeCtx, rd.timeout)
			st, err := c.call(cctx, nd, op, keys, token, ttl)
			cancel()
			rd.report(i, st, err, &cfgCopy)
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
	out := outcome{won: rd.won && ctxErr == nil, validity: rd.validity, start: rd.start, rd: rd}
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
func (rd *round) report(i int, st NodeStatus, err error, cfg *config) {
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
	} else {
		rd.bad++
	}
	switch {
	case rd.ok >= rd.need:
		rd.decided = true
		rd.won = true
		if rd.op != opRelease {
			rd.validity = validity(rd.ttl, lat, cfg.driftFactor)
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
	case rd.op == opAcquire:
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
		if taken > 0 && rd.op == opAcquire {
			e.reasons = append(e.reasons, ErrContended)
		}
	case failed > limit:
		e.reasons = append(e.reasons, ErrUnreachable)
	default:
		if taken > 0 && rd.op == opAcquire {
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
	_, _ = rd.c.call(ctx, nd, opRelease, rd.keys, rd.token, rd.ttl)
}

// call runs one request on one node and classifies the reply.
func (c *Client) call(ctx context.Context, nd *node, op opKind, keys []string, token string, ttl time.Duration) (NodeStatus, error) {
	if !nd.identified.Load() {
		if err := c.identify(ctx, nd); err != nil {
			return NodeFailed, nodeErr(ctx, err)
		}
	}
	var v int64
	var err error
	switch op {
	case opAcquire:
		v, err = scriptAcquire.Run(ctx, nd.c, keys, token, pxMillis(ttl)).Int64()
	case opExtend:
		v, err = scriptExtend.Run(ctx, nd.c, keys, token, pxMillis(ttl)).Int64()
	default:
		v, err = scriptRelease.Run(ctx, nd.c, keys, token).Int64()
	}
	if err != nil {
		return NodeFailed, nodeErr(ctx, err)
	}
	switch v {
	case 1:
		return NodeOK, nil
	case 0:
		if op == opAcquire {
			return NodeTaken, nil
		}
		return NodeAbsent, nil
	case -1:
		return NodeTaken, nil
	}
	return NodeFailed, errUnexpectedReply(v)
}

// nodeErr marks a request cut short by the per-node deadline as a timeout.
func nodeErr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errors.Join(ErrNodeTimeout, err)
	}
	return err
}
