package redlock

import "sync/atomic"

// Stats is a ready-made Observer that counts events with atomics; its
// Snapshot is cheap. It is the dependency-free counter for programs
// without Prometheus or OpenTelemetry (see extra/ for those adapters):
// use it for tests, CLIs, or to feed a metrics system on a timer.
type Stats struct {
	attempts, won, contended, unreachable, cancelled, expired atomic.Int64
	nodeErrors, extensions, released, lost                    atomic.Int64
}

var _ Observer = (*Stats)(nil)

// StatsSnapshot is a copy of the counters of a Stats.
type StatsSnapshot struct {
	Attempts    int64 // acquisition rounds ("lock"), won or not
	Won         int64 // acquisition rounds won
	Contended   int64 // acquisition rounds lost to other owners (ReasonContended)
	Unreachable int64 // acquisition rounds lost to failed nodes (ReasonUnreachable)
	Cancelled   int64 // acquisition rounds cut short by their ctx (ReasonCancelled)
	Expired     int64 // acquisition rounds won too late (ReasonExpired)
	NodeErrors  int64 // node requests that failed (NodeFailed)
	Extensions  int64 // extension rounds won
	Released    int64 // locks ended by Unlock
	Lost        int64 // locks that Done reported lost
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
	case OpLock:
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
	case OpExtend:
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
