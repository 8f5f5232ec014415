package redlock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Observer receives what the library does, for metrics and traces. Its
// methods are called synchronously on the calling goroutine (or a node's
// request goroutine) and must be fast and safe for concurrent use; hand
// work to another goroutine if it may block. Set one with WithObserver.
//
// The README's Observability section maps these events to metric names.
type Observer interface {
	// ObserveNode is called once per request to one node, including
	// replies that arrive after their round was decided.
	ObserveNode(NodeEvent)
	// ObserveRound is called once per acquire, extend or release round,
	// when its outcome is decided.
	ObserveRound(RoundEvent)
	// ObserveLock is called when a lock is released or lost, with how
	// long it was held.
	ObserveLock(LockEvent)
}

// Op names a kind of round: "lock", "extend" or "unlock".
type Op = string

// NodeEvent is one node request's outcome.
type NodeEvent struct {
	Op      Op
	Node    int
	Addr    string
	Status  NodeStatus
	Err     error
	Latency time.Duration
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
	Op       Op
	Keys     []string
	Reason   Reason
	Duration time.Duration // from before the first request to the decision
	Err      error         // nil when won
}

// LockEvent reports the end of a lock.
type LockEvent struct {
	Keys       []string
	Held       time.Duration // from the acquiring round's start to the end
	Extensions int
	Lost       bool // true: lost (Err set); false: released by Unlock
	Err        error
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

// Stats is a ready-made Observer that counts events with atomics; its
// Snapshot is cheap. Use it for tests, CLIs, or to feed a metrics system
// on a timer.
type Stats struct {
	attempts, won, contended, unreachable, cancelled, expired atomic.Int64
	nodeErrors, extensions, released, lost                    atomic.Int64
}

var _ Observer = (*Stats)(nil)

// StatsSnapshot is a copy of the counters of a Stats.
type StatsSnapshot struct {
	Attempts, Won, Contended, Unreachable, Cancelled, Expired int64
	NodeErrors, Extensions, Released, Lost                    int64
}

// ObserveNode counts failed node requests.
func (s *Stats) ObserveNode(e NodeEvent) {
	if e.Status == NodeFailed {
		s.nodeErrors.Add(1)
	}
}

// ObserveRound counts acquire attempts by outcome, and extensions.
func (s *Stats) ObserveRound(e RoundEvent) {
	switch e.Op {
	case "lock":
		s.attempts.Add(1)
		switch e.Reason {
		case ReasonWon:
			s.won.Add(1)
		case ReasonContended:
			s.contended.Add(1)
		case ReasonUnreachable:
			s.unreachable.Add(1)
		case ReasonCancelled:
			s.cancelled.Add(1)
		case ReasonExpired:
			s.expired.Add(1)
		}
	case "extend":
		if e.Reason == ReasonWon {
			s.extensions.Add(1)
		}
	}
}

// ObserveLock counts released and lost locks.
func (s *Stats) ObserveLock(e LockEvent) {
	if e.Lost {
		s.lost.Add(1)
	} else {
		s.released.Add(1)
	}
}

// Snapshot returns the current counts.
func (s *Stats) Snapshot() StatsSnapshot {
	return StatsSnapshot{
		Attempts: s.attempts.Load(), Won: s.won.Load(), Contended: s.contended.Load(),
		Unreachable: s.unreachable.Load(), Cancelled: s.cancelled.Load(), Expired: s.expired.Load(),
		NodeErrors: s.nodeErrors.Load(), Extensions: s.extensions.Load(),
		Released: s.released.Load(), Lost: s.lost.Load(),
	}
}
