package redlock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// Hand-on: within one Client, the Unlock of a key lock gives the key to
// the Lock call at the front of the key's line (queue.go), in one round,
// instead of releasing it and leaving that call to learn of the release
// and acquire it (docs/contention.md).
//
// The round is an acquire under the waiting call's token, ttl and
// options whose script may also take the key where it holds the
// unlocking holder's token (key/swap.lua): a compare-and-set on a
// quorum, as every grant is, so mutual exclusion, validity and the
// queue's other guarantees do not rest on it. Won, the waiting call
// returns its lock, its validity counted from the round's start; lost,
// the Unlock releases the key as it would have, and the call attempts at
// once.
//
// Fairness across Clients is kept by a budget: a Client that won the key
// through the nodes' queue hands it on at most as many times as it had
// calls waiting behind the winner then. Calls that join later wait for
// the Client's next turn in the nodes' queue, where its line queued
// again as the key was granted.

// baton is a line's front call waiting to be handed the key: what the
// Unlock that hands it on needs to acquire it for that call.
type baton struct {
	ctx context.Context
	ttl time.Duration
	cfg *config
	got chan *Lock // buffered: the hand-on's lock, or nil when it lost
	// taken: an Unlock took the baton and is handing the key on.
	taken atomic.Bool
	mu    sync.Mutex
	gone  bool // the call returned without the answer: deliver releases it
}

func newBaton(ctx context.Context, ttl time.Duration, cfg *config) *baton {
	return &baton{ctx: ctx, ttl: ttl, cfg: cfg, got: make(chan *Lock, 1)}
}

// deliver gives b's call the hand-on's lock nl (nil: the hand-on lost,
// and the key was released); when that call has returned, it releases
// nl instead, in the background (Close waits for it).
func (b *baton) deliver(nl *Lock) {
	b.mu.Lock()
	if !b.gone {
		b.got <- nl
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	unlockUnused(nl)
}

// unlockUnused releases nl, a lock handed on to a call that had returned,
// in the background.
func unlockUnused(nl *Lock) {
	if nl == nil {
		return
	}
	nl.c.flights.Add(1)
	go func() {
		defer nl.c.flights.Done()
		_ = nl.Unlock(context.WithoutCancel(nl.actx))
	}()
}

// offer makes b the request of ln's front call to be handed the key.
func (ls *lines) offer(ln *line, b *baton) {
	ls.mu.Lock()
	ln.ask = b
	ls.mu.Unlock()
}

// won records that ln's front call won the key through the nodes: the
// calls behind it may be handed the key from now on, each once.
func (ls *lines) won(ln *line) {
	ls.mu.Lock()
	ln.budget = ln.n - 1
	ls.mu.Unlock()
}

// take returns the baton of the call waiting at the front of key's line
// and spends one hand-on of the line's budget; nil when there is none.
func (ls *lines) take(key string) *baton {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ln := ls.m[key]
	if ln == nil || ln.ask == nil || ln.budget <= 0 {
		return nil
	}
	b := ln.ask
	ln.ask, ln.budget = nil, ln.budget-1
	b.taken.Store(true)
	return b
}

// withdraw takes b back from ln as its call returns without the answer
// to it: a lock an Unlock handed on to it by then is released, one
// handed on later too (deliver). It does not wait.
func (ls *lines) withdraw(ln *line, b *baton) {
	ls.mu.Lock()
	if ln.ask == b {
		ln.ask = nil
		ls.mu.Unlock()
		return
	}
	ls.mu.Unlock()
	b.mu.Lock()
	b.gone = true
	var nl *Lock
	select {
	case nl = <-b.got:
	default:
	}
	b.mu.Unlock()
	unlockUnused(nl)
}

// handsOn reports whether l is a lock that its Unlock may hand on: a key
// lock of one key with a wait queue, won by a call of its Client, under a
// token of its own (one given with WithToken may be reused by a later
// lock, which the releases that follow a hand-on would then delete).
func (l *Lock) handsOn() bool {
	return l.fam == nil && len(l.keys) == 1 && !l.acquired.IsZero() &&
		l.cfg.token == "" && queued(l.c, l.keys, l.cfg, nil)
}

// handOn acquires l's key for the waiting call b in one round that may
// take it from l, and gives b the lock (give). It reports false when
// that round lost (its round, when one ran): l is to be released then as
// without a hand-on. Otherwise qe is Unlock's error: nil when a quorum
// held l's token.
//
// The round is not cut short by b's ctx: cut short, its requests may
// still land, and the nodes' answers to them are what Unlock's verdict
// on l needs. It is bounded by the per-node timeout; a lock it wins for
// a call that has returned meanwhile is released (baton.deliver).
func (l *Lock) handOn(b *baton, give func(*Lock)) (qe *QuorumError, ok bool, rd *round) {
	if b.ctx.Err() != nil {
		return nil, false, nil
	}
	token, err := b.cfg.newToken()
	if err != nil {
		return nil, false, nil
	}
	defer func() {
		if p := recover(); p != nil {
			// An observer of b's panicked, maybe after the round won:
			// neither token may stay on the nodes with nobody to release
			// it. The panic goes on unchanged.
			l.c.dropToken(l.keys, token, b.ttl)
			l.c.dropToken(l.keys, l.token, max(l.ttl, l.maxTTL))
			panic(p)
		}
	}()
	nl, out, err := l.c.acquire(context.WithoutCancel(b.ctx), l.keys, b.ttl, token, b.cfg, nil, 0, l)
	if err != nil || nl == nil {
		return nil, false, out.rd
	}
	give(nl)
	// Unlock's wait in all, as a release's would be.
	wait := max(out.rd.timeout, releaseTimeout) - time.Since(out.rd.start)
	return out.rd.handVerdict(wait), true, out.rd
}

// heldWith reports whether, of the hand-on rd that lost and the release
// rel that followed it, a quorum of nodes held the unlocking holder's
// token: the one where the hand-on took it from that holder (it is then
// released as the lost round's grant), the other where it was released.
// unknown: short of that, nodes that answered neither round (failed or
// pending in both) could make up the quorum, as failed nodes can for a
// release alone (ErrUnreachable).
func (rd *round) heldWith(rel *round) (held, unknown bool) {
	if rd == nil || rel == nil || rd.hand == nil {
		return false, false
	}
	rd.mu.Lock()
	st := make([]string, len(rd.res))
	for i, r := range rd.hand.nodes {
		st[i] = r.Status
	}
	rd.mu.Unlock()
	rel.mu.Lock()
	defer rel.mu.Unlock()
	n, u := 0, 0
	for i := range st {
		r := rel.res[i].Status
		switch {
		case st[i] == statusOK || r == statusOK:
			n++
		case (st[i] == statusFailed || st[i] == statusPending) && (r == statusFailed || r == statusPending):
			u++
		}
	}
	return n >= rd.need, n+u >= rd.need
}

// dropToken releases token from keys on every node, announced, and with
// no observer: the clean-up of a hand-on that a panic cut short.
func (c *Client) dropToken(keys []string, token string, ttl time.Duration) {
	quiet := c.cfg
	quiet.obs, quiet.log = nil, nil
	l := &Lock{c: c, keys: keys, token: token, ttl: ttl, maxTTL: ttl, cfg: &quiet}
	runRound(context.Background(), c, opRelease, l, ttl)
}

// releasePrev releases on node i the token of the lock that handed the
// key on (rd, its hand-on, did not take the key from it there, or may
// not have): that lock's Unlock releases nothing itself, so without this
// its key could stay on the node for its TTL. uncertain: the hand-on
// failed there, and may still land. On its own goroutine, which Close
// waits for: Report may not block.
func (rd *round) releasePrev(i int, uncertain bool) {
	c, nd := rd.c, rd.c.nodes[i]
	req := &request{w: wire.Request{Op: opRelease, Token: rd.req.w.Prev, TTL: rd.req.prevTTL}, keys: rd.req.keys, prefix: rd.req.prefix}
	c.flights.Add(1)
	go func() {
		defer c.flights.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(rd.parent), max(rd.timeout, releaseTimeout))
		defer cancel()
		r := exec(ctx, c, nd, req)
		switch {
		case r.St == wire.StatusFailed:
			retryRelease(c, nd, req, rd.req.prevTTL, r.Err, 0)
		case uncertain && r.St != wire.StatusOK:
			retryRelease(c, nd, req, rd.req.prevTTL, nil, node.RetryRecheck)
		}
	}()
}

