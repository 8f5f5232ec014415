package redlockgocron

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockgocron/internal/minhold"
)

// ErrNotLeader is returned by Elector.IsLeader when the Elector holds no
// valid leadership: it is campaigning, its leadership was lost or has not
// settled yet (WithSettle), or it was stopped. gocron skips the run.
var ErrNotLeader = errors.New("redlockgocron: not the leader")

// DefaultSettle is the default of WithSettle: half a second, as
// DefaultMinHold and for the same reason: replicas whose timers for one
// tick fire less than that apart do not both run it across a change of
// leader.
const DefaultSettle = 500 * time.Millisecond

// Elections is what an Elector campaigns on: a *redlock.Client, or a
// *redlock.MultiLock for a leadership that needs every node.
type Elections interface {
	Election(name string) *redlock.Election
}

var (
	_ Elections      = (*redlock.Client)(nil)
	_ Elections      = (*redlock.MultiLock)(nil)
	_ gocron.Elector = (*Elector)(nil)
)

// Elector is a gocron.Elector (gocron.WithDistributedElector) over a
// redlock election: the replica whose Elector leads runs every job, the
// others skip every run. Start campaigns in the background, and again
// after a loss; IsLeader answers from the leadership held, with no round
// trip per tick; Close resigns, so that another replica takes over at
// once. Its methods are safe for concurrent use; on a nil *Elector they
// return an error (Term, 0), never panic.
//
// What is guaranteed is the election's (docs/election.md,
// docs/safety.md): while no node loses data and clocks run at rates
// within the drift allowance, at no instant do two replicas' Electors
// answer IsLeader with nil, since IsLeader answers nil only while the
// leadership is valid (Done open, Validity above zero), and a lost
// leadership is signalled before its validity runs out. Leaders' terms
// (Term) rise from leader to leader. A tick runs at most once while the
// replicas' timers for it fire less than the settle delay (WithSettle)
// apart: a new leader answers nil only that long after its election.
//
// What is not guaranteed: gocron asks IsLeader when a run starts, and
// nothing stops a run that goes on after the leadership is lost. A
// leader paused (GC, a stopped VM) past its validity is no longer
// leader but does not know it until it runs again, and another may be
// elected meanwhile; checking IsLeader again narrows that window, it
// cannot close it. What protects a resource is the term: read Term when
// the run starts and give it, as a fencing token, to every resource the
// job writes (redlock.FencedSet), which then refuses a deposed leader's
// writes. Neither is guaranteed what Redlock alone does not guarantee
// (nodes that lose data, clocks that jump), nor that every tick runs: a
// change of leader skips the ticks until the next leader has settled,
// and a leader that dies without resigning leaves its leadership to
// expire: the next is elected about a TTL later. Close the Elector
// before its Client: the Elector resigns, so another replica takes over
// at once, while a closed Client only stops extending the leadership,
// which then expires. For jobs that must each run once, and a ctx
// cancelled when the lock is lost, use a Locker and Job instead.
type Elector struct {
	election *redlock.Election
	value    string
	ttl      time.Duration
	settle   time.Duration
	opts     []redlock.LockOption

	cur atomic.Pointer[term] // the leadership held; nil while not leader

	mu      sync.Mutex
	started bool
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when the campaign has ended and resigned
	err     error         // why the campaign ended, when not by Close or ctx
	resign  error         // the final Resign's error, for Close
}

// term is one leadership of an Elector.
type term struct {
	ld    *redlock.Leadership
	ready time.Time // the end of the settle delay
}

// ElectorOption configures an Elector.
type ElectorOption func(*Elector) error

