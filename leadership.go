package redlock

import (
	"context"
	"fmt"
	"sync"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// Leadership is a won election: a held leadership, auto-extended until
// Resign or until it is lost. Its methods are safe for concurrent use;
// on a nil or zero *Leadership they return an error matching ErrInvalid
// (or zero values), never panic.
type Leadership struct {
	e      *Election
	l      *Lock
	cancel context.CancelFunc // stops the auto-extension

	pmu sync.Mutex // serialises Proclaims, so the last one's value stands
	seq int64      // under pmu: the next publication's place in the history
	mu  sync.Mutex
	val string
	// resigned: Resign ran; rerr is what it returned.
	resigned bool
	rerr     error
}

func (ld *Leadership) check() error {
	switch {
	case ld == nil:
		return invalidf("nil *Leadership")
	case ld.l == nil:
		return invalidf("zero Leadership (not returned by Campaign)")
	}
	return nil
}

// Value returns the value the leadership advertises: Campaign's, or the
// last successful Proclaim's.
func (ld *Leadership) Value() string {
	if ld.check() != nil {
		return ""
	}
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.val
}

// Lock returns the lock that holds the leadership, for its key, its
// fencing token and its observer events. Do not Unlock it: Resign.
func (ld *Leadership) Lock() *Lock {
	if ld.check() != nil {
		return nil
	}
	return ld.l
}

// Proclaim changes the value the leadership advertises, without an
// election: each node that holds the leadership rewrites it, keeping the
// TTL, and wakes observers; it succeeds at a quorum. Proclaims of one
// leadership run one at a time, each node given the leadership's per-node
// timeout.
//
// Errors: ErrInvalid for a nil or zero *Leadership, a nil ctx or a value
// over 4096 bytes; ctx's error; ErrNotHeld after Resign or loss; a
// *QuorumError (Op "proclaim") matching ErrNotHeld, with ErrUnreachable
// when failed nodes prevented the quorum. A failed Proclaim may have
// changed some nodes; Leader and Observe report what a quorum holds.
func (ld *Leadership) Proclaim(ctx context.Context, value string) error {
	if err := ld.check(); err != nil {
		return err
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	if len(value) > maxMetadata {
		return invalidf("election value of %d bytes is longer than %d", len(value), maxMetadata)
	}
	ld.mu.Lock()
	resigned := ld.resigned
	ld.mu.Unlock()
	if resigned {
		return unsentError(ld.e.c, opProclaim, ld.l.shownKeys(), ErrNotHeld)
	}
	return ld.proclaim(ctx, value)
}

// proclaim writes the leadership's term and value on the nodes: a round
// of its own (quorum.go), through the nodes' queues, so that on each
// node it runs after the leadership's acquire and extensions handed to
// that node before it.
func (ld *Leadership) proclaim(ctx context.Context, value string) error {
	ld.pmu.Lock()
	defer ld.pmu.Unlock()
	c, l := ld.e.c, ld.l
	if l.Validity() <= 0 {
		return unsentError(c, opProclaim, l.shownKeys(), ErrNotHeld)
	}
	wk := c.cfg.prefix + l.keys[0]
	ch := c.cfg.prefix + releaseChannel(l.keys[0])
	tok, _ := wire.SplitValue(l.token)
	// Every publication takes the next place, a failed one too, so that
	// what it left on a few nodes sorts before the ones that follow.
	seq := ld.seq
	ld.seq++
	l.mu.Lock()
	ttl := l.ttl // an extension may set it meanwhile
	l.mu.Unlock()
	term := l.Fence()
	p := &wire.Proclaim{
		Key: wk, Old: l.token, Value: wire.Value(tok, wire.ElectionMeta(term, seq, value)),
		Channel: ch, Msg: electedMsg,
		History: termsKey(wk), Term: term, Member: wire.TermMember(term, seq, value),
		Keep: electionHistoryLen, ExpireMS: electionHistoryTTL(ttl).Milliseconds(),
	}
	req := &request{w: *p.Request(len(c.nodes), l.token), keys: l.keys}
	req.w.TTL = ttl // the round's per-node timeout is the leadership's
	out := runReq(ctx, c, req, l.cfg)
	if !out.won {
		return out.err
	}
	ld.mu.Lock()
	ld.val = value
	ld.mu.Unlock()
	// What an extension writes back on a node that lost the key.
	l.value.Store(&p.Value)
	return nil
}

// Resign ends the leadership at once: it releases the election's key on
// every node (as Unlock, which it is) and so wakes the waiting
// candidates (pub/sub hand-off). It is idempotent: after a Resign that
// succeeded, Resign returns nil. Once the leadership was lost (Done
// closed before Resign), it still releases what the nodes may keep and
// returns an error matching ErrNotHeld. Like Unlock it is not cut short
// by ctx (see Unlock).
//
// Errors: ErrInvalid for a nil or zero *Leadership or a nil ctx; an
// error matching ErrNotHeld when the leadership was lost, or when fewer
// than a quorum of nodes still held it (see Unlock).
func (ld *Leadership) Resign(ctx context.Context) error {
	if err := ld.check(); err != nil {
		return err
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if ld.resigned {
		return ld.rerr
	}
	ld.resigned = true
	ld.cancel()
	lost := ld.l.Err() // nil while held; set once lost
	err := ld.l.Unlock(ctx)
	if lost != nil {
		err = fmt.Errorf("%w: leadership of %q lost before Resign: %w", ErrNotHeld, ld.e.name, lost)
	}
	ld.rerr = err
	return err
}

// run runs fn under a ctx cancelled when the leadership is lost, and
// reports whether it was lost when fn returned. A panicking fn resigns
// on its way out.
func (ld *Leadership) run(ctx context.Context, fn func(ctx context.Context) error) (err error, lost bool) {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := make(chan struct{})
	go func() {
		select {
		case <-ld.l.Done():
			cancel()
		case <-stop:
		}
	}()
	defer close(stop)
	finished := false
	defer func() {
		if !finished {
			// Not recovered: the panic (or Goexit) goes on as it was.
			_ = ld.Resign(context.WithoutCancel(ctx))
		}
	}()
	err = fn(fctx)
	finished = true
	select {
	case <-ld.l.Done():
		return err, true
	default:
		return err, false
	}
}
