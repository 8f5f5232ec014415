package redlock

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// limitReached reports whether a hold limit (WithMaxExtensions,
// WithMaxHold) forbids e's next extension; then e is dropped and the
// lock lives out its validity (less the loss margin) before its watch
// ends with ErrHoldLimit.
// n is how many extensions auto-extension won for the lock (watch.autoN).
func limitReached(c *Client, e *entry, n int) bool {
	l := e.l
	if (l.cfg.maxExtensions == 0 || n < l.cfg.maxExtensions) &&
		(l.cfg.maxHold == 0 || time.Since(l.acquired)+e.ttl <= l.cfg.maxHold) {
		return false
	}
	c.sched.remove(e)
	l.mu.Lock()
	if l.w != nil {
		l.w.limit = true
	}
	l.armLocked() // a timer of the lock's own watches the expiry now
	l.mu.Unlock()
	return true
}

// extended schedules what follows an extension of e that returned err,
// as the extension loop of AutoExtend describes: the next extension at
// TTL/2 left (earlier under backlog), a retry after a jittered delay
// while validity lasts, or the end of a lock proven lost.
func extended(c *Client, e *entry, err error) {
	l := e.l
	s := &c.sched
	var lost error
	if err != nil {
		if errors.Is(err, ErrExpired) {
			lost = &lostError{msg: "lock lost", last: err, pre: ": ", errs: []error{ErrLockLost, err}}
		} else {
			var qe *QuorumError
			if errors.As(err, &qe) {
				lost = definiteLoss(qe)
			}
		}
	}
	l.mu.Lock()
	dl := l.deadline
	switch {
	case lost != nil:
		// Ended already when endExtend saw the loss (then this is a
		// no-op); for an extension not sent because validity had run
		// out, ended here.
		l.loseLocked(lost)
	case err != nil && l.w != nil:
		l.w.lastErr = err // the reason, should the lock be lost
	}
	w := l.w
	l.mu.Unlock()
	if lost != nil {
		s.remove(e)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		// Counted even when e was retired meanwhile (its ctx ended, and
		// a resumed AutoExtend took over): the hold limit counts every
		// extension won.
		w.autoN++
	}
	if e.gone {
		return
	}
	if err != nil {
		// Unreachable nodes: try again while validity lasts.
		s.addLocked(c, e, time.Now().Add(jitter(e.retry)), dl)
		return
	}
	s.addLocked(c, e, dl.Add(-e.ttl/2-advance(s.lag, e.ttl)), dl)
}

// batchItem is one lock of a tick.
type batchItem struct {
	e     *entry
	rd    *round
	lock  wire.BatchLock // what the batch script needs of it
	limit time.Time      // the tick stops waiting for its round then
}

// extendTick extends the entries of tk (closest deadline first): it
// starts a round per lock, sends the batches to every node, and hands
// the rounds to collectTick. late is how late the tick started.
func extendTick(c *Client, tk *tick, es []*entry, late time.Duration) {
	start := time.Now()
	s := &c.sched
	// One look at the scheduler's state for the whole tick.
	s.mu.Lock()
	lag := s.lag
	ns := make([]int, len(es)) // extensions won; -1: removed meanwhile
	for k, e := range es {
		ns[k] = e.l.w.autoN
		if e.gone {
			ns[k] = -1
		}
	}
	s.mu.Unlock()
	// Slabs: one allocation each for the tick's items, requests, rounds
	// and node results, not one per lock.
	items := make([]*batchItem, 0, len(es))
	slab := make([]batchItem, len(es))
	reqs := make([]request, len(es))
	rds := make([]round, len(es))
	n := len(c.nodes)
	res := make([]NodeResult, len(es)*n)
	for k, e := range es {
		l := e.l
		if ns[k] < 0 || limitReached(c, e, ns[k]) {
			continue
		}
		if !l.extMu.TryLock() {
			// An Extend of the caller's is in flight, for at most its
			// per-node timeout: look again then.
			s.add(c, e, start.Add(l.cfg.timeoutFor(e.ttl)), e.dl)
			continue
		}
		l.mu.Lock()
		dl := l.deadline
		if due := dl.Add(-e.ttl/2 - advance(lag, e.ttl)); due.Sub(start) > e.coalesce()+late {
			// An Extend of the caller's moved the deadline since: not
			// due yet.
			l.mu.Unlock()
			l.unlockExt()
			s.add(c, e, due, dl)
			continue
		}
		left, released := l.startExtendLocked(start, e.ttl)
		l.mu.Unlock()
		if err := l.unsentExtend(left, released); err != nil {
			l.unlockExt()
			extended(c, e, err)
			continue
		}
		req := &reqs[k]
		val := l.heldValue() // what a heal writes back (extend/kinds.lua)
		*req = request{w: wire.Request{Op: opExtend, Token: val, TTL: e.ttl, Fence: l.fence}, keys: l.keys, fam: l.fam, floor: &l.floor, over: &l.over, prefix: c.cfg.prefix}
		rd := &rds[k]
		initRound(c, rd, e.ctx, req, l.cfg, res[k*n:(k+1)*n:(k+1)*n], start)
		rd.tick = tk
		it := &slab[k]
		*it = batchItem{e: e, rd: rd, lock: batchLock(l, val, e.ttl, c.cfg.prefix)}
		items = append(items, it)
	}
	c.sched.measured(late)
	if len(items) == 0 {
		return
	}
	tk.left.Store(int64(len(items)))
	// Validity counts from start, taken before any request goes out.
	c.sched.mu.Lock()
	for _, it := range items {
		// A round waits for its quorum until the lock's expiry, when Done
		// closes (extended or not): a reply that comes late, from a node
		// or a machine that stalled, still extends the lock, counted
		// from the tick's start. A retry sent meanwhile would only queue
		// behind the request still in flight, and feed a stall with
		// more work. Failures that are answered (errors, refusals)
		// decide the round at once, and are retried.
		it.limit = it.e.exp
		if it.limit.IsZero() {
			it.limit = start.Add(batchWait(it.rd.timeout, it.e.ttl))
		}
	}
	c.sched.mu.Unlock()
	// Built once, shared by the nodes of each kind.
	var plain, bySlot []*node.Batch
	for _, nd := range c.nodes {
		var jobs []*node.Batch
		switch {
		case shardingOf(nd.C) != shardSlot:
			if plain == nil {
				plain = chunkBatches(items)
			}
			jobs = plain
		default:
			if bySlot == nil {
				bySlot = slotBatches(items)
			}
			jobs = bySlot
		}
		for _, b := range jobs {
			nd.Submit(node.Job{B: b, I: nd.Idx, Ctx: context.Background(), Timeout: b.Timeout})
		}
	}
	go collectTick(c, tk, items)
}

