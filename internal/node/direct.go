package node

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// The direct path. A round of a Client of one node that finds the node's
// pipe idle (no request in flight, nothing queued) runs its request on
// the caller's goroutine instead of handing it to the pipe's leader.
// Each hand-off to the leader and back woke a goroutine, and each wake-up
// woke an idle OS thread with a futex: on back-to-back calls two thirds
// of the futex calls of an uncontended Lock+Unlock, and about a third of
// its p50, more on a loaded machine where every wake-up waits for a core.
//
// The caller takes the pipe as a leader does (busy), so everything that
// keys on busy holds unchanged: requests that arrive meanwhile queue
// behind it and go out after its reply, in the order they were handed
// over; the queue bound and silentError count from its start. When it
// is done it reports the reply to its round as a leader does (runJob:
// the same Report, so late grants, failed requests and their background
// retries are handled alike) and hands what queued behind it to the
// parked leader, or to a new one (Spawn with always: also after Close).
//
// A round waits for a node for its per-node timeout, whatever the
// go-redis options; a caller that runs its request itself cannot stop
// waiting, so the request itself must be bounded. It goes through a
// connection held for the direct path (directConn): a go-redis Tx of a
// clone of the node's client (WithTimeout) whose socket reads and writes
// are each bounded by d, at most a third of the round's per-node
// timeout, and which never retries. The connection is taken from the
// pool, and checked with a PING, on a goroutine of its own, so a direct
// request neither waits for the pool nor dials. A request is at most
// three commands (SET NX, the acquire script when the SET was refused,
// EVAL when the script was not cached), each written only once the
// previous reply was read: at most one small command is in flight on
// the connection, so a write never waits for the socket buffer, and the
// request waits for at most three reads of d each. A direct request cut
// short fails like any failed request on the leader (possibly landed:
// released as uncertain, or retried in the background), and for
// directSlowFor the node's requests go through the leader again, which
// waits for late replies. The cost is a reply later than d but within
// the timeout: failed here, where the leader would have waited for it;
// once per directSlowFor at most.
//
// The direct request cannot be cut short at ctx's end (go-redis does
// not stop a read then), so a ctx that can end takes the direct path
// only where that costs little (directCtxOK): the per-node timeout, which
// bounds the request, is at most directCtxSlack (the default per-node
// timeout's ceiling), and ctx's deadline, if any, is further away than
// it. A call whose ctx is cancelled meanwhile returns at most that
// timeout late; a deadline that comes sooner, or a longer per-node
// timeout, keeps the request on the leader, where the round returns at
// ctx's end. Most callers' contexts can end (a signal's, a server's
// request), and the leader's two hand-offs cost a one-node lock more
// than half its time.
//
// What stays on the leader: nodes not identified yet (first contact),
// nodes with the restart guard on (its admission may send INFO through
// the node's client), nodes with replica sync on (a WAIT may outlast the
// direct path's socket timeout; see replicas.go), extension batches, clients other than a plain
// *redis.Client with room in its pool (ownConnFits), per-node timeouts
// under 3*minDirect, and every request after Close. The clone takes a
// copy of the client's go-redis hooks when the connection is taken:
// they run on the caller's goroutine, and a hook that blocks delays the
// caller (on the leader, the round would stop waiting at the timeout).

// minDirect is the shortest socket timeout of the direct path: shorter
// ones would cut replies that a loaded machine delays routinely.
const minDirect = 4 * time.Millisecond

// directCtxSlack is the longest per-node timeout with which a request
// whose ctx can end still takes the direct path (see above).
const directCtxSlack = 200 * time.Millisecond

// directCtxOK reports whether j's ctx allows the direct path: it cannot
// end, or it ends no sooner than the per-node timeout, which is short.
func directCtxOK(j Job) bool {
	if j.Ctx.Done() == nil {
		return true
	}
	if j.Timeout > directCtxSlack {
		return false
	}
	dl, ok := j.Ctx.Deadline()
	return !ok || time.Until(dl) > j.Timeout
}

