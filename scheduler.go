package redlock

import (
	"container/heap"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// The client's auto-extension scheduler. Every auto-extended lock
// (AutoExtend, Do, and the family's locks under either) is an entry in
// one timer heap, ordered by when it falls due: no goroutine and no
// round per lock. One goroutine waits for the earliest entry; when it
// falls due, every entry due by then (and those due soon after, see
// coalesce) is extended in one tick: one batched request per node
// (scheduler.go), whose reply says, lock by lock, what the node did. Each
// lock's round is decided and applied as its own Extend would be.
//
// Priority and backlog. A tick sends its locks closest-deadline first,
// and at most maxTick of them: a crowd of locks due at once is spread
// over several ticks. When ticks start late (a loaded machine, such a
// crowd), the scheduler measures that lag and brings every lock's next
// extension forward by twice the lag (at most TTL/4), so that its own
// queue never brings a lock to its loss margin: under backlog it
// extends earlier, not later.

// sched is the client's scheduler; its zero value is ready.
type sched struct {
	mu      sync.Mutex
	h       entryHeap
	running bool          // the loop runs
	wake    chan struct{} // pokes the loop when the earliest entry changed; cap 1
	lag     time.Duration // how late ticks start: the last lateness, or a decaying higher one
	// live lists every entry added and not yet removed, in the heap or
	// in a tick, so that Close can end them all (endAll); closed: Close
	// ran, and no entry is added any more.
	live   entryList
	closed bool
}

// entryList is an intrusive doubly linked list of entries: 16 bytes an
// auto-extended lock, with no map to grow.
type entryList struct{ head *entry }

func (ls *entryList) push(e *entry) {
	e.next, e.prev = ls.head, nil
	if ls.head != nil {
		ls.head.prev = e
	}
	ls.head = e
	e.listed = true
}

func (ls *entryList) unlink(e *entry) {
	if !e.listed {
		return
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		ls.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	}
	e.prev, e.next, e.listed = nil, nil, false
}

// entry is one auto-extended lock in the scheduler. While it is in the
// heap the scheduler also watches its expiry (exp), in place of a
// runtime timer of the lock's own (see Lock.armLocked): a burst of
// expiries is then handled by one goroutine, closest deadline first.
type entry struct {
	l     *Lock
	ctx   context.Context // AutoExtend's
	ttl   time.Duration   // extended by this TTL each time
	retry time.Duration   // delay before retrying a failed extension
	stop  func() bool     // unregisters the ctx's AfterFunc

	// Guarded by sched.mu.
	due  time.Time // extend at (or after) this instant
	exp  time.Time // the lock's deadline less its loss margin: Done closes then
	dl   time.Time // the lock's deadline when due was set: the priority
	key  int64     // at(), in nanoseconds since the process's clock base: the heap's order
	set  time.Time // when due or exp was last set: see sched.loop's late
	idx  int       // index in the heap; -1 when not in it
	gone bool      // removed: not queued again

	prev, next *entry // in sched.live
	listed     bool
}

// at is when the scheduler next looks at e: its extension or its expiry.
func (e *entry) at() time.Time {
	if !e.exp.IsZero() && e.exp.Before(e.due) {
		return e.exp
	}
	return e.due
}

// clockBase is the origin of entry keys: comparing int64 keys is much
// cheaper than comparing time.Time values, and the heap compares often.
var clockBase = time.Now()

// rekey sets e.key from at() (s.mu held).
func (e *entry) rekey() { e.key = int64(e.at().Sub(clockBase)) }

// tick is one batch of extensions in flight.
type tick struct {
	left atomic.Int64  // rounds not decided yet
	all  chan struct{} // closed when left falls to 0
}

// decided counts one of the tick's rounds decided.
func (tk *tick) decided() {
	if tk.left.Add(-1) == 0 {
		close(tk.all)
	}
}

// maxTick is the most locks one tick extends: the rest wait for the next
// tick, tickGap later, so that a crowd of locks due together is spread
// over several smaller batches rather than sent as one that keeps every
// node busy for long.
const maxTick = 2048

// tickGap is the least time between two ticks: the locks that fall due
// (or are added) within it go in one batch, not in one request each.
const tickGap = 2 * time.Millisecond

// coalesce is how much earlier than due a lock may be extended when a
// tick is sent anyway: a fraction of its TTL, so that locks that fall due
// together (taken at about the same time) are extended together rather
// than each in its own tick.
func (e *entry) coalesce() time.Duration { return e.ttl / 16 }

// add schedules e to be extended at due (dl: the lock's deadline), unless
// it was removed. It reports false when the Client was closed: e is not
// added, and marked removed.
func (s *sched) add(c *Client, e *entry, due, dl time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addLocked(c, e, due, dl)
}

func (s *sched) addLocked(c *Client, e *entry, due, dl time.Time) bool {
	if s.closed {
		e.gone = true
		return false
	}
	if e.gone {
		return true
	}
	if !e.listed {
		s.live.push(e)
	}
	e.due, e.dl = due, dl
	e.set = time.Now()
	e.rekey()
	if e.idx >= 0 {
		s.h[e.idx].key = e.key
		heap.Fix(&s.h, e.idx)
	} else {
		heap.Push(&s.h, e)
	}
	if e.idx == 0 {
		s.poke()
	}
	if !s.running {
		s.running = true
		if s.wake == nil {
			s.wake = make(chan struct{}, 1)
		}
		go s.loop(c)
	}
	return true
}

// endAll ends every auto-extended lock for Close: no extension is sent
// after it returns, and each lock ends as one whose auto-extension was
// lost (Done closed, Validity 0, Err matching ErrLockLost and
// ErrClosed); its keys stay on the nodes until Unlock or their TTL. The
// scheduler accepts no entry afterwards (add reports false).
func (s *sched) endAll() {
	s.mu.Lock()
	s.closed = true
	var ls []*entry
	for e := s.live.head; e != nil; e = e.next {
		ls = append(ls, e)
	}
	s.mu.Unlock()
	for _, e := range ls {
		l := e.l
		l.mu.Lock()
		if l.w != nil && l.w.ent == e {
			l.loseLocked(errClosedLost)
		}
		l.mu.Unlock()
		s.remove(e) // also an entry its lock no longer points to
	}
}

// errClosedLost ends the auto-extended locks of a closed Client.
var errClosedLost = &lostError{msg: "lock lost: the Client was closed, which ends auto-extension", errs: []error{ErrLockLost, ErrClosed}}

// expireAt makes the scheduler end e's lock at exp (see Lock.armLocked).
// It reports false when e was removed: a timer of the lock's own must
// watch the expiry then.
func (s *sched) expireAt(e *entry, exp time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.gone {
		return false
	}
	e.exp = exp
	e.set = time.Now()
	e.rekey()
	if e.idx >= 0 {
		s.h[e.idx].key = e.key
		heap.Fix(&s.h, e.idx)
		if e.idx == 0 {
			s.poke()
		}
	}
	return true
}

// poke wakes the loop (s.mu held).
func (s *sched) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// remove takes e out of the scheduler for good. An extension of it in
// flight still ends, but nothing follows it (see extended), and the lock
// ignores it once released (Lock.endExtend). It also unregisters the
// AutoExtend ctx's AfterFunc. It is idempotent.
func (s *sched) remove(e *entry) {
	s.takeOut(e)
	e.stop()
}

// takeOut is remove without unregistering the AfterFunc: for that
// AfterFunc itself, which may run before AutoExtend has even stored its
// stop function (a ctx already done).
func (s *sched) takeOut(e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.gone = true
	s.live.unlink(e)
	if e.idx >= 0 {
		heap.Remove(&s.h, e.idx)
		if len(s.h) == 0 {
			s.poke() // the loop returns now, not when its timer fires
		}
	}
}

// loop runs the ticks; it returns when no entry is left.
func (s *sched) loop(c *Client) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var last time.Time // the last tick
	for {
		s.mu.Lock()
		if len(s.h) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		now := time.Now()
		top := s.h[0].e
		wait := top.at().Sub(now)
		if gap := last.Add(tickGap).Sub(now); wait < gap && (top.exp.IsZero() || top.exp.After(now)) {
			wait = gap // no tick sooner than tickGap after the last one
		}
		if wait > 0 {
			s.mu.Unlock()
			t.Reset(wait)
			select {
			case <-t.C:
			case <-s.wake:
				t.Stop()
			}
			continue
		}
		// How late the loop runs: since the top entry fell due, or since
		// it was (re)scheduled if it was already due then. An extension
		// applied late (its round waited for a slow node) comes back
		// already due; counted as the loop's lateness, it raised the
		// lag, which brings every lock's next extension forward
		// (advance), so that more came back already due: rising lag and
		// extension traffic fed each other on a loaded machine.
		late := max(now.Sub(laterOf(top.at(), top.set)), 0)
		last = now
		var expired, due []*entry
		for len(s.h) > 0 {
			e := s.h[0].e
			switch {
			case !e.exp.IsZero() && !e.exp.After(now):
				expired = append(expired, e)
			case e.due.Sub(now) <= e.coalesce()+late && len(due) < maxTick:
				due = append(due, e)
			default:
				e = nil
			}
			if e == nil {
				break
			}
			heap.Pop(&s.h)
		}
		s.mu.Unlock()
		// Expiries first, closest first: each lock is ended (or, if an
		// Extend moved its deadline meanwhile, looked at again later).
		slices.SortFunc(expired, func(a, b *entry) int { return a.exp.Compare(b.exp) })
		for _, e := range expired {
			e.l.expire(e)
		}
		if len(due) > 0 {
			tk := &tick{all: make(chan struct{})}
			// Closest deadline first: a batch split in several requests
			// sends the most urgent first, on every node.
			slices.SortFunc(due, func(a, b *entry) int { return a.dl.Compare(b.dl) })
			c.extendTick(tk, due, late)
		}
	}
}

