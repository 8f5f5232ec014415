package redlock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// Event is one thing the library did, for metrics and traces, as given
// to the func set by WithObserver. Kind says which, and which fields are
// set:
//   - "node": one node request's outcome, when its reply (or error)
//     arrives, late replies and clean-up releases included: Op, Node,
//     Addr, Status, Err, Latency. The replies that decided a round come
//     before the round.
//   - "round": an acquire, extend, release or fence round, when its
//     outcome is decided: Op, Keys, Reason, Start, Duration, Nodes, Err.
//   - "lock": the end of a lock, at its first Unlock or when Done
//     reported it lost: Keys, Held, Extensions, Lost, Err.
//
// docs/observability.md maps the events to metric names.
type Event struct {
	Kind string // "node", "round" or "lock"
	// Ctx is the context of the call the event belongs to (for a lock
	// found lost, the acquiring call's, without its cancellation), for
	// tracing: use its values only. Never nil.
	Ctx context.Context
	// Op is what the request or round did: "lock", "extend", "unlock" or
	// "fence" (the second round of WithFencing).
	Op   string
	Keys []string // the lock's keys (a path, read or permit lock: its Key)

	Node    int           // the node's index in the list given to New (0-based)
	Addr    string        // the node's address, "" when its client has none
	Status  string        // the node's outcome, as NodeResult.Status
	Latency time.Duration // from the round's start to the reply; for a clean-up, from its sending

	// Reason is how a round ended: "won", "contended", "unreachable",
	// "cancelled", "expired" or "not_held".
	Reason   string
	Start    time.Time     // before the round's first request was sent
	Duration time.Duration // from Start to the decision
	// Nodes is every node's outcome at the decision ("pending": no
	// reply yet; later replies are events of their own).
	Nodes []NodeResult

	Held       time.Duration // from the acquiring round's start to the end of the lock
	Extensions int           // the lock's successful extensions
	Lost       bool          // Done reported the lock lost (Err: ErrLockLost); false for Unlock

	Err error // a node's failure, a round's error (nil when won), Unlock's or the loss's error
}

// The kinds of round and request, and the reasons of a round's outcome,
// as events carry them.
const (
	opLockName    = "lock"
	opUnlockName  = "unlock"
	reasonWon     = "won"
	reasonNotHeld = "not_held"
)

// reasonOf classifies a round error.
func reasonOf(err error) string {
	switch {
	case err == nil:
		return reasonWon
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	case errors.Is(err, ErrExpired):
		return "expired"
	case errors.Is(err, ErrContended):
		return "contended"
	case errors.Is(err, ErrUnreachable):
		return "unreachable"
	}
	return reasonNotHeld
}

// The calls into the observer func and the logger. Each is reached only when
// one is set, behind a nil check on the hot path.

// observeNode reports node i's reply to its round, and logs the restart
// guard's verdicts on it.
func (rd *round) observeNode(i int, r wire.Reply, lat time.Duration) {
	if r.Unsent {
		return
	}
	nd := rd.c.nodes[i]
	if o := rd.cfg.obs; o != nil && rd.op != opProclaim {
		o(Event{Kind: "node", Ctx: rd.parent, Op: opOf(rd.op), Node: i, Addr: nd.Addr, Status: statusOf(r.St), Err: r.Err, Latency: lat})
	}
	if l := rd.cfg.log; l != nil && nd.Guarded() && rd.op != opRelease {
		logGuard(l, nd, r)
	}
}

// observeRound reports a decided round.
func (rd *round) observeRound(out outcome) {
	if rd.op == opProclaim {
		return // not a round of the lock: the observer does not see it
	}
	var err error
	if out.err != nil {
		err = out.err // never a typed nil
	}
	rd.cfg.obs(Event{
		Kind: "round", Ctx: rd.parent, Op: opOf(rd.op), Keys: rd.keys, Reason: reasonOf(err),
		Start: rd.start, Duration: time.Since(rd.start),
		Nodes: append([]NodeResult(nil), rd.res...), Err: err,
	})
}