// directSlowFor is how long a node whose direct request failed has its
// requests sent by the leader.
const directSlowFor = time.Second

// directTimeout returns the socket timeout of a direct request of a
// round with per-node timeout t: the largest minDirect * 2^k at most
// t/3, or 0 when t/3 < minDirect (no direct path). A few values only,
// so that rounds of locks with nearby timeouts share the connection.
func directTimeout(t time.Duration) time.Duration {
	lim := t / 3
	if lim < minDirect {
		return 0
	}
	d := minDirect
	for 2*d <= lim {
		d *= 2
	}
	return d
}

// directConn is a pipe's connection for the direct path; see above. It
// is guarded by the pipe's mu, and used without it only by the caller
// that holds the pipe (pipe.direct), which nothing drops it under.
type directConn struct {
	tx    *redis.Tx
	d     time.Duration // tx's socket timeout
	done  chan struct{} // closed to end the Watch that holds tx, or will
	until time.Time     // given back then (leaderConnAge)
	last  time.Time     // last used, or taken
	off   bool          // the node's client is not one for it
	slots *ConnSlots
	// A take in progress: its goroutine sends the Tx on got, or closes
	// ended without one.
	got   chan *redis.Tx
	ended chan struct{}
	// check gives the connection back once idle for leaderConnIdle (or
	// after Close), checked every leaderConnCheck while one is held.
	check *time.Timer
}

// drop gives the connection back, or ends a take in progress, without
// waiting (see leaderConn.drop).
func (dc *directConn) drop() {
	if dc.done != nil {
		close(dc.done)
	}
	dc.tx, dc.done, dc.got, dc.ended = nil, nil, nil, nil
}

// directTx returns the direct path's connection for socket timeout d,
// or nil when there is none ready: it then starts taking one if none is
// being taken. Called under p.mu with the pipe not busy.
func (nd *Node) directTx(p *pipe, d time.Duration, now time.Time) *redis.Tx {
	dc := &p.dc
	if dc.got != nil {
		select {
		case tx := <-dc.got:
			dc.tx, dc.got, dc.ended = tx, nil, nil
			dc.until = now.Add(leaderConnAge)
		case <-dc.ended: // the PING failed, or go-redis panicked
			dc.drop()
			p.slowUntil = now.Add(directSlowFor)
			return nil
		default:
			return nil // still taking
		}
	}
	if dc.tx != nil {
		if !now.Before(dc.until) {
			dc.drop() // taken again below: see leaderConnAge
		} else if dc.d != d {
			return nil // another lock's timeout: left to the leader
		} else {
			return dc.tx
		}
	}
	if dc.off {
		return nil
	}
	rc, ok := nd.C.(*redis.Client)
	if !ok || !ownConnFits(rc.Options()) {
		dc.off = true
		return nil
	}
	if dc.slots == nil {
		dc.slots = ConnSlotsOf(rc)
	}
	if !dc.slots.take() {
		return nil
	}
	got := make(chan *redis.Tx, 1)
	done, ended := make(chan struct{}), make(chan struct{})
	slots := dc.slots
	nd.held.Add(1)
	go func() {
		defer nd.held.Done()
		defer close(ended)
		defer slots.give()
		defer func() { _ = recover() }() // as leaderConn.take
		if hook := takeHook.Load(); hook != nil {
			(*hook)()
		}
		c := rc.WithTimeout(d)
		// The clone's options are its own copy, not used yet; normalized
		// already, where 0 is no retry.
		c.Options().MaxRetries = 0
		_ = c.Watch(context.Background(), func(tx *redis.Tx) error {
			// Takes the connection from the pool here, off the request
			// path.
			if tx.Ping(context.Background()).Err() != nil {
				return nil
			}
			got <- tx // buffered: never blocks
			<-done
			return nil
		})
	}()
	dc.got, dc.ended, dc.done, dc.d, dc.last = got, ended, done, d, now
	if dc.check == nil {
		dc.check = time.AfterFunc(leaderConnCheck, func() { nd.checkDirect(p) })
	} else {
		dc.check.Reset(leaderConnCheck)
	}
	return nil
}