// WithSettle sets how long after its election an Elector waits before
// IsLeader answers nil. The replicas' timers for one tick fire at
// different instants (clock skew, scheduling delay); a leadership that
// changes hands between them would run the tick twice, once by each
// leader. Choose it longer than that spread; a change of leader skips
// the ticks that fall within it. Default: DefaultSettle (500ms); 0 lets a
// new leader run at once. A negative d makes NewElector return an error
// matching redlock.ErrInvalid.
func WithSettle(d time.Duration) ElectorOption {
	return func(e *Elector) error {
		if d < 0 {
			return fmt.Errorf("%w: redlockgocron: settle delay must not be negative, got %v", redlock.ErrInvalid, d)
		}
		e.settle = d
		return nil
	}
}

// WithElectionOptions passes opts to every Campaign the Elector makes:
// redlock.WithRetryDelay for how soon a candidate finds an expired
// leadership, redlock.WithLogger or redlock.WithObserver. Options
// Campaign refuses end the campaign: IsLeader then returns an error
// matching ErrNotLeader and redlock.ErrInvalid (see Err). Default: none.
func WithElectionOptions(opts ...redlock.LockOption) ElectorOption {
	return func(e *Elector) error {
		e.opts = append(e.opts, opts...)
		return nil
	}
}

// NewElector returns an Elector that campaigns in the election called
// name on elections (a *redlock.Client or *redlock.MultiLock, each
// replica its own) with value, the replica's name that
// redlock.Election.Leader reports, for a leadership of ttl,
// auto-extended. Give every replica the same name and ttl. It does no
// I/O; call Start to campaign.
//
// Errors match redlock.ErrInvalid: a nil elections (or a nil pointer in
// it), an empty name, a value over 4096 bytes, a ttl
// shorter than MinTTL, or a bad option.
func NewElector(elections Elections, name, value string, ttl time.Duration, opts ...ElectorOption) (*Elector, error) {
	if minhold.IsNil(elections) {
		return nil, fmt.Errorf("%w: redlockgocron: nil elections (give a *redlock.Client)", redlock.ErrInvalid)
	}
	if name == "" {
		return nil, fmt.Errorf("%w: redlockgocron: empty election name", redlock.ErrInvalid)
	}
	if len(value) > 4096 {
		return nil, fmt.Errorf("%w: redlockgocron: value of %d bytes is longer than %d", redlock.ErrInvalid, len(value), 4096)
	}
	if ttl < MinTTL {
		return nil, fmt.Errorf("%w: redlockgocron: ttl must be at least %v, got %v", redlock.ErrInvalid, MinTTL, ttl)
	}
	e := &Elector{election: elections.Election(name), value: value, ttl: ttl, settle: DefaultSettle, done: make(chan struct{})}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: redlockgocron: nil option", redlock.ErrInvalid)
		}
		if err := o(e); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Start begins the campaign in the background and returns at once. The
// Elector campaigns until it is elected, holds the leadership
// (auto-extended) until it is lost, then campaigns again; until ctx ends
// or Close, which both resign a leadership held. Start once per Elector.
//
// Errors match redlock.ErrInvalid: a nil ctx, a second Start, or a Start
// after Close (then also redlock.ErrClosed).
func (e *Elector) Start(ctx context.Context) error {
	if e == nil {
		return fmt.Errorf("%w: redlockgocron: nil *Elector", redlock.ErrInvalid)
	}
	if ctx == nil {
		return fmt.Errorf("%w: redlockgocron: nil context", redlock.ErrInvalid)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return fmt.Errorf("%w: redlockgocron: Start after Close", redlock.ErrClosed)
	case e.started:
		return fmt.Errorf("%w: redlockgocron: Elector already started", redlock.ErrInvalid)
	}
	e.started = true
	ctx, e.cancel = context.WithCancel(ctx)
	go e.campaign(ctx)
	return nil
}

