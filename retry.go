package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// lock retries tryLock with jittered delays until it wins, ctx is done or
// the retry budget is spent. Once the key is found held it also waits for
// the holder's release announcement (pubsub.go), whichever comes first.
func lockLoop(ctx context.Context, c *Client, keys []string, ttl time.Duration, cfg *config, fam *family) (*Lock, error) {
	// Every attempt has a token of its own. Were one token reused, the
	// release of an earlier, lost attempt that reached a slow node late
	// could delete the key a later, winning attempt had just set there,
	// and a contender could then take that node: two holders.
	if cfg.token != "" {
		return nil, invalidf("WithToken applies to TryLock only: retries under one token could release each other's keys")
	}
	if err := c.check(ctx, ttl, cfg); err != nil {
		return nil, err
	}
	var intent time.Duration
	if fam == nil {
		intent = writerMark(cfg.retryDelay, cfg.timeoutFor(ttl))
	}
	// One call per key of this Client at a time sends attempts: the
	// others wait in its line (queue.go).
	lkey := lineKey(keys, fam)
	ln, waited, err := c.lines.enter(ctx, lkey)
	if err != nil {
		// It waited behind another call of this Client on the key,
		// which holds it or waits for it: contention, as an attempt's
		// refusal would have said.
		return nil, unsentError(c, opAcquire, keysShown(keys, fam), ErrNotObtained, ErrContended, err)
	}
	defer c.lines.leave(lkey, ln)
	if waited && ctx.Err() != nil {
		// Handed the front as ctx ended: as above.
		return nil, unsentError(c, opAcquire, keysShown(keys, fam), ErrNotObtained, ErrContended, ctx.Err())
	}
	queued := queued(c, keys, cfg, fam)
	// The front of a line in the key's queue may be handed the key by an
	// Unlock of this Client (handon.go): b is its request for that, made
	// once the call has met contention (it waited in its line, or an
	// attempt found the key held), so that an uncontended Lock spends
	// nothing on it.
	var b *baton
	defer func() {
		if b != nil {
			c.lines.withdraw(ln, b)
		}
	}()
	if queued && waited {
		b = newBaton(ctx, ttl, cfg)
		c.lines.offer(ln, b)
	}
	w := ln.w // pub/sub hand-off, joined once the key is found held
	if w != nil && w.queued.Load() != queued {
		// Joined by a call with other options: this one's wake-ups differ.
		c.hub.leave(w)
		w, ln.w = nil, nil
	}
	// A call that takes the front of a line in the key's queue checks in
	// before it attempts: the key is likely held, by its predecessor.
	checkIn := queued && w != nil
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	// last is the error of the last attempt that completed: when ctx
	// ends the wait, it says why the lock was not had (held, nodes
	// down), which ctx's error alone does not.
	var last error
	// local is the count of this Client's releases at the last attempt
	// (see hub.local).
	var local uint64
	attemptNext := false // after the wait, attempt even though queued
	for try := 0; ; {
		var wake <-chan struct{}
		if w != nil {
			wake = w.wake
		}
		if b != nil {
			if b.taken.Load() {
				// An Unlock is handing the key to this call: an attempt
				// now would find it held.
				select {
				case nl := <-b.got:
					if l, done := handedOn(c, ln, &b, nl, ctx, ttl, cfg); done {
						return l, nil
					}
					checkIn = false
					continue
				case <-ctx.Done():
					if last == nil {
						return nil, unsentError(c, opAcquire, keysShown(keys, fam), ErrNotObtained, ErrContended, ctx.Err())
					}
					return nil, waitEnded(last, ctx.Err())
				}
			}
		}
		if !checkIn {
			try++
			if w != nil {
				w.drain() // this attempt sees the releases announced so far
				w.named.Store(false)
			}
			token, err := cfg.newToken()
			if err != nil {
				return nil, err
			}
			local = c.hub.local.Load()
			l, err := c.tryLock(ctx, keys, ttl, token, cfg, fam, markFor(ctx, intent))
			if err == nil || !retryable(err) {
				if err == nil && queued {
					ln.setTicket(0) // out of the queue: the next call queues anew
					c.lines.won(ln)
				}
				if err != nil && last != nil && ctx.Err() != nil && !errors.Is(err, ErrInvalid) {
					// Cut short by ctx, with nodes still pending: the
					// completed attempt before it says more.
					return nil, waitEnded(last, ctx.Err())
				}
				if err != nil && last == nil && waited && ctx.Err() != nil {
					// The first attempt of a call that waited in its
					// line, cut short by ctx: the wait was contention.
					err = contendedToo(err)
				}
				return l, err
			}
			last = err
			if cfg.maxTries > 0 && try >= cfg.maxTries {
				return nil, err
			}
			contended := errors.Is(err, ErrContended)
			if contended && queued && b == nil {
				b = newBaton(ctx, ttl, cfg)
				c.lines.offer(ln, b)
			}
			if w == nil && !cfg.noHandoff && contended {
				on := keys // the keys whose releases wake us
				if fam != nil {
					on = fam.wake
				}
				w = c.hub.join(c, on, fam != nil && fam.kind == kindRead, false, queued)
				ln.w = w
				w.ticket.Store(ln.ticket)
				wake = w.wake
				if !queued && c.hub.local.Load() != local {
					// One of this Client's Unlocks ran before the join and
					// may have freed the key: its wake found no waiter.
					w.notify()
				}
			}
			checkIn = queued && contended
		}
		d := jitter(cfg.retryDelay)
		if checkIn {
			checkIn = false
			try++ // a check-in spends the retry budget as an attempt does
			before := c.hub.local.Load()
			switch r := queueCheckIn(ctx, c, ln, keys[0], ttl, cfg); r.St {
			case wire.StatusOK:
				continue // free, and we are next
			case wire.StatusTaken:
				if r.Rank == 0 && c.hub.local.Load() != before {
					// One of this Client's releases ran meanwhile: the
					// check-in may have preceded it on the node (it is
					// sent outside the pipes), and its wake-up found us
					// not yet next. Check in again.
					checkIn = true
					continue
				}
				w.queued.Store(true)
				w.head.Store(r.Rank == 0)
				// Named by the release before ours; until then, check
				// in now and then (queuePoll). The head attempts after
				// its retry delay instead: its attempts keep up a
				// waiting writer's mark on a key that readers hold
				// (Client.Lock), and find a lock that expired unreleased.
				d = jitter(queuePoll(cfg))
				if r.Rank == 0 {
					d, attemptNext = jitter(min(cfg.retryDelay, queuePoll(cfg))), true
				}
			default:
				// The queue node failed: wait and retry as without a
				// queue, woken by any release, and at least every
				// queuePoll: with the queue node down, one node alone
				// announces a release (wire.Request.Prepare), and its
				// announcement may come before the others have
				// released. A waiter that was queued attempts at once:
				// it ignored releases that named nobody, and one of them
				// may have freed the key.
				d = jitter(min(cfg.retryDelay, queuePoll(cfg)))
				if w.queued.Swap(false) {
					d = 0
				}
				w.head.Store(false)
				if c.hub.local.Load() != local {
					// One of this Client's Unlocks may have freed the key
					// since the attempt, unseen: see the join above.
					d = 0
				}
			}
			if cfg.maxTries > 0 && try >= cfg.maxTries {
				if last != nil {
					return nil, last
				}
				// Spent on check-ins alone (a call that took over its
				// line's front): one attempt, whose error it returns.
				checkIn = false
				continue
			}
		}
		if d < 0 {
			d = jitter(cfg.retryDelay)
		} else if d == 0 {
			continue
		} else if queued && w != nil && w.queued.Load() && !attemptNext {
			checkIn = true // the timer's end checks in rather than attempts
		}
		attemptNext = false
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		var got chan *Lock // b's, when it was made by now
		if b != nil {
			got = b.got
		}
		select {
		case <-timer.C:
		case nl := <-got:
			if l, done := handedOn(c, ln, &b, nl, ctx, ttl, cfg); done {
				return l, nil
			}
			checkIn = false
		case <-wake: // a release, or the subscription is ready
			if queued && w != nil && w.queued.Load() {
				// Named: attempt at once. Else (the subscription is
				// ready: a release may have gone unseen) check in.
				checkIn = !w.named.Swap(false)
			}
		case <-ctx.Done():
			if last == nil {
				// Only check-ins ran: they found the key held.
				return nil, unsentError(c, opAcquire, keysShown(keys, fam), ErrNotObtained, ErrContended, ctx.Err())
			}
			return nil, waitEnded(last, ctx.Err())
		}
	}
}

