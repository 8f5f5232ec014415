package redlock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// quorumCount says whether what k of the answered nodes of n hold is on
// a quorum of need: surely (k ≥ need), or possibly (may: the nodes that
// did not answer could make up the rest). The reads (Inspect, Leader,
// Observe) judge what they saw with it; a round counts its votes in
// Report.
func quorumCount(k, answered, n, need int) (sure, may bool) {
	return k >= need, k+(n-answered) >= need
}

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
// is failed with errNodeTimeout. Requests still queued or in flight go on
// in the nodes' pipes; their replies are dropped.
func readAll(ctx context.Context, c *Client, w *wire.Request, timeout time.Duration) ([]wire.Reply, []time.Duration, error) {
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
			reps[i] = wire.Reply{St: wire.StatusFailed, Err: errNodeTimeout}
			lats[i] = time.Since(r.start)
		}
	}
	return reps, lats, err
}

// errTimedOut ends a read's wait for room at its timeout: the nodes not
// reached then count as timed out.
var errTimedOut = errors.New("redlock: read timed out")
