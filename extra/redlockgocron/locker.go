// Package redlockgocron runs a gocron (github.com/go-co-op/gocron/v2) job
// once across the replicas of a service, not once per replica: with a
// Redlock lock per run (Locker), or on the replica elected leader
// (Elector).
//
// Give every replica's scheduler the same Locker setup, each over its own
// redlock.Client for the same nodes:
//
//	locker, err := redlockgocron.New(client, 30*time.Second)
//	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
//	s.NewJob(gocron.CronJob("0 * * * * *", true),
//		gocron.NewTask(locker.Job(func(ctx context.Context) error {
//			return report(ctx) // ctx is cancelled if the lock is lost
//		})),
//		gocron.WithName("report:minutely"))
//
// gocron locks the job's name before each run and unlocks it after; the
// replica whose attempt wins runs the tick, the others skip it. Give every
// job a name with gocron.WithName: the default, the function's name, is
// the same for two jobs of one function and differs between builds.
//
// Or elect one replica to run every job, with an Elector for
// gocron.WithDistributedElector over the library's election
// (docs/election.md):
//
//	elector, err := redlockgocron.NewElector(client, "reports", hostname, 10*time.Second)
//	err = elector.Start(ctx)
//	defer elector.Close() // resigns: another replica takes over at once
//	s, err := gocron.NewScheduler(gocron.WithDistributedElector(elector))
//
// IsLeader answers from the leadership held, without a round trip per
// tick; a job reads the leader's term (Elector.Term) as its fencing
// token. gocron asks IsLeader when a run starts: a run goes on after its
// replica's leadership is lost (see Elector).
package redlockgocron

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockgocron/internal/minhold"
)

// MinTTL is the shortest TTL New and NewElector accept. The library accepts a few
// milliseconds, but a lease that short is lost to an ordinary scheduler
// stall of a loaded machine before an extension can land, and gocron's
// schedules are not that fine.
const MinTTL = 100 * time.Millisecond

// DefaultMinHold is the default of WithMinHold: half a second, half the
// shortest interval of a cron schedule with seconds: replicas whose timers
// fire up to 375ms apart still run each tick once, and a run does not
// hold off the next second's.
const DefaultMinHold = 500 * time.Millisecond

// Locker is a gocron.Locker whose locks are Redlock locks of a
// *redlock.Client (a *redlock.Client or *redlock.MultiLock). It is safe for
// concurrent use, and one Locker may serve several schedulers.
//
// Lock does not wait for the job's key: a replica that finds it held
// skips the run, since waiting would run the tick again after the holder.
// It only retries, for a quarter of the minimum hold, when its first
// attempt finds the key held: replicas that try at the same instant can
// split the nodes' votes so that none wins. A won lock is auto-extended while the job runs,
// so a job that runs longer than the TTL is not started again by another
// replica; and it is held at least the minimum hold (WithMinHold) after it
// was won, so a short job does not free the tick for a replica whose timer
// fired a little later.
//
// What is guaranteed is the library's (docs/safety.md): while no node
// loses data and clocks run at rates within the drift allowance, at most
// one replica holds a job's lock at any moment, and when no extension can
// reach a quorum the lock is reported lost (Done closes) a margin before
// its validity ends. gocron's Lock has no way to stop a job, so a job that
// goes on after the loss runs without the lock: wrap it with Job, whose ctx
// is cancelled at the loss, and stop when it is.
//
// What is not guaranteed: what Redlock alone does not guarantee (a holder
// paused past its validity, nodes that lose data, clocks that jump), and
// that each tick runs exactly once. A tick runs at most once while the
// replicas' timers for it fire less than three quarters of the minimum
// hold apart and the minimum hold is shorter than the job's interval; a tick is skipped by
// every replica when none can reach a quorum, when the previous run still
// holds the lock, or when a replica that won exits before its job ran.
type Locker struct {
	locker  *redlock.Client
	ttl     time.Duration
	minHold time.Duration
	opts    []redlock.LockOption

	mu   sync.Mutex
	runs map[context.Context]*minhold.Hold // the hold of each job ctx that Lock was given
}

var (
	_ gocron.Locker = (*Locker)(nil)
	_ gocron.Lock   = (*runLock)(nil)
)

// Option configures a Locker.
type Option func(*Locker) error