// handedOn takes the outcome nl of a hand-on to the call at the front of
// ln, whose baton *b was: done with nl when it won; else the holder has
// released the key, and the call, with a new baton, attempts at once.
func handedOn(c *Client, ln *line, b **baton, nl *Lock, ctx context.Context, ttl time.Duration, cfg *config) (*Lock, bool) {
	*b = nil
	if nl != nil {
		ln.setTicket(0) // out of the queue, as on any win
		return nl, true
	}
	*b = newBaton(ctx, ttl, cfg)
	c.lines.offer(ln, *b)
	return nil, false
}

// contendedToo returns err, a cut-short attempt's *QuorumError, matching
// ErrContended too.
func contendedToo(err error) error {
	var qe *QuorumError
	if !errors.As(err, &qe) || errors.Is(err, ErrContended) {
		return err
	}
	e := *qe
	e.reasons = append(append([]error(nil), qe.reasons...), ErrContended)
	return &e
}

// keysShown returns the keys that errors name for a lock on keys of
// family fam (nil: a key lock).
func keysShown(keys []string, fam *family) []string {
	if fam != nil {
		return fam.shown
	}
	return keys
}

// waitEnded is the error of a wait that ctx ended (ctxErr) after an
// attempt that failed with last: it matches ErrNotObtained, ctxErr and
// last's reasons (ErrContended, ErrUnreachable, ...), and errors.As
// reaches last's *QuorumError, with every node's answer to that attempt.
// last itself is not changed: an observer may hold it.
func waitEnded(last, ctxErr error) error {
	var qe *QuorumError
	if !errors.As(last, &qe) {
		return errors.Join(ErrNotObtained, ctxErr, last)
	}
	ended := *qe
	ended.waitErr = ctxErr
	return &ended
}

