package redlock

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// watch tracks the end of a lock's life: Done's channel, the expiry timer,
// and the lock's entry in the client's scheduler when auto-extended.
type watch struct {
	done  chan struct{}
	err   error
	timer *time.Timer // ends the watch when Validity falls to the loss margin
	limit bool        // a hold limit stopped the extensions: the end says so

	ent *entry // auto-extension (scheduler.go); nil when not auto-extended

	// autoN is how many extensions auto-extension won, over every
	// AutoExtend of the lock: WithMaxExtensions counts them all, not
	// those since the last resume. Guarded by the client's sched.mu.
	autoN int

	// lastErr is the last failed extension's error: the reason given
	// should the lock then be lost. Guarded by l.mu.
	lastErr error

	// onEnd, when set, is called with the end's error as Done closes,
	// under l.mu and on the goroutine that ends the watch: Do cancels
	// fn's ctx with it, with no goroutine hop in between.
	onEnd func(error)
}

// minLossMargin is the floor of the loss margin: Done closes at least
// this long before Validity reaches 0 (unless that is more than a
// quarter of the TTL), however short the per-node timeout. It covers the
// lateness of timers and the scheduler on a loaded machine, so that
// Done never closes after the deadline because a timer fired late.
const minLossMargin = 20 * time.Millisecond

// w returns the lock's watch, creating it (and arming the expiry timer)
// on first use. l.mu must be held.
func (l *Lock) watchLocked() *watch {
	if l.w == nil {
		l.w = &watch{done: make(chan struct{})}
		if l.released {
			l.finishLocked(ErrReleased)
		} else {
			l.armLocked()
		}
	}
	return l.w
}

// lossMarginLocked is how long before its deadline a lock that no
// extension has carried further is reported lost (see Done): the
// per-node timeout for its TTL, at least minLossMargin, and at most
// TTL/4, so that auto-extension, which starts at TTL/2 left, has time
// for its retries. An extension started later could not be known to
// succeed before Validity ends, and the holder is left the margin to
// stop. The TTL is the one the deadline was computed from when that is
// shorter (an Extend to a shorter TTL in flight): a margin of the old
// TTL's quarter could exceed the whole of the new validity and report a
// held lock lost at once. l.mu must be held.
func (l *Lock) lossMarginLocked() time.Duration {
	if l.cfg == nil {
		return 0 // a zero Lock
	}
	ttl := l.ttl
	if l.dlTTL > 0 {
		ttl = min(ttl, l.dlTTL)
	}
	return min(max(l.cfg.timeoutFor(ttl), minLossMargin), ttl/4)
}

// armLocked (re)arms what ends the watch when Validity falls to the loss
// margin, or ends it now if it already has: the lock's own timer, or for
// an auto-extended lock the client's scheduler (scheduler.go), which
// watches the expiries of all its locks with no timer each. It runs
// whenever the deadline may have moved, earlier as well as later, so
// that Done never closes after Validity has reached 0. l.mu must be
// held.
func (l *Lock) armLocked() {
	w := l.w
	if w == nil || w.err != nil {
		return
	}
	at := l.deadline.Add(-l.lossMarginLocked())
	d := time.Until(at)
	switch {
	case d <= 0 && w.limit:
		l.finishLocked(&lostError{msg: "lock lost: hold limit reached (WithMaxExtensions or WithMaxHold): no more extensions", errs: []error{ErrLockLost, ErrHoldLimit}})
	case d <= 0 && w.lastErr != nil:
		l.finishLocked(&lostError{msg: "lock lost: validity ran out before an extension reached a quorum", last: w.lastErr, pre: " (last: ", post: ")", errs: []error{ErrLockLost, w.lastErr}})
	case d <= 0:
		l.finishLocked(&lostError{msg: "lock lost: validity ran out before an extension reached a quorum", errs: []error{ErrLockLost}})
	case w.ent != nil && l.c.sched.expireAt(w.ent, at):
		if w.timer != nil {
			w.timer.Stop() // armed before AutoExtend
		}
	case w.timer == nil:
		w.timer = time.AfterFunc(d, l.checkExpiry)
	default:
		w.timer.Reset(d)
	}
}

// checkExpiry runs when Validity falls to the loss margin; an Extend may
// have moved the deadline since.
func (l *Lock) checkExpiry() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armLocked()
}

