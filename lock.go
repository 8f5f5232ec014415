package redlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// Lock is a held lock: an immutable handle that owns its random token.
// Its methods are safe for concurrent use. Methods on a nil *Lock return
// an error matching ErrInvalid (or zero values), never panic.
type Lock struct {
	c     *Client
	keys  []string
	token string
	ttl   time.Duration
	cfg   *config
	fam   *family         // a path, read or permit lock (family.go); nil for a key lock
	actx  context.Context // the acquiring call's, for observer events

	acquired time.Time // monotonic start of the acquiring round
	fence    int64     // fencing token; 0 without WithFencing
	// intent is how long an acquire that readers refuse marks the key
	// (request.intent); 0 but for Lock's attempts on key locks.
	intent time.Duration

	// extMu serialises Extend rounds. Two Extends in flight at once
	// could reach the nodes in either order while the deadline would be
	// set by whichever returned last: Validity could then promise a long
	// TTL that a later, shorter one had replaced on every node. One
	// round at a time, and a node's requests run in order (internal/node), so
	// the last won round is what its quorum holds.
	extMu sync.Mutex
	// extWait, when set, is closed by the next unlockExt: an Extend of
	// the caller's that found extMu held waits on it, and on its ctx
	// (lockExt). A pointer, so that a lock nobody waits on costs 8 bytes.
	extWait atomic.Pointer[chan struct{}]
	// floor (nanoseconds; 0: none) is the smallest TTL of a request of
	// this lock (acquire or extend) that failed, and so may still land
	// on its node later than a request sent after it, even one that
	// node granted: a timed-out request can sit in a paused server's
	// socket while the next goes out on another connection. A later
	// Extend therefore counts at most floor from its start.
	floor atomic.Int64
	// unlocked is set by Unlock, for the acquire round's replies still
	// in flight (see request.unlocked). The lock keeps no reference to
	// that round: a held lock costs its handle, not its round.
	unlocked atomic.Bool
	// over is set once no later round of the lock can count a node:
	// by Unlock, and when an extension found the lock lost or left its
	// Validity <= 0 (loseLocked, endExtend), so that no Extend is sent
	// again. Not when Done closes at the loss margin: an Extend may
	// still be sent and won then. Once over, the keys an extension put
	// back on a node that had lost them (a heal) are released, should
	// its reply come now (see round.undoHeal, Lock.dropHealed,
	// docs/safety.md).
	over atomic.Bool
	// value, when set, is what the nodes keep for this lock in place of
	// token: a leadership's value as its last won Proclaim rewrote it.
	// An extension that heals a node writes it back (heldValue).
	value atomic.Pointer[string]

	mu       sync.Mutex
	deadline time.Time // monotonic: start of the last won round + ttl - drift
	// dlTTL is the TTL deadline was computed from, which an Extend in
	// flight may have lowered below ttl: the loss margin is measured
	// against it (lossMarginLocked).
	dlTTL    time.Duration
	w        *watch // Done, Err and auto-extension; nil until first used
	released bool   // Unlock was called
	extended int    // successful Extends
	// maxTTL is the longest TTL any request of this lock sent (acquire,
	// or Extend, won or not): how long a node may keep the key, which
	// bounds the background retries of its release (internal/node/retry.go).
	maxTTL time.Duration
}

// heldValue is what the nodes keep for the lock: its token (with its
// metadata), or the value its last won Proclaim wrote. An extension
// sends it, so that a heal puts back what the holder had.
func (l *Lock) heldValue() string {
	if v := l.value.Load(); v != nil {
		return *v
	}
	return l.token
}

// Extensions returns how many times the lock was extended (by Extend or
// auto-extension).
func (l *Lock) Extensions() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.extended
}

// Key returns the locked key; for a lock over several keys, the keys
// joined with ","; for a path lock, the normalized path; for a read lock
// or a semaphore permit, the key given.
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	if l.fam != nil {
		return l.fam.name
	}
	if len(l.keys) == 1 {
		return l.keys[0]
	}
	return strings.Join(l.keys, ",")
}

// shownKeys returns the keys that errors and observer events name: the
// lock's keys, or its family's name.
func (l *Lock) shownKeys() []string {
	if l.fam != nil {
		return l.fam.shown
	}
	return l.keys
}

// Token returns the random value stored on each node: 128 bits from
// crypto/rand, hex-encoded (or the token given with WithToken). It
// identifies this holder; it is not a fencing token (it does not
// increase). With WithMetadata the stored value is the token, a NUL byte
// and the metadata.
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	t, _ := wire.SplitValue(l.token)
	return t
}