// retryable reports whether another attempt may succeed: not for an
// invalid call, a cancelled one, nor one that values of a foreign type
// at the keys alone lost (foreignBlocked).
func retryable(err error) bool {
	return !foreignBlocked(err) &&
		!errors.Is(err, ErrInvalid) &&
		!errors.Is(err, context.Canceled) &&
		!errors.Is(err, context.DeadlineExceeded)
}

// foreignBlocked reports whether err is a lost round in which more
// nodes failed with WRONGTYPE than the quorum can spare: values that
// none of our kinds writes sit at the lock's keys (see internal/wire). Those
// are the nodes' answers, not an outage: no retry can win until someone
// removes the values, so Lock returns the error rather than wait for
// them.
func foreignBlocked(err error) bool {
	return failedBeyondQuorum(err, wire.IsWrongType)
}

// deniedByACL reports whether err is a lost round in which more nodes
// refused a command by their ACL than the quorum can spare: not an
// outage, and no retry gets past it.
func deniedByACL(err error) bool {
	return failedBeyondQuorum(err, wire.IsACLDenied)
}

// failedBeyondQuorum reports whether err is a lost round in which more
// nodes failed with an error that is accepts than the quorum can spare.
func failedBeyondQuorum(err error, is func(error) bool) bool {
	var qe *QuorumError
	if !errors.As(err, &qe) {
		return false
	}
	n := 0
	for _, r := range qe.Nodes {
		if r.Status == statusFailed && r.Err != nil && is(r.Err) {
			n++
		}
	}
	return n > len(qe.Nodes)-qe.Quorum
}