// finishLocked records why the lock ended and closes Done. l.mu held.
func (l *Lock) finishLocked(err error) {
	w := l.w
	if w == nil || w.err != nil {
		return
	}
	w.err = err
	if w.timer != nil {
		w.timer.Stop()
	}
	close(w.done)
	if w.ent != nil {
		l.c.sched.remove(w.ent) // no extension after the end
	}
	if w.onEnd != nil {
		w.onEnd(err)
	}
	if err != ErrReleased {
		l.observeLostLocked(err) // observer.go
	}
}

// Done returns a channel that is closed when the lock can no longer be
// proven held: Validity fell to the loss margin with no extension having
// moved the deadline, an extension found the lock lost, or Unlock was
// called; Err says which. The loss margin is the per-node timeout, at
// least 20ms and at most TTL/4: Done closes that long before Validity
// reaches 0, so that the holder can stop in time. For a nil *Lock it
// returns a closed channel. Details: docs/api.md#lockdone.
func (l *Lock) Done() <-chan struct{} {
	if l == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.watchLocked().done
}

// Err returns nil while Done is open; then ErrReleased after Unlock, or an
// error matching ErrLockLost (and ErrNotHeld) after the lock was lost,
// with ErrHoldLimit joined when a hold limit stopped the extensions. When
// an extension found the lock lost, the error names the cause ("held by
// another owner on 2 of 3 nodes", "key missing on 2 of 3 nodes") and
// wraps that extension's *QuorumError (reach it with errors.As).
func (l *Lock) Err() error {
	if l == nil {
		return invalidf("nil *Lock")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.watchLocked().err
}

// AutoExtend extends the lock in the background, by its TTL each time
// Validity falls to half of it, until Unlock, ctx's end, a hold limit
// (WithMaxExtensions, WithMaxHold) or loss; Done and Err report the end.
// A lock whose ctx ended, neither released nor lost, may resume with a new
// ctx. A Client extends all its locks with one scheduler and one batched
// request per node per tick, not a goroutine per lock.
//
// Errors: ErrInvalid for a nil *Lock or ctx, or while an earlier
// AutoExtend's ctx is not done; ErrHoldLimit once a hold limit stopped it;
// ErrClosed after the Client's Close; Err() when the lock has already
// ended. Details: docs/api.md#lockautoextend.
func (l *Lock) AutoExtend(ctx context.Context) error {
	if l == nil {
		return invalidf("nil *Lock")
	}
	if l.c == nil {
		return invalidf("zero Lock (not returned by TryLock or Lock)")
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.watchLocked()
	if w.err != nil {
		return w.err
	}
	if w.limit {
		return errHoldLimitReached
	}
	if old := w.ent; old != nil {
		if old.ctx.Err() == nil {
			return errAlreadyExtending
		}
		// Its ctx is done, and its AfterFunc may not have run yet (it
		// runs on a goroutine of its own): retire the entry here, so
		// that the caller who cancelled it can resume at once. An
		// extension of it still in flight holds extMu, so the new
		// entry's waits for it (extendTick), and its result, a real
		// round, is applied as any Extend's.
		l.c.sched.remove(old)
		w.ent = nil
	}
	ttl := l.ttl
	e := &entry{l: l, ctx: ctx, ttl: ttl, retry: max(ttl/20, l.cfg.timeoutFor(ttl)), idx: -1}
	w.ent = e
	// No goroutine waits for ctx: when it is done, the entry is taken
	// out and the lock's own timer watches its expiry again.
	e.stop = context.AfterFunc(ctx, func() {
		l.c.sched.takeOut(e)
		l.mu.Lock()
		if l.w.ent == e {
			l.w.ent = nil // a later AutoExtend may resume
		}
		l.armLocked()
		l.mu.Unlock()
	})
	if !l.c.sched.add(l.c, e, l.deadline.Add(-ttl/2), l.deadline) {
		// The Client was closed: no auto-extension; the lock lives out
		// its validity.
		e.stop()
		w.ent = nil
		l.armLocked()
		return ErrClosed
	}
	l.armLocked() // the scheduler watches the expiry from now on
	return nil
}

// errHoldLimitReached is AutoExtend's error once a hold limit stopped
// the extensions: a resumed auto-extension would overrun the limit.
var errHoldLimitReached = causef([]error{ErrHoldLimit}, "hold limit reached (WithMaxExtensions or WithMaxHold): no more extensions")

// definiteLoss returns the error the lock ends with when qe, a failed
// extension's error, proves it lost: so many nodes answered that the key
// holds another owner's token or is missing that the rest cannot make a
// quorum. It returns nil otherwise: a node that failed, timed out or was
// not waited for may still hold the lock, so a round short of its quorum
// for want of answers proves nothing.
func definiteLoss(qe *QuorumError) error {
	if qe == nil {
		return nil
	}
	var taken, absent int
	for _, n := range qe.Nodes {
		switch n.Status {
		case statusTaken:
			taken++
		case statusAbsent:
			absent++
		}
	}
	n := len(qe.Nodes)
	if n-taken-absent >= qe.Quorum {
		return nil
	}
	of := " of " + strconv.Itoa(n) + " nodes"
	var msg string
	switch {
	case absent == 0:
		msg = "lock lost: held by another owner on " + strconv.Itoa(taken) + of
	case taken == 0:
		msg = "lock lost: key missing on " + strconv.Itoa(absent) + of
	default:
		msg = "lock lost: held by another owner on " + strconv.Itoa(taken) + " and key missing on " + strconv.Itoa(absent) + of
	}
	return &lostError{msg: msg, last: qe, pre: " (", post: ")", errs: []error{ErrLockLost, qe}}
}

// loseLocked ends the lock as lost with err, at once: Validity falls to
// <= 0 (the deadline to now, unless it was already behind), and Done
// closes, so that Validity, Done and Err agree. l.mu must be
// held.
func (l *Lock) loseLocked(err error) {
	if now := time.Now(); now.Before(l.deadline) {
		l.deadline = now
	}
	// No extension is sent from now on (startExtend): what the last ones
	// healed may be released.
	l.over.Store(true)
	if l.w == nil {
		// Nobody asked for Done yet: the watch starts ended, with the
		// cause rather than a later "validity ran out".
		l.w = &watch{done: make(chan struct{})}
	}
	l.finishLocked(err)
}

// stopWatch ends the lock's watch with err, which takes the lock out of
// the client's scheduler (finishLocked).
func (l *Lock) stopWatch(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		l.finishLocked(err)
	}
}

// Do acquires key (waiting as Lock does), runs fn with the lock
// auto-extended, and releases it when fn returns or panics. fn's ctx is
// cancelled, with a cause matching ErrLockLost, as soon as the lock can no
// longer be proven held: before the lease can end on the nodes.
//
// Do returns Lock's error when the lock was not obtained; an error
// matching ErrLockLost and ErrNotHeld, joined with fn's, when the lock was
// lost while fn ran; else fn's error. ErrInvalid for a nil fn. A failed
// release is retried in the background, not reported; a panic goes on to
// the caller after the release. Details: docs/api.md#clientdo.
func (c *Client) Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) error, opts ...LockOption) error {
	if fn == nil {
		return invalidf("nil fn")
	}
	l, err := c.Lock(ctx, key, ttl, opts...)
	if err != nil {
		return err
	}
	return l.do(ctx, fn)
}

// do runs fn under the held lock l, with auto-extension. Its deferred
// release runs whether fn returns, panics or calls runtime.Goexit.
func (l *Lock) do(ctx context.Context, fn func(ctx context.Context) error) error {
	fctx, cancel := context.WithCancelCause(ctx)
	defer func() {
		// Unlock takes the lock out of the scheduler; a panic goes on.
		_ = l.Unlock(context.WithoutCancel(ctx))
		cancel(nil)
	}()
	if err := l.AutoExtend(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	if w := l.watchLocked(); w.err != nil {
		cancel(w.err)
	} else {
		w.onEnd = cancel
	}
	l.mu.Unlock()
	ferr := fn(fctx)
	if lost := l.Err(); lost != nil && errors.Is(lost, ErrLockLost) {
		if ferr == nil {
			return lost
		}
		return &causeError{msg: lost.Error() + "; fn: " + ferr.Error(), errs: []error{lost, ferr}}
	}
	return ferr
}