// observeCleanup reports the clean-up release of a lost attempt on nd,
// and logs it when it failed: the key then lives out its TTL.
func (rd *round) observeCleanup(nd *node.Node, r wire.Reply, lat time.Duration) {
	if r.Unsent {
		return
	}
	if o := rd.cfg.obs; o != nil {
		o(Event{Kind: "node", Ctx: rd.parent, Op: opUnlockName, Node: nd.Idx, Addr: nd.Addr, Status: statusOf(r.St), Err: r.Err, Latency: lat})
	}
	if l := rd.cfg.log; l != nil && r.St == wire.StatusFailed {
		l.Debug("redlock: clean-up release of a lost attempt failed; the key expires with its TTL",
			"keys", rd.keys, "node", nd.Idx, "addr", nd.Addr, "err", r.Err)
	}
}

// logGuard logs when the restart guard starts refusing a node's votes,
// and when it stops: once per change, not per request.
func logGuard(l *slog.Logger, nd *node.Node, r wire.Reply) {
	switch {
	case r.St == wire.StatusFailed && errors.Is(r.Err, errNodeRestarted):
		if nd.Refused.CompareAndSwap(false, true) {
			l.Info("redlock: node restarted recently; the restart guard refuses its votes",
				"node", nd.Idx, "addr", nd.Addr, "err", r.Err)
		}
	case r.St != wire.StatusFailed:
		if nd.Refused.CompareAndSwap(true, false) {
			l.Info("redlock: node votes again after the restart guard", "node", nd.Idx, "addr", nd.Addr)
		}
	}
}

// logDuplicate logs that two nodes turned out to be one server.
func logDuplicate(c *Client, err error) {
	if l := c.cfg.log; l != nil {
		l.Error("redlock: two nodes are one server; the client refuses every lock", "err", err)
	}
}

// observeLostLocked reports that Done found l lost with err. l.mu is
// held (see finishLocked).
func (l *Lock) observeLostLocked(err error) {
	if l.cfg == nil || (l.cfg.obs == nil && l.cfg.log == nil) {
		return
	}
	held := time.Since(l.acquired)
	if o := l.cfg.obs; o != nil {
		o(Event{Kind: "lock", Ctx: l.eventCtx(), Keys: l.shownKeys(), Held: held, Extensions: l.extended, Lost: true, Err: err})
	}
	if lg := l.cfg.log; lg != nil {
		lg.Warn("redlock: lock lost", "key", l.Key(), "held", held, "extensions", l.extended, "err", err)
	}
}

// firstUnlockLocked reports whether the Unlock under way ends l for the
// observer: the first Unlock of a lock handed to the caller and not
// already reported lost. A win that tryLock undoes (a failed fenced
// acquisition, a duplicate node) has no acquired time yet and is not a
// lock that ended. l.mu is held, after stopWatch and before released is
// set.
func (l *Lock) firstUnlockLocked() bool {
	return !l.released && !l.acquired.IsZero() && (l.w == nil || l.w.err == ErrReleased)
}

// eventCtx is the context of a "lock" Event for a lock found lost: the
// acquiring call's, without its cancellation.
func (l *Lock) eventCtx() context.Context {
	if l.actx == nil {
		return context.Background()
	}
	return context.WithoutCancel(l.actx)
}

// observeUnlock reports the end of l by Unlock (called with ctx), whose
// release round decided out.
func (l *Lock) observeUnlock(ctx context.Context, out outcome) {
	if l.cfg == nil || l.cfg.obs == nil {
		return
	}
	var err error
	if !out.won && out.err != nil {
		err = out.err
	}
	l.cfg.obs(Event{Kind: "lock", Ctx: ctx, Keys: l.shownKeys(), Held: time.Since(l.acquired), Extensions: l.Extensions(), Err: err})
}

// logDroppedRetry logs a failed release that will not be retried (after
// Close, or with too many queued): its key expires with its TTL.
func logDroppedRetry(c *Client, nd *node.Node, keys []string) {
	if l := c.cfg.log; l != nil {
		l.Debug("redlock: failed release not retried; the key expires with its TTL",
			"keys", keys, "node", nd.Idx, "addr", nd.Addr, "closed", c.isClosed())
	}
}