// WithMinHold sets how long after it was won a lock stays held, however
// soon its job ends: Unlock before then returns at once and the lock is
// released when the minimum hold ends (still auto-extended until then).
// Lock retries a contended first attempt for a quarter of it (see Lock).
// Choose it longer than 4/3 of the spread of the replicas' timers for one
// tick (clock skew plus scheduling delay) and shorter than the job's
// interval less that spread; half the shortest interval does both well. A process
// that exits during a minimum hold leaves the key until its TTL ends.
// Default: DefaultMinHold (500ms). 0 releases when the job ends; a negative
// d makes New return an error matching redlock.ErrInvalid.
func WithMinHold(d time.Duration) Option {
	return func(l *Locker) error {
		if d < 0 {
			return fmt.Errorf("%w: redlockgocron: min hold must not be negative, got %v", redlock.ErrInvalid, d)
		}
		l.minHold = d
		return nil
	}
}

// WithLockOptions passes opts to every acquisition the Locker makes, and so
// to the lock's extensions: redlock.WithFencing for a token per run (see
// FromContext), redlock.WithLogger to log lost locks, redlock.WithMaxHold
// to cap a run. Options a single call refuses make every Lock fail with an
// error matching redlock.ErrInvalid. Default: none.
func WithLockOptions(opts ...redlock.LockOption) Option {
	return func(l *Locker) error {
		l.opts = append(l.opts, opts...)
		return nil
	}
}

// New returns a Locker that locks each job run on locker for ttl,
// auto-extended. It does no I/O.
//
// Errors match redlock.ErrInvalid: a nil locker (or a nil *redlock.Client
// in it), a ttl shorter than MinTTL, or a bad option.
func New(locker *redlock.Client, ttl time.Duration, opts ...Option) (*Locker, error) {
	if minhold.IsNil(locker) {
		return nil, fmt.Errorf("%w: redlockgocron: nil locker", redlock.ErrInvalid)
	}
	if ttl < MinTTL {
		return nil, fmt.Errorf("%w: redlockgocron: ttl must be at least %v, got %v", redlock.ErrInvalid, MinTTL, ttl)
	}
	l := &Locker{locker: locker, ttl: ttl, minHold: DefaultMinHold, runs: make(map[context.Context]*minhold.Hold)}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: redlockgocron: nil option", redlock.ErrInvalid)
		}
		if err := o(l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Lock locks key (the job's name, from gocron) and auto-extends the lock
// until the returned Lock's Unlock. gocron calls it before each run, with
// the job's ctx, and skips the run when it returns an error. It makes one
// attempt (TryLock), and when that finds key held, retries for a quarter
// of the minimum hold from its start (Lock, jittered, WithRetryDelay of a
// sixteenth of it): a split vote among replicas trying at once then still
// lets one win, and a winner's run, held for the whole minimum hold, is
// never followed by a second run of the same tick. With no minimum hold
// it makes one attempt only.
//
// Errors are TryLock's and Lock's: an error matching
// redlock.ErrNotObtained and redlock.ErrContended while another run (of
// this replica or another) holds key (with context.DeadlineExceeded after
// retries), redlock.ErrUnreachable when too few nodes answered, or ctx's
// error; redlock.ErrInvalid for an empty key or a nil ctx.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: redlockgocron: nil context", redlock.ErrInvalid)
	}
	if key == "" {
		return nil, fmt.Errorf("%w: redlockgocron: empty key (give the job a name with gocron.WithName)", redlock.ErrInvalid)
	}
	h, err := minhold.Acquire(ctx, "redlockgocron", l.locker, key, l.ttl, l.minHold, l.opts)
	if err != nil {
		return nil, err
	}
	rl := &runLock{l: l, h: h}
	// A ctx whose type cannot be a map key is not recorded: its job's
	// Job wrapper then fails with ErrNoLock rather than the map panic.
	if reflect.TypeOf(ctx).Comparable() {
		l.mu.Lock()
		if _, taken := l.runs[ctx]; !taken {
			l.runs[ctx] = h
			rl.ctx = ctx
		}
		l.mu.Unlock()
	}
	return rl, nil
}

// held returns the hold Lock recorded for ctx, or nil.
func (l *Locker) held(ctx context.Context) *minhold.Hold {
	if ctx == nil || !reflect.TypeOf(ctx).Comparable() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[ctx]
}

// runLock is the gocron.Lock of one run.
type runLock struct {
	l   *Locker
	h   *minhold.Hold
	ctx context.Context // the key of h in l.runs; nil when not recorded
}

// Unlock ends the run's hold: see hold.release. It returns an error
// matching redlock.ErrLockLost when the lock was lost while the job ran
// (gocron ignores it).
func (r *runLock) Unlock(ctx context.Context) error {
	if r.ctx != nil {
		r.l.mu.Lock()
		if r.l.runs[r.ctx] == r.h {
			delete(r.l.runs, r.ctx)
		}
		r.l.mu.Unlock()
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return r.h.Release(ctx)
}
