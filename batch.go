package redlock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A tick of the scheduler (scheduler.go) extends its locks in batches:
// per node, one EVALSHA of extend_batch.lua carries up to maxBatch
// locks, each checked and extended on its own, and its reply is one
// status per lock. Each lock still has its own round (quorum.go),
// started at the tick's start, to which every node's status for it is
// reported: votes, early decision, validity, drift, the floor, the
// observer's events and the errors are those of an Extend. Batches ride
// the nodes' pipes (pipe.go), in order with the other requests.

//go:embed extend_batch.lua
var extendBatchSrc string

var scriptExtendBatch = newLua(extendBatchSrc)

// maxBatch is the most locks one batched request carries: a script call
// blocks its node while it runs (about a microsecond per lock).
const maxBatch = 256

// batchItem is one lock of a tick.
type batchItem struct {
	e     *entry
	rd    *round
	kind  byte      // the script's kind letter
	wire  []string  // its keys on the wire (key prefix applied)
	limit time.Time // the tick stops waiting for its round then
}

// batchJob is one batched request: the items of one node's share of a
// tick (all of them, or those of one hash slot on a Cluster node).
type batchJob struct {
	items []*batchItem
	argv  []any // EVALSHA's arguments, built once: each node sends a copy
}

// batchProbe stands for a batch in the restart guard's check before
// sending (an extension).
var batchProbe = &request{op: opExtend}

// kindLetter is the batch script's name of a lock's kind.
func kindLetter(f *family) byte {
	if f == nil {
		return 'k'
	}
	switch f.kind {
	case kindPath:
		return 'p'
	case kindRead:
		return 'r'
	}
	return 's'
}

// build fills b.argv: EVALSHA of the batch script, the items' keys, the
// read marker, and the items' kinds, TTLs and tokens in one string (see
// extend_batch.lua).
func (b *batchJob) build() {
	nkeys, size := 0, 0
	for _, it := range b.items {
		nkeys += len(it.wire)
		size += 24 + len(it.rd.token)
	}
	a := make([]any, 0, 5+nkeys)
	a = append(a, "evalsha", scriptExtendBatch.sha, nkeys)
	for _, it := range b.items {
		for _, k := range it.wire {
			a = append(a, k)
		}
	}
	blob := make([]byte, 0, size)
	for _, it := range b.items {
		blob = append(blob, it.kind)
		blob = strconv.AppendInt(blob, int64(len(it.wire)), 10)
		blob = append(blob, ' ')
		blob = strconv.AppendInt(blob, pxMillis(it.rd.ttl), 10)
		blob = append(blob, ' ')
		blob = strconv.AppendInt(blob, int64(len(it.rd.token)), 10)
		blob = append(blob, ' ')
		blob = append(blob, it.rd.token...)
	}
	b.argv = append(a, readMarker, string(blob))
}

// args returns a node's copy of the command (a go-redis hook may
// rewrite arguments in place), as EVAL when eval.
func (b *batchJob) args(eval bool) []any {
	a := append([]any(nil), b.argv...)
	if eval {
		a[0], a[1] = "eval", scriptExtendBatch.src
	}
	return a
}

// deliver reports a node's reply to the batch (res, err) to every item's
// round: a string of one status character per item.
func (c *Client) deliver(nd *node, b *batchJob, res any, err error, sent time.Time) {
	st, ok := res.(string)
	if err == nil && (!ok || len(st) != len(b.items)) {
		err = errUnexpectedReply(res)
	}
	for k, it := range b.items {
		var r reply
		switch {
		case err != nil:
			r = reply{st: NodeFailed, err: err}
		case st[k] == '1' && nd.guard != nil:
			r = c.after(context.Background(), nd, it.rd.req, int64(1), nil, sent)
		case st[k] == '1':
			r = reply{st: NodeOK}
		case st[k] == '0':
			r = reply{st: NodeAbsent}
		case st[k] == 't':
			r = reply{st: NodeTaken}
		default:
			r = reply{st: NodeFailed, err: errBatchItem}
		}
		it.rd.report(nd.idx, r)
	}
}

var errBatchItem = errors.New("redlock: batched extend: the node failed this lock's extension")

// fail reports one failure to every item's round.
func (b *batchJob) fail(nd *node, r reply) {
	for _, it := range b.items {
		it.rd.report(nd.idx, r)
	}
}