// campaign is Start's loop: elected, held until lost or ctx ends,
// resigned, again.
func (e *Elector) campaign(ctx context.Context) {
	defer close(e.done)
	for {
		ld, err := e.election.Campaign(ctx, e.value, e.ttl, e.opts...)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, redlock.ErrInvalid) { // bad options, or the Client was closed
				e.mu.Lock()
				e.err = err
				e.mu.Unlock()
				return
			}
			// Campaign gave up (WithMaxTries): pause, so as not to spin,
			// for less than a TTL, so as not to miss an expiry for long.
			select {
			case <-ctx.Done():
				return
			case <-time.After(e.ttl / 4):
			}
			continue
		}
		e.cur.Store(&term{ld: ld, ready: time.Now().Add(e.settle)})
		select {
		case <-ld.Lock().Done():
		case <-ctx.Done():
		}
		// IsLeader stops answering nil before the nodes are released, so
		// that no run starts here after another replica could be elected.
		e.cur.Store(nil)
		lost := ld.Lock().Err() != nil
		// After a loss, Resign clears what the nodes may keep.
		err = ld.Resign(context.WithoutCancel(ctx))
		if ctx.Err() != nil {
			if !lost {
				e.mu.Lock()
				e.resign = err
				e.mu.Unlock()
			}
			return
		}
	}
}

// IsLeader returns nil while the Elector holds a valid leadership (its
// Done open and its Validity above zero) that has settled (WithSettle),
// else an error matching ErrNotLeader; once the campaign has ended for a
// cause other than Close or Start's ctx, the error also matches that
// cause (see Err). It does no I/O and ignores ctx: gocron calls it
// before every run of every job.
func (e *Elector) IsLeader(context.Context) error {
	if e == nil {
		return fmt.Errorf("%w: nil *Elector", ErrNotLeader)
	}
	if t := e.cur.Load(); t != nil && t.valid() {
		return nil
	}
	if err := e.Err(); err != nil {
		return errors.Join(ErrNotLeader, err)
	}
	return ErrNotLeader
}

// valid reports whether t may be acted on now.
func (t *term) valid() bool {
	select {
	case <-t.ld.Lock().Done():
		return false
	default:
	}
	return t.ld.Lock().Validity() > 0 && !time.Now().Before(t.ready)
}

// Term returns the term of the leadership for which IsLeader answers nil
// now: a fencing token greater than every earlier leader's (see
// redlock.Leadership.Term). 0 when IsLeader would return an error. Read
// it when a run starts and give it to the resources the job writes.
func (e *Elector) Term() int64 {
	if e == nil {
		return 0
	}
	if t := e.cur.Load(); t != nil && t.valid() {
		return t.ld.Lock().Fence()
	}
	return 0
}

// Err returns why the campaign ended on its own: an error matching
// redlock.ErrClosed (and redlock.ErrInvalid) when the Client was closed,
// or redlock.ErrInvalid when Campaign refused the options. nil while
// campaigning, before Start, and after a stop by Close or Start's ctx.
func (e *Elector) Err() error {
	if e == nil {
		return fmt.Errorf("%w: redlockgocron: nil *Elector", redlock.ErrInvalid)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// Close stops the campaign and resigns a leadership held, so that a
// waiting replica is elected at once, and returns when that is done.
// IsLeader answers with an error from before the resignation on. Call
// it before the process exits, and before the Client's Close: a process
// that exits without resigning leaves the leadership to expire, a TTL
// later.
// Close before Start only stops the Elector from starting. A second
// Close (also one at the same time) waits as the first and returns nil.
// Close waits for the resignation, which is bounded
// by the per-node timeout (redlock.WithNodeTimeout).
//
// Errors: the resignation's, an error matching redlock.ErrNotHeld when
// fewer than a quorum of nodes still held the leadership (see
// redlock.Leadership.Resign); a leadership lost before Close is no
// error.
func (e *Elector) Close() error {
	if e == nil {
		return fmt.Errorf("%w: redlockgocron: nil *Elector", redlock.ErrInvalid)
	}
	e.mu.Lock()
	first := !e.closed
	e.closed = true
	started := e.started
	if started {
		e.cancel()
	}
	e.mu.Unlock()
	if !started {
		return nil
	}
	<-e.done
	if !first {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.resign
}