// laterOf returns the later of a and b.
func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// advance is how much earlier than at TTL/2 left a lock of ttl is
// extended when the scheduler lags by lag: twice the lag, at most TTL/4.
func advance(lag, ttl time.Duration) time.Duration { return min(2*lag, ttl/4) }

// measured records how late a tick started: lag follows a rise at once
// and decays by an eighth per tick.
func (s *sched) measured(late time.Duration) {
	s.mu.Lock()
	s.lag = max(late, s.lag-s.lag/8)
	s.mu.Unlock()
}

// entryHeap is a min-heap of entries by when they are next looked at.
// Each slot holds its entry's key, so that comparisons read the heap's
// own array, not 100 000 entries scattered over the heap memory.
type entryHeap []slot

type slot struct {
	key int64
	e   *entry
}

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].key < h[j].key }
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].e.idx, h[j].e.idx = i, j
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.idx = len(*h)
	*h = append(*h, slot{key: e.key, e: e})
}
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1].e
	old[len(old)-1] = slot{}
	*h = old[:len(old)-1]
	e.idx = -1
	if cap(*h) > 64 && len(*h) < cap(*h)/4 {
		*h = slices.Clip(slices.Clone(*h)) // give the memory back after a peak
	}
	return e
}

// limitReached reports whether a hold limit (WithMaxExtensions,
// WithMaxHold) forbids e's next extension; then e is dropped and the
// lock lives out its validity (less the loss margin) before its watch
// ends with ErrHoldLimit.
// n is how many extensions auto-extension won for the lock (watch.autoN).
func (c *Client) limitReached(e *entry, n int) bool {
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

// readd puts e, popped for its expiry, back with its due time.
func (s *sched) readd(c *Client, e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(c, e, e.due, e.dl)
}

// expire runs when the scheduler finds e's expiry passed: it ends the
// lock as its own timer would (see armLocked), unless an Extend moved
// the deadline since; then e goes back into the heap.
func (l *Lock) expire(e *entry) {
	l.mu.Lock()
	l.armLocked()
	ended := l.w == nil || l.w.err != nil
	l.mu.Unlock()
	if !ended {
		l.c.sched.readd(l.c, e)
	}
}

// extended schedules what follows an extension of e that returned err,
// as the extension loop of AutoExtend describes: the next extension at
// TTL/2 left (earlier under backlog), a retry after a jittered delay
// while validity lasts, or the end of a lock proven lost.
func (c *Client) extended(e *entry, err error) {
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

// A tick of the scheduler (scheduler.go) extends its locks in batches:
// per node, one batched request (wire.BatchArgv, node.Batch) carries up
// to wire.MaxBatch locks, each checked and extended on its own, and its
// reply is one status per lock. Each lock still has its own round
// (quorum.go), started at the tick's start, to which every node's status
// for it is reported: votes, early decision, validity, drift, the floor,
// the observer's events and the errors are those of an Extend. Batches
// ride the nodes' pipes (internal/node), in order with the other
// requests.

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
		val := l.heldValue() // what a heal writes back (extend/kinds.lua)
		*req = request{w: wire.Request{Op: opExtend, Token: val, TTL: e.ttl, Fence: l.fence}, keys: l.keys, fam: l.fam, floor: &l.floor, over: &l.over, prefix: c.cfg.prefix}
		rd := &rds[k]
		c.initRound(rd, e.ctx, req, l.cfg, res[k*n:(k+1)*n:(k+1)*n], start)
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
	go c.collectTick(tk, items)
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
			l.dropHealed(it.rd, false)
			l.unlockExt()
			c.extended(it.e, err)
		}
		pending = kept
	}
}