// execBatch runs a batch on its own: with EVALSHA, EVAL when the node
// lost its script cache, and with INFO server first on a node not yet
// identified (see firstContact).
func (c *Client) execBatch(nd *node, b *batchJob) {
	ctx := context.Background()
	var rep *reply
	var sent time.Time
	func() {
		defer func() {
			if p := recover(); p != nil {
				rep = &reply{st: NodeFailed, err: fmt.Errorf("redlock: malformed reply: go-redis panicked: %v", p)}
			}
		}()
		if sent, rep = c.before(nd, batchProbe); rep != nil {
			return
		}
		var res any
		var err error
		if nd.identified.Load() {
			res, err = nd.c.Do(ctx, b.args(false)...).Result()
			if isNoScript(err) {
				res, err = nd.c.Do(ctx, b.args(true)...).Result()
			}
		} else {
			res, err = c.identifyBatch(ctx, nd, b)
		}
		c.deliver(nd, b, res, err, sent)
	}()
	if rep != nil {
		b.fail(nd, *rep)
	}
}

// identifyBatch sends INFO server and the batch (as EVAL) in one
// pipeline to a node not yet identified, as firstContact does for a
// round's request.
func (c *Client) identifyBatch(ctx context.Context, nd *node, b *batchJob) (any, error) {
	pl := nd.c.Pipeline()
	info := pl.Info(ctx, "server")
	cmd := redis.NewCmd(ctx, b.args(true)...)
	_ = pl.Process(ctx, cmd)
	_, xerr := pl.Exec(ctx)
	res, err := cmd.Result()
	if err == nil && res == nil {
		err = xerr
		if err == nil {
			err = redis.Nil
		}
	}
	if err != nil && info.Err() != nil {
		return nil, err
	}
	if ierr := c.identified(nd, info.Val(), info.Err()); ierr != nil {
		return nil, ierr
	}
	return res, err
}

// extendTick extends the entries of tk (closest deadline first): it
// starts a round per lock, sends the batches to every node, and hands
// the rounds to collectTick. late is how late the tick started.
func (c *Client) extendTick(tk *tick, es []*entry, late time.Duration) {
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
		if ns[k] < 0 || c.limitReached(e, ns[k]) {
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
			c.extended(e, err)
			continue
		}
		req := &reqs[k]
		*req = request{op: opExtend, keys: l.keys, token: l.token, ttl: e.ttl, fam: l.fam, floor: &l.floor, prefix: c.cfg.prefix}
		rd := &rds[k]
		c.initRound(rd, e.ctx, req, l.cfg, res[k*n:(k+1)*n:(k+1)*n], start)
		rd.tick = tk
		it := &slab[k]
		*it = batchItem{e: e, rd: rd, kind: kindLetter(l.fam), wire: prefixKeys(c.cfg.prefix, l.keys)}
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
	var plain, bySlot []*batchJob
	for _, nd := range c.nodes {
		var jobs []*batchJob
		switch {
		case shardingOf(nd.c) != shardSlot:
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
			c.submit(nd, job{bt: b, i: nd.idx, ctx: context.Background()})
		}
	}
	go c.collectTick(tk, items)
}

// chunkBatches splits items, in order, into batches of at most maxBatch.
func chunkBatches(items []*batchItem) []*batchJob {
	var out []*batchJob
	for len(items) > 0 {
		n := min(len(items), maxBatch)
		b := &batchJob{items: items[:n:n]}
		b.build()
		out = append(out, b)
		items = items[n:]
	}
	return out
}

// slotBatches groups items by hash slot, for a Redis Cluster node (a
// script's keys must share one slot), keeping their order within a slot.
// A lock whose keys span several slots (which its acquire refused on
// such a node, so it is held there nowhere) goes alone.
func slotBatches(items []*batchItem) []*batchJob {
	var out []*batchJob
	bySlot := map[int][]*batchItem{}
	var order []int
	for _, it := range items {
		s := keySlot(it.wire[0])
		for _, k := range it.wire[1:] {
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
func (c *Client) collectTick(tk *tick, items []*batchItem) {
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
			l.unlockExt()
			c.extended(it.e, err)
		}
		pending = kept
	}
}