// Validity returns the time left in which holding the lock is safe,
// measured on the monotonic clock: ttl - drift from the start of the last
// won round (acquire or Extend), minus the time since. It is <= 0 once the
// lock has expired, after Unlock, for a nil *Lock, and from the moment an
// extension (Extend or auto-extension) learns that the lock is lost: that
// so many nodes answered that the key holds another owner's token or is
// missing that no quorum can hold it. Then Done is closed too, and Err
// says why. Nodes that failed or did not answer prove nothing: an
// extension that fails for them leaves Validity as it was (or lowers it
// to the TTL it sent, see Extend), and the lock may still be held.
func (l *Lock) Validity() time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	d := l.deadline
	l.mu.Unlock()
	return time.Until(d)
}

// Extend resets the lock's TTL to ttl on every node that still holds its
// token (compare-and-pexpire) and succeeds when a quorum did; Validity is
// then ttl - elapsed - drift from Extend's start. Extends of one lock run
// one at a time. A failed Extend never lengthens Validity, and once no
// quorum can hold the lock it is lost at once (Validity <= 0, Done
// closed, Err ErrLockLost). A node that lost the key gets back what the
// holder had there (a heal; docs/safety.md).
//
// Errors: ErrInvalid for a nil or zero *Lock, a nil ctx or a bad ttl;
// otherwise a *QuorumError matching ErrNotHeld (with ErrExpired,
// ErrReleased or ErrUnreachable for the cause) or ctx.Err(). Details:
// docs/api.md#lockextend.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return invalidf("nil *Lock")
	}
	if l.c == nil {
		return invalidf("zero Lock (not returned by TryLock or Lock)")
	}
	if err := l.c.check(ctx, ttl, l.cfg); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return unsentError(l.c, opExtend, l.shownKeys(), err)
	}
	if err := l.lockExt(ctx); err != nil {
		// ctx ended while an extension in flight held the lock's
		// rounds: nothing was sent.
		return unsentError(l.c, opExtend, l.shownKeys(), err)
	}
	defer l.unlockExt()
	if err := l.startExtend(ttl); err != nil {
		return err
	}
	out := runRound(ctx, l.c, opExtend, l, ttl)
	err := l.endExtend(out, ttl)
	// The lock may have ended, now or while the round was in flight: the
	// nodes the round healed are released before Extend returns, so that
	// the caller's next call (an Unlock) does not find them.
	l.dropHealed(out.rd, true)
	return err
}