// checkDirect gives the direct connection back when it has been idle for
// leaderConnIdle, is past its age, or the client is closed; else it
// checks again in leaderConnCheck.
func (nd *Node) checkDirect(p *pipe) {
	p.mu.Lock()
	defer p.mu.Unlock()
	dc := &p.dc
	if dc.done == nil {
		return // given back already
	}
	if !p.direct {
		now := time.Now()
		if nd.isClosed() || now.Sub(dc.last) >= leaderConnIdle || !now.Before(dc.until) && dc.tx != nil {
			dc.drop()
			return
		}
	}
	dc.check.Reset(leaderConnCheck)
}

// RunDirect runs j on the caller's goroutine when nd's pipe is idle and j
// may take the direct path (see above), and reports whether it took j:
// then j was reported to its round, or was handed to a leader (a
// connection found closed under the request, sent again through the
// pool as on the leader). Otherwise the caller submits j (Submit).
func (nd *Node) RunDirect(j Job) bool {
	if j.B != nil || nd.guard != nil || nd.replicas != nil || !nd.identified.Load() || !directCtxOK(j) {
		return false
	}
	d := directTimeout(j.Timeout)
	if d == 0 || nd.isClosed() {
		return false
	}
	p := &nd.pipe
	p.mu.Lock()
	if p.busy {
		p.mu.Unlock()
		return false
	}
	now := time.Now()
	if now.Before(p.slowUntil) {
		p.mu.Unlock()
		return false
	}
	tx := nd.directTx(p, d, now)
	if tx == nil {
		p.mu.Unlock()
		return false
	}
	p.busy, p.direct = true, true
	p.since = now
	p.mu.Unlock()
	directRuns.Add(1)

	again := false
	if j.R.Lost() {
		// Never so for a round's first request; kept as runJob.
		j.R.Report(j.I, wire.Reply{St: wire.StatusFailed, Err: errRoundLost, Unsent: true})
	} else {
		var rep wire.Reply
		rep, again = nd.exec(j.Ctx, j.Req, nil, tx, false)
		if !again {
			j.R.Report(j.I, rep)
		}
		if rep.St == wire.StatusFailed || again {
			p.mu.Lock()
			p.dc.drop()
			if !again {
				p.slowUntil = time.Now().Add(directSlowFor)
			}
			p.mu.Unlock()
		}
	}

	p.mu.Lock()
	p.direct = false
	p.dc.last = time.Now()
	if again {
		// Ahead of what queued behind it, in its place in the order.
		j.Resend = true
		p.queue = append(p.queue, Job{})
		copy(p.queue[1:], p.queue)
		p.queue[0] = j
	}
	nd.handOn(p)
	return true
}

// handOn hands the queue to the parked leader, or to a new one, or
// marks the pipe idle when nothing queued. Called under p.mu, which it
// releases, by the holder of busy that is not a leader.
func (nd *Node) handOn(p *pipe) {
	if len(p.queue) == 0 {
		p.busy = false
		p.mu.Unlock()
		return
	}
	p.since = time.Now()
	if p.parked {
		p.parked = false
		p.mu.Unlock()
		p.wake <- struct{}{}
		return
	}
	if p.wake == nil {
		p.wake = make(chan struct{}, 1)
	}
	p.mu.Unlock()
	nd.h.Spawn(func() error {
		nd.lead(Job{}, false)
		return nil
	}, true)
}

// directRuns counts the requests run on the direct path, for tests.
var directRuns atomic.Uint64

// DirectRuns returns how many requests took the direct path in this
// process (RunDirect). For tests.
func DirectRuns() uint64 { return directRuns.Load() }