// handTally counts, in a hand-on's round, the nodes where the key held
// the unlocking holder's token: Unlock's verdict, decided as a release
// round decides, by a quorum of them or by too many others.
type handTally struct {
	nodes       []NodeResult // as a release would have reported them
	held, other int
	decided     chan struct{}
}

// countHand records node i's reply (status st) to the hand-on. rd.mu
// must be held.
func (rd *round) countHand(i int, st string, free bool, err error, lat time.Duration) {
	t := rd.hand
	switch {
	case st == statusOK && !free:
		t.held++
	case st == statusOK:
		st = statusAbsent
		t.other++
	default:
		t.other++
	}
	t.nodes[i].Status, t.nodes[i].Err, t.nodes[i].Latency = st, err, lat
	if (t.held >= rd.need || t.other > len(rd.res)-rd.need) && t.decided != nil {
		close(t.decided)
		t.decided = nil
	}
}

// handVerdict waits at most wait for the hand-on's verdict on the old
// holder and returns Unlock's error: nil when a quorum held its token,
// else a *QuorumError matching ErrNotHeld.
func (rd *round) handVerdict(wait time.Duration) *QuorumError {
	rd.mu.Lock()
	d := rd.hand.decided
	rd.mu.Unlock()
	if d != nil && wait > 0 {
		t := getTimer(wait)
		select {
		case <-d:
		case <-t.C:
		}
		putTimer(t)
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	t := rd.hand
	if t.held >= rd.need {
		return nil
	}
	e := &QuorumError{Op: opOf(opRelease), Keys: rd.keys, Quorum: rd.need, OK: t.held,
		Nodes: append([]NodeResult(nil), t.nodes...), reasons: []error{ErrNotHeld}}
	failed := 0
	for _, r := range t.nodes {
		if r.Status == statusFailed || r.Status == statusPending {
			failed++
		}
	}
	if failed > 0 && t.held+failed >= rd.need {
		e.reasons = append(e.reasons, ErrUnreachable)
	}
	return e
}