// lockExt takes l.extMu, waiting for the extension that holds it (the
// scheduler's or another Extend's) or for ctx, whichever ends first; it
// returns ctx.Err() in the second case, without extMu.
func (l *Lock) lockExt(ctx context.Context) error {
	for {
		if l.extMu.TryLock() {
			return nil
		}
		ch := l.extWait.Load()
		if ch == nil {
			c := make(chan struct{})
			if !l.extWait.CompareAndSwap(nil, &c) {
				continue
			}
			ch = &c
		}
		// Registered before this look: an unlockExt after it closes ch.
		if l.extMu.TryLock() {
			return nil
		}
		select {
		case <-*ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// unlockExt releases l.extMu and wakes the Extends waiting for it.
func (l *Lock) unlockExt() {
	l.extMu.Unlock()
	if ch := l.extWait.Swap(nil); ch != nil {
		close(*ch)
	}
}

// startExtend checks, before an extension of ttl is sent, that the lock
// is neither released nor expired (the error then says which), and
// records ttl as sent. l.extMu must be held.
func (l *Lock) startExtend(ttl time.Duration) error {
	now := time.Now()
	l.mu.Lock()
	left, released := l.startExtendLocked(now, ttl)
	l.mu.Unlock()
	return l.unsentExtend(left, released)
}

// startExtendLocked is startExtend's part under l.mu, at now: it returns
// the validity left and whether the lock was released.
func (l *Lock) startExtendLocked(now time.Time, ttl time.Duration) (left time.Duration, released bool) {
	left, released = l.deadline.Sub(now), l.released
	if released || left <= 0 {
		return left, released
	}
	l.maxTTL = max(l.maxTTL, ttl)
	// The request may land, whatever its round decides, and set ttl from
	// then on: while it is in flight, Validity counts no more than that
	// (from now, before it is sent).
	eff := ttl
	if f := time.Duration(l.floor.Load()); f > 0 {
		eff = min(eff, f)
	}
	if pre := deadline(now, eff, l.cfg.driftFactor); pre.Before(l.deadline) {
		l.deadline, l.dlTTL = pre, eff
		l.armLocked()
	}
	return left, released
}

// unsentExtend is the error of an extension not sent because the lock was
// released or had no validity left; nil otherwise.
func (l *Lock) unsentExtend(left time.Duration, released bool) error {
	switch {
	case released:
		return unsentError(l.c, opExtend, l.shownKeys(), ErrNotHeld, ErrExpired, ErrReleased)
	case left <= 0:
		return unsentError(l.c, opExtend, l.shownKeys(), ErrNotHeld, ErrExpired)
	}
	return nil
}

// endExtend applies the outcome of an extension of ttl to the deadline
// (see Extend) and returns Extend's error. l.extMu must be held.
func (l *Lock) endExtend(out outcome, ttl time.Duration) error {
	eff := ttl
	if f := time.Duration(l.floor.Load()); f > 0 {
		eff = min(eff, f)
	}
	dl := deadline(out.start, eff, l.cfg.driftFactor)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.released:
		// Unlock started while we were in flight: whatever the round
		// won, the lock is gone and its deadline must stay behind us.
		if out.won {
			return out.rd.resultError(ErrNotHeld, ErrReleased)
		}
		return out.err
	case out.won:
		l.deadline, l.ttl, l.dlTTL = dl, ttl, eff
		l.extended++
	case dl.Before(l.deadline):
		// Nodes that did extend may now expire earlier than before.
		l.deadline, l.dlTTL = dl, eff
	}
	if out.won {
		l.armLocked() // the deadline may have moved, even earlier
		return nil
	}
	if !l.deadline.After(time.Now()) {
		// No extension is sent from now on (startExtend): the lock is
		// over, and what this one healed may be released (dropHealed).
		l.over.Store(true)
	}
	if lost := definiteLoss(out.err); lost != nil {
		l.loseLocked(lost)
	} else {
		l.armLocked()
	}
	return out.err
}

// Unlock releases the lock: compare-and-delete on every node that still
// holds its token, succeeding when a quorum did; it never deletes another
// holder's key. It is not cut short by ctx's cancellation, returns at a
// quorum, and retries failed releases in the background. When a Lock
// call of the same Client waits for the key, Unlock hands the key to it
// in one round instead.
//
// Errors: ErrInvalid for a nil or zero *Lock or a nil ctx; a
// *QuorumError matching ErrNotHeld when fewer than a quorum held the
// token (ErrUnreachable too when failed nodes were the cause). Details:
// docs/api.md#lockunlock.
func (l *Lock) Unlock(ctx context.Context) error {
	if l == nil {
		return invalidf("nil *Lock")
	}
	if l.c == nil {
		return invalidf("zero Lock (not returned by TryLock or Lock)")
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	l.over.Store(true) // before the release is handed to any node
	l.stopWatch(ErrReleased)
	l.mu.Lock()
	first := l.firstUnlockLocked() // observer.go
	again := l.released
	l.released = true
	ttl := max(l.ttl, l.maxTTL) // the release's retries last as long as the key may
	l.deadline = time.Time{}    // released: no validity left
	l.mu.Unlock()
	l.unlocked.Store(true)
	var lost *round // a hand-on that lost
	if !again && l.handsOn() {
		// Hand the key to a Lock call of this Client waiting for it
		// (handon.go); that failing, release it.
		if b := l.c.lines.take(l.keys[0]); b != nil {
			// The call waits for exactly one answer, even should an
			// observer panic: nil once the key is released.
			gave := false
			give := func(nl *Lock) {
				if !gave {
					gave = true
					b.deliver(nl)
				}
			}
			defer give(nil)
			qe, ok, rd := l.handOn(b, give)
			if ok {
				if first {
					l.observeUnlock(ctx, outcome{won: qe == nil, err: qe})
				}
				if qe != nil {
					return qe
				}
				return nil
			}
			lost = rd
		}
	}
	out := runRound(ctx, l.c, opRelease, l, ttl)
	if !out.won && lost != nil {
		switch held, unknown := lost.heldWith(out.rd); {
		case held:
			out.won, out.err = true, nil
		case unknown && out.err != nil && !errors.Is(out.err, ErrUnreachable):
			e := *out.err
			e.reasons = append(append([]error(nil), e.reasons...), ErrUnreachable)
			out.err = &e
		}
	}
	if first {
		l.observeUnlock(ctx, out)
	}
	if out.won {
		return nil
	}
	return out.err
}

// dropHealed releases the nodes that rd, an extension of l, healed,
// when l is over (released, or ended by this extension's loss): no
// later round of l will count them, and a lock that lost its quorum
// must leave nothing behind. A node whose heal is reported later is
// released by the round (round.undoHeal): the one or the other sees
// it, as Lock.over is set before either looks.
//
// wait: wait for the releases (bounded by the per-node timeout), as
// Extend does; the scheduler does not, as other locks' outcomes wait
// behind it.
func (l *Lock) dropHealed(rd *round, wait bool) {
	if rd == nil || !l.over.Load() {
		return
	}
	var nodes []*node.Node
	rd.mu.Lock()
	for i, nd := range rd.c.nodes {
		if rd.healed.has(i) {
			nodes = append(nodes, nd)
		}
	}
	rd.mu.Unlock()
	switch {
	case len(nodes) == 0:
		return
	case wait:
		rd.releaseAll(nodes, make([]bool, len(nodes)))
		return
	}
	// Counted for Close.
	rd.c.flights.Add(1)
	go func() {
		defer rd.c.flights.Done()
		rd.releaseAll(nodes, make([]bool, len(nodes)))
	}()
}
