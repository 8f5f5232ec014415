package redlock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// Observer receives what the library does, for metrics and traces. Its
// methods are called synchronously on the calling goroutine (or a node's
// request goroutine) and must be fast and safe for concurrent use; hand
// work to another goroutine if it may block. A panic in them is not
// recovered. Set one with WithObserver; without one, the library pays a
// nil check per event.
//
// docs/observability.md maps these events to metric names and shows how
// to feed a metrics library.
type Observer interface {
	// ObserveNode is called once per request sent to one node, when its
	// reply (or error) arrives, including replies that arrive after
	// their round was decided and the clean-up releases of lost
	// attempts (Op "unlock"). A node that timed out in a round is
	// observed when its request finally ends, with its real latency.
	// Requests never sent (their round was already lost) are not
	// observed. The replies that decided a round are observed before
	// the round.
	ObserveNode(NodeEvent)
	// ObserveRound is called once per acquire, extend, release or fence
	// round, when its outcome is decided. A TryLock whose ctx is already
	// done is observed as a cancelled "lock" round of no duration.
	ObserveRound(RoundEvent)
	// ObserveLock is called once when a lock ends: at its first Unlock,
	// or when Done reports it lost (only for a lock whose Done, Err or
	// AutoExtend was used: nothing watches the others). A lost lock is
	// reported while the Lock's state is locked: do not call that Lock's
	// methods from ObserveLock.
	ObserveLock(LockEvent)
}

// Op names a kind of round or request, in events and QuorumError.
type Op string

// The kinds of round or request.
const (
	OpLock   Op = "lock"   // an acquisition (of any kind of lock)
	OpExtend Op = "extend" // Extend, and auto-extension
	OpUnlock Op = "unlock" // Unlock, and the clean-up release of a lost attempt
	OpFence  Op = "fence"  // the second round of a fenced acquisition (WithFencing)
	// OpProclaim is a leader's Proclaim (QuorumError.Op only: it is not
	// a round of the lock and the Observer does not see it).
	OpProclaim Op = "proclaim"
)

// NodeEvent is one node request's outcome.
type NodeEvent struct {
	// Ctx is the context of the call whose round sent the request
	// (TryLock, Extend, Unlock, ...), for tracing: a span in it is the
	// caller's. It is never nil and may be done by now; use its values
	// only.
	Ctx     context.Context
	Op      Op            // "lock", "extend", "unlock" or "fence"
	Node    int           // the node's index in the list given to New (0-based; messages say Node+1)
	Addr    string        // the node's address, "" when its client has none
	Status  NodeStatus    // the node's outcome: NodeOK, NodeTaken, NodeAbsent or NodeFailed
	Err     error         // set when Status is NodeFailed
	Latency time.Duration // from the round's start to the reply; for a clean-up, from its sending
}

// Reason classifies a round's outcome, for metric labels.
type Reason string

// Reasons of a round's outcome.
const (
	ReasonWon         Reason = "won"
	ReasonContended   Reason = "contended"
	ReasonUnreachable Reason = "unreachable"
	ReasonCancelled   Reason = "cancelled"
	ReasonExpired     Reason = "expired"
	ReasonNotHeld     Reason = "not_held"
)

// RoundEvent is one round's outcome.
type RoundEvent struct {
	// Ctx is the context of the call that ran the round, for tracing
	// (see NodeEvent.Ctx). It is never nil.
	Ctx      context.Context
	Op       Op            // "lock", "extend", "unlock" or "fence"
	Keys     []string      // the lock's keys (a path, read or permit lock: its Key)
	Reason   Reason        // how it ended: ReasonWon, ReasonContended, ...
	Start    time.Time     // before the first request was sent
	Duration time.Duration // from Start to the decision
	// Nodes is every node's outcome at the decision (NodePending: no
	// reply yet; later replies are NodeEvents of their own).
	Nodes []NodeResult
	Err   error // nil when won
}

// LockEvent reports the end of a lock.
type LockEvent struct {
	// Ctx is the context of the call that ended the lock (Unlock), or,
	// for a lock found lost, of the call that acquired it, without its
	// cancellation. For tracing; never nil.
	Ctx        context.Context
	Keys       []string      // the lock's keys (a path, read or permit lock: its Key)
	Held       time.Duration // from the acquiring round's start to the end
	Extensions int           // successful extensions (Extend or auto-extension)
	// Lost is true when Done reported the lock lost; Err is then Err()'s
	// error (ErrLockLost). It is false for a release by Unlock, and Err
	// is Unlock's error: nil when a quorum released it.
	Lost bool
	Err  error
}

// reasonOf classifies a round error.
func reasonOf(err error) Reason {
	switch {
	case err == nil:
		return ReasonWon
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return ReasonCancelled
	case errors.Is(err, ErrExpired):
		return ReasonExpired
	case errors.Is(err, ErrContended):
		return ReasonContended
	case errors.Is(err, ErrUnreachable):
		return ReasonUnreachable
	}
	return ReasonNotHeld
}

// The calls into the Observer and the logger. Each is reached only when
// one is set, behind a nil check on the hot path.

// observeNode reports node i's reply to its round, and logs the restart
// guard's verdicts on it.
func (rd *round) observeNode(i int, r wire.Reply, lat time.Duration) {
	if r.Unsent {
		return
	}
	nd := rd.c.nodes[i]
	if o := rd.cfg.obs; o != nil && rd.op != opProclaim {
		o.ObserveNode(NodeEvent{Ctx: rd.parent, Op: opOf(rd.op), Node: i, Addr: nd.Addr, Status: NodeStatus(r.St), Err: r.Err, Latency: lat})
	}
	if l := rd.cfg.log; l != nil && nd.Guarded() && rd.op != opRelease {
		logGuard(l, nd, r)
	}
}

// observeRound reports a decided round.
func (rd *round) observeRound(out outcome) {
	if rd.op == opProclaim {
		return // not a round of the lock (see OpProclaim)
	}
	var err error
	if out.err != nil {
		err = out.err // never a typed nil
	}
	rd.cfg.obs.ObserveRound(RoundEvent{
		Ctx: rd.parent, Op: opOf(rd.op), Keys: rd.keys, Reason: reasonOf(err),
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
		o.ObserveNode(NodeEvent{Ctx: rd.parent, Op: OpUnlock, Node: nd.Idx, Addr: nd.Addr, Status: NodeStatus(r.St), Err: r.Err, Latency: lat})
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
	case r.St == wire.StatusFailed && errors.Is(r.Err, ErrNodeRestarted):
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
func (c *Client) logDuplicate(err error) {
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
		o.ObserveLock(LockEvent{Ctx: l.eventCtx(), Keys: l.shownKeys(), Held: held, Extensions: l.extended, Lost: true, Err: err})
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

// eventCtx is the context of a LockEvent for a lock found lost: the
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
	l.cfg.obs.ObserveLock(LockEvent{Ctx: ctx, Keys: l.shownKeys(), Held: time.Since(l.acquired), Extensions: l.Extensions(), Err: err})
}

// logDroppedRetry logs a failed release that will not be retried (after
// Close, or with too many queued): its key expires with its TTL.
func (c *Client) logDroppedRetry(nd *node.Node, keys []string) {
	if l := c.cfg.log; l != nil {
		l.Debug("redlock: failed release not retried; the key expires with its TTL",
			"keys", keys, "node", nd.Idx, "addr", nd.Addr, "closed", c.isClosed())
	}
}