// batchLock is what the batch script needs of l, extended by ttl and
// healed with val: a fenced lock's keys with their counters and its
// fencing token, a permit's limit.
func batchLock(l *Lock, val string, ttl time.Duration, prefix string) wire.BatchLock {
	b := wire.BatchLock{Kind: wire.KindLetter(kindOf(l.fam), l.fence > 0), Keys: prefixKeys(prefix, l.keys), TTL: ttl, Token: val}
	switch {
	case l.fence > 0 && l.fam == nil:
		b.Keys, b.Extra = fenceKeys(b.Keys), l.fence
	case l.fam != nil && l.fam.kind == kindPermit:
		b.Extra = int64(l.fam.sem.Limit)
	}
	return b
}

// chunkBatches splits items, in order, into batches of at most
// wire.MaxBatch.
func chunkBatches(items []*batchItem) []*node.Batch {
	var out []*node.Batch
	for len(items) > 0 {
		n := min(len(items), wire.MaxBatch)
		out = append(out, newBatch(items[:n:n]))
		items = items[n:]
	}
	return out
}

// newBatch returns the batch of items: their rounds, requests and
// command.
func newBatch(items []*batchItem) *node.Batch {
	b := &node.Batch{Items: make([]node.BatchItem, len(items)), Timeout: items[0].rd.timeout}
	for k, it := range items {
		b.Items[k] = node.BatchItem{R: it.rd, Req: &it.rd.req.w}
	}
	b.Argv = wire.BatchArgv(len(items), func(k int) *wire.BatchLock { return &items[k].lock })
	return b
}

// slotBatches groups items by hash slot, for a Redis Cluster node (a
// script's keys must share one slot), keeping their order within a slot.
// A lock whose keys span several slots (which its acquire refused on
// such a node, so it is held there nowhere) goes alone.
func slotBatches(items []*batchItem) []*node.Batch {
	var out []*node.Batch
	bySlot := map[int][]*batchItem{}
	var order []int
	for _, it := range items {
		s := keySlot(it.lock.Keys[0])
		for _, k := range it.lock.Keys[1:] {
			if keySlot(k) != s {
				s = -1
			}
		}
		if s < 0 {
			out = append(out, chunkBatches([]*batchItem{it})...)
			continue
		}
		if _, ok := bySlot[s]; !ok {
			order = append(order, s)
		}
		bySlot[s] = append(bySlot[s], it)
	}
	for _, s := range order {
		out = append(out, chunkBatches(bySlot[s])...)
	}
	return out
}

// batchWait is how long a tick waits for a lock's round when the lock
// has no expiry set (it always has one once auto-extended): its
// per-node timeout, or TTL/8 if longer.
func batchWait(timeout, ttl time.Duration) time.Duration { return max(timeout, ttl/8) }

// collectTick applies each item's outcome as Extend would, and
// schedules what comes next, once every round of the tick is decided or
// an item's limit (the lock's expiry: a round that has not won by then
// cannot save the lock) has passed, closest deadline first.
func collectTick(c *Client, tk *tick, items []*batchItem) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	// A copy: the batches' item lists share items' array.
	for pending := slices.Clone(items); len(pending) > 0; {
		var next time.Time
		for _, it := range pending {
			if next.IsZero() || it.limit.Before(next) {
				next = it.limit
			}
		}
		t.Reset(time.Until(next))
		select {
		case <-tk.all:
			t.Stop()
		case <-t.C:
		}
		now := time.Now()
		kept := pending[:0]
		for _, it := range pending {
			if !it.rd.isDecided() && now.Before(it.limit) {
				kept = append(kept, it)
				continue
			}
			l := it.e.l
			out := it.rd.finish(nil)
			if !out.won {
				l.mu.Lock()
				if l.w != nil {
					l.w.lastErr = out.err // the reason, should the lock now be lost
				}
				l.mu.Unlock()
			}
			err := l.endExtend(out, it.e.ttl)
			l.dropHealed(it.rd, false)
			l.unlockExt()
			extended(c, it.e, err)
		}
		pending = kept
	}
}
