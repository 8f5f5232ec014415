package redlock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// opKind is what a round does; its String is the API's Op.
type opKind = wire.Op

const (
	opAcquire = wire.OpAcquire
	opExtend  = wire.OpExtend
	opRelease = wire.OpRelease
	opFence   = wire.OpFence // the second round of a fenced acquire: see fence.go
	// A leadership's Proclaim (election.go): a round of its own, which
	// the observer does not see.
	opProclaim = wire.OpProclaim
)

// opOf returns the name of o in events and errors: "lock", "extend",
// "unlock", "fence" or "proclaim".
func opOf(o opKind) string { return o.String() }

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
	// prevTTL: a hand-on's (w.Prev), the longest TTL the handing lock set,
	// which bounds the retries of its releases (round.releasePrev).
	prevTTL time.Duration
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
func exec(ctx context.Context, c *Client, nd *node.Node, req *request) wire.Reply {
	if req.w.Argv == nil {
		req.prepare(1)
	}
	return nd.Exec(ctx, &req.w)
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

// waitRoom submits the requests of rd to the nodes listed in full, whose
// queues were full (see node.Node.Submit), in node order, each as soon as its
// queue has room. It gives up on a node, reporting its request failed
// and unsent, when rd is decided (a release left out is retried in the
// background), when ctx ends, or when timer, the round's
// wait, fires; it reports whether the timer fired.
func waitRoom(c *Client, rd *round, full []int, rooms []<-chan struct{}, ctx context.Context, timer *time.Timer) (fired bool) {
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
