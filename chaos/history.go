package chaos

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"
)

// Never is the Released instant of a critical section whose holder never
// released its lock (it crashed, or was paused past its validity).
const Never = time.Duration(math.MaxInt64)

// Clock is the one monotonic clock of a run: every instant in a History is
// a Duration since the clock's epoch, read through time.Now's monotonic
// reading, so that instants from different goroutines compare.
type Clock struct{ epoch time.Time }

// NewClock returns a clock whose epoch is now.
func NewClock() *Clock { return &Clock{epoch: time.Now()} }

// Now returns the time since the epoch.
func (c *Clock) Now() time.Duration { return time.Since(c.epoch) }

// Of returns t as a Duration since the epoch; t must carry a monotonic
// reading (as Lock.Deadline does) for the result to be exact.
func (c *Clock) Of(t time.Time) time.Duration { return t.Sub(c.epoch) }

// Section is one critical section: a lock held by one client.
type Section struct {
	Client   int           `json:"client"`
	Key      string        `json:"key"` // the key; for ModePath the path, for ModePermit the semaphore
	Token    string        `json:"token"`
	Fence    int64         `json:"fence"`
	Attempt  time.Duration `json:"attempt_ns"`      // when the winning TryLock was called
	Acquired time.Duration `json:"acquired_ns"`     // when it returned the lock: the holder may act from here
	Released time.Duration `json:"released_ns"`     // when the holder stopped acting and called Unlock; Never if it did not
	Deadline time.Duration `json:"deadline_ns"`     // the lock's validity deadline (Lock.Deadline)
	Mode     Mode          `json:"mode,omitempty"`  // what was held, which decides what it excludes; "" is ModeWrite
	Limit    int           `json:"limit,omitempty"` // ModePermit: the semaphore's limit
}

// Mode is what a Section holds: an exclusive lock of a key, a read lock,
// a folder lock or a semaphore permit (the lock family of
// redlock.TryRLock, TryLockPath and TryAcquire). The checker applies each
// mode's conflict rule; sections of different families (keys, paths,
// semaphores) never conflict with each other.
type Mode string

const (
	// ModeWrite (or the zero Mode, "") is an exclusive lock of Key:
	// TryLock, Lock, Do, or the write side of a read-write lock. It
	// excludes every other hold of Key but a permit or a path. Any mode
	// not listed here is treated as ModeWrite.
	ModeWrite Mode = "write"
	// ModeRead is a read lock of Key (TryRLock, RLock): readers share
	// Key, and exclude its writers.
	ModeRead Mode = "read"
	// ModePath is a folder lock of the path Key (TryLockPath, LockPath):
	// it excludes a hold of the same path, of an ancestor and of a
	// descendant, by whole "/"-separated components ("a/b" and "a/bc"
	// are unrelated). Key is normalized as the library does: one leading
	// and one trailing "/" are dropped.
	ModePath Mode = "path"
	// ModePermit is a permit of the semaphore Key (TryAcquire, Acquire):
	// at most Limit of them are held at any instant.
	ModePermit Mode = "permit"
	// ModeLeader is a leadership of the election whose key is Key
	// (redlock.KeyName("election", name); Campaign, Run), with its term in Fence:
	// it excludes every other leadership of the election, as ModeWrite
	// does, and terms must rise in the order leaders were elected
	// (TermOrder). Acquired is when Campaign returned; the window ends
	// at the earlier of Done closing (or Resign) and the validity
	// deadline.
	ModeLeader Mode = "leader"
)

// End returns the end of the section's safe window: min(Released,
// Deadline). A holder may rely on its lock until then and no longer.
func (s Section) End() time.Duration { return min(s.Released, s.Deadline) }

// Attempt is one TryLock call, won or lost.
type Attempt struct {
	Client  int           `json:"client"`
	Key     string        `json:"key"`
	Start   time.Duration `json:"start_ns"`
	Latency time.Duration `json:"latency_ns"`
	OK      bool          `json:"ok"`
	Reason  string        `json:"reason,omitempty"` // why it failed: see reasonOf
	Probe   bool          `json:"probe,omitempty"`  // an uncontended latency probe, not a workload client
}

// Write is one write to the protected resource.
type Write struct {
	Client   int           `json:"client"`
	Key      string        `json:"key"` // the resource key
	Fence    int64         `json:"fence"`
	Start    time.Duration `json:"start_ns"`
	End      time.Duration `json:"end_ns"`
	Accepted bool          `json:"accepted"`
	Late     bool          `json:"late,omitempty"` // started after the writer's validity deadline
}

// EventKind names a fault or a phase of a scenario.
type EventKind string

// The kinds of events a run records. Node faults come in pairs that open
// and close a state (kill/restart, pause/resume, slow/heal,
// partition/heal, skew/unskew); the report draws those states per node.
const (
	EventKill      EventKind = "kill"
	EventRestart   EventKind = "restart"
	EventPause     EventKind = "pause"
	EventResume    EventKind = "resume"
	EventSlow      EventKind = "slow"
	EventPartition EventKind = "partition"
	EventHeal      EventKind = "heal"
	EventSkew      EventKind = "skew"
	EventUnskew    EventKind = "unskew"
	EventNote      EventKind = "note" // a phase marker, not a fault
)

// Event is a fault injected into a node, or a note about the run.
type Event struct {
	At     time.Duration `json:"at_ns"`
	Node   int           `json:"node"` // -1 when not about one node
	Kind   EventKind     `json:"kind"`
	Detail string        `json:"detail,omitempty"`
}

// History is everything a run recorded, on one Clock.
type History struct {
	Sections []Section     `json:"sections"`
	Attempts []Attempt     `json:"attempts"`
	Writes   []Write       `json:"writes"`
	Events   []Event       `json:"events"`
	End      time.Duration `json:"end_ns"`
}

// Recorder collects a History from concurrent clients. It is safe for
// concurrent use.
type Recorder struct {
	clock *Clock

	mu   sync.Mutex
	h    History
	held int // sections open now
}

// NewRecorder returns an empty Recorder on clock.
func NewRecorder(clock *Clock) *Recorder { return &Recorder{clock: clock} }

// Clock returns the recorder's clock.
func (r *Recorder) Clock() *Clock { return r.clock }

// Attempt records a TryLock call.
func (r *Recorder) Attempt(a Attempt) {
	r.mu.Lock()
	r.h.Attempts = append(r.h.Attempts, a)
	r.mu.Unlock()
}

// Open counts a lock as held from now until Close (see Held and
// WaitHeld). Recording a Section does not depend on it.
func (r *Recorder) Open() {
	r.mu.Lock()
	r.held++
	r.mu.Unlock()
}

// Close ends what Open counted.
func (r *Recorder) Close() {
	r.mu.Lock()
	r.held = max(r.held-1, 0)
	r.mu.Unlock()
}

// Section records a finished critical section.
func (r *Recorder) Section(s Section) {
	r.mu.Lock()
	r.h.Sections = append(r.h.Sections, s)
	r.mu.Unlock()
}

// Write records a write to the protected resource.
func (r *Recorder) Write(w Write) {
	r.mu.Lock()
	r.h.Writes = append(r.h.Writes, w)
	r.mu.Unlock()
}

// Event records an event about node (-1: none) now.
func (r *Recorder) Event(node int, kind EventKind, detail string) {
	at := r.clock.Now()
	r.mu.Lock()
	r.h.Events = append(r.h.Events, Event{At: at, Node: node, Kind: kind, Detail: detail})
	r.mu.Unlock()
}

// Held returns how many locks are held now (Open minus Close).
func (r *Recorder) Held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// WaitHeld waits until some client holds a lock, so that a fault lands
// mid-lock. It returns ctx.Err() if ctx ends first.
func (r *Recorder) WaitHeld(ctx context.Context) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for r.Held() == 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// History returns a copy of what was recorded, each list in time order.
func (r *Recorder) History() History {
	r.mu.Lock()
	h := History{
		Sections: append([]Section(nil), r.h.Sections...),
		Attempts: append([]Attempt(nil), r.h.Attempts...),
		Writes:   append([]Write(nil), r.h.Writes...),
		Events:   append([]Event(nil), r.h.Events...),
		End:      r.clock.Now(),
	}
	r.mu.Unlock()
	sort.SliceStable(h.Sections, func(i, j int) bool { return h.Sections[i].Acquired < h.Sections[j].Acquired })
	sort.SliceStable(h.Attempts, func(i, j int) bool { return h.Attempts[i].Start < h.Attempts[j].Start })
	sort.SliceStable(h.Writes, func(i, j int) bool { return h.Writes[i].Start < h.Writes[j].Start })
	sort.SliceStable(h.Events, func(i, j int) bool { return h.Events[i].At < h.Events[j].At })
	return h
}

// AcquiredDuring counts the sections whose TryLock was called at or after
// from and returned the lock before to: acquisitions made wholly within
// [from, to).
func (h History) AcquiredDuring(from, to time.Duration) int {
	n := 0
	for _, s := range h.Sections {
		if s.Attempt >= from && s.Acquired < to {
			n++
		}
	}
	return n
}

// AcquiredAfter counts the sections acquired at or after t.
func (h History) AcquiredAfter(t time.Duration) int {
	n := 0
	for _, s := range h.Sections {
		if s.Acquired >= t {
			n++
		}
	}
	return n
}

// activity describes [from, to) for a failure message that says nothing
// was granted there: how the attempts that ended in it failed, and which
// holds overlapped it. It tells a window that every key was held through
// (a workload that left nothing to grant) from one where the nodes
// refused or did not answer.
func (h History) activity(from, to time.Duration) string {
	reasons := map[string]int{}
	for _, a := range h.Attempts {
		if end := a.Start + a.Latency; end >= from && end < to {
			r := a.Reason
			if a.OK {
				r = "granted"
			}
			reasons[r]++
		}
	}
	names := make([]string, 0, len(reasons))
	for r := range reasons {
		names = append(names, r)
	}
	sort.Slice(names, func(i, j int) bool {
		if reasons[names[i]] != reasons[names[j]] {
			return reasons[names[i]] > reasons[names[j]]
		}
		return names[i] < names[j]
	})
	var b strings.Builder
	b.WriteString("attempts ended in it: ")
	if len(names) == 0 {
		b.WriteString("none")
	}
	for i, r := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s", reasons[r], r)
	}
	const most = 8
	b.WriteString("; held in it: ")
	n := 0
	for _, s := range h.Sections {
		if s.Acquired >= to || s.End() <= from {
			continue
		}
		if n++; n > most {
			continue
		}
		if n > 1 {
			b.WriteString(", ")
		}
		mode := s.Mode
		if mode == "" {
			mode = ModeWrite
		}
		fmt.Fprintf(&b, "%s %q by client %d (%s to %s)", mode, s.Key, s.Client, ms(s.Acquired), ms(s.End()))
	}
	switch {
	case n == 0:
		b.WriteString("nothing")
	case n > most:
		fmt.Fprintf(&b, " and %d more", n-most)
	}
	return b.String()
}
