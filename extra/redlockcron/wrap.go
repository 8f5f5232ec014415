// Package redlockcron runs a robfig/cron (github.com/robfig/cron/v3) job
// once across the instances of a service, not once per instance, with a
// Redlock lock per run: job wrappers in the manner of cron's own
// SkipIfStillRunning.
//
// Wrap each job with its own key (a wrapper given to cron.WithChain would
// lock every job of the Cron under one key):
//
//	c := cron.New(cron.WithSeconds())
//	c.AddJob("0 * * * * *", cron.NewChain(
//		cron.Recover(cron.DefaultLogger),
//		redlockcron.SkipIfLocked(client, "report:minutely", 30*time.Second),
//	).Then(reportJob))
//
// cron's Job.Run has no ctx, so a lost lock cannot stop a running job:
// use Func for a job that can take a ctx, which is cancelled at the loss.
package redlockcron

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockcron/internal/minhold"
)

// MinTTL is the shortest TTL the wrappers accept. The library accepts a
// few milliseconds, but a lease that short is lost to an ordinary
// scheduler stall of a loaded machine before an extension can land, and
// cron's schedules are not that fine.
const MinTTL = 100 * time.Millisecond

// DefaultMinHold is the default of WithMinHold: half a second, half the
// shortest interval of a schedule with seconds: instances whose timers
// fire up to 375ms apart still run each tick once, and a run does not
// hold off the next second's.
const DefaultMinHold = 500 * time.Millisecond

// Option configures a wrapper.
type Option func(*config) error

// WithMinHold sets how long after it was won the lock of SkipIfLocked and
// Func stays held, however soon the job ends: the lock is released when
// the minimum hold ends (still auto-extended until then); a contended
// first attempt is retried for a quarter of it (see SkipIfLocked). Choose
// it longer than 4/3 of the spread of the instances' timers for one tick
// (clock skew plus scheduling delay) and shorter than the job's interval
// less that spread; half the shortest interval does both well. A process that exits during a
// minimum hold leaves the key until its TTL ends. DelayIfLocked does not
// use it: its waiters run after the holder anyway. Default:
// DefaultMinHold (500ms); 0 releases when the job ends; negative is
// invalid.
func WithMinHold(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: redlockcron: min hold must not be negative, got %v", redlock.ErrInvalid, d)
		}
		c.minHold = d
		return nil
	}
}

// WithLogger sets the logger of skipped runs (Info), and of runs not made
// for bad input or a failed acquisition, lost locks and Func's errors
// (Error). Default: cron.DefaultLogger, which prints errors only; nil is
// invalid.
func WithLogger(l cron.Logger) Option {
	return func(c *config) error {
		if minhold.IsNil(l) {
			return fmt.Errorf("%w: redlockcron: nil logger", redlock.ErrInvalid)
		}
		c.logger = l
		return nil
	}
}

// WithLockOptions passes opts to every acquisition, and so to the lock's
// extensions: redlock.WithFencing for a token per run (see FromContext),
// redlock.WithMaxHold to cap a run. Options a single call refuses make
// every run fail with an error matching redlock.ErrInvalid, logged.
// Default: none.
func WithLockOptions(opts ...redlock.LockOption) Option {
	return func(c *config) error {
		c.lockOpts = append(c.lockOpts, opts...)
		return nil
	}
}

// config is one wrapper's settings; err is why it may not run.
type config struct {
	locker   *redlock.Client
	key      string
	ttl      time.Duration
	minHold  time.Duration
	logger   cron.Logger
	lockOpts []redlock.LockOption
	err      error
}

func newConfig(locker *redlock.Client, key string, ttl time.Duration, opts []Option) *config {
	c := &config{locker: locker, key: key, ttl: ttl, minHold: DefaultMinHold, logger: cron.DefaultLogger}
	c.err = c.validate(opts)
	return c
}

func (c *config) validate(opts []Option) error {
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: redlockcron: nil option", redlock.ErrInvalid)
		}
		if err := o(c); err != nil {
			return err
		}
	}
	switch {
	case minhold.IsNil(c.locker):
		return fmt.Errorf("%w: redlockcron: nil locker", redlock.ErrInvalid)
	case c.key == "":
		return fmt.Errorf("%w: redlockcron: empty key", redlock.ErrInvalid)
	case c.ttl < MinTTL:
		return fmt.Errorf("%w: redlockcron: ttl must be at least %v, got %v", redlock.ErrInvalid, MinTTL, c.ttl)
	}
	return nil
}

// Validate returns the error for which SkipIfLocked, DelayIfLocked or
// Func with these arguments would run no job and log it at every run, or
// nil: call it at start-up to fail there. The error matches
// redlock.ErrInvalid: a nil locker (or a nil *redlock.Client in it), an
// empty key, a ttl shorter than MinTTL, or a bad option.
func Validate(locker *redlock.Client, key string, ttl time.Duration, opts ...Option) error {
	return newConfig(locker, key, ttl, opts).err
}

// SkipIfLocked returns a cron.JobWrapper that runs the job only when it
// locks key for ttl without waiting for a holder: the run is skipped, and
// logged at Info, while another run (of this instance or another) holds
// key. It makes one attempt (TryLock), and when that finds key held,
// retries for a quarter of the minimum hold from its start (Lock,
// jittered): instances that try at the same instant can split the nodes'
// votes so that none wins, and a winner, held for the whole minimum hold,
// is never followed by a second run of its tick. The lock is auto-extended while the job runs, so a job that runs
// longer than ttl is not started again elsewhere, and held at least the
// minimum hold (WithMinHold) after it was won, so a short job does not
// free the tick for an instance whose timer fired a little later.
//
// What is guaranteed is the library's (docs/safety.md): while no node
// loses data and clocks run at rates within the drift allowance, at most
// one run holds key at any moment, and when no extension can reach a
// quorum the lock is reported lost a margin before its validity ends. But
// Job.Run has no ctx: a job that is running when its lock is lost runs on
// without it; the loss is logged (Error) when it returns. Use Func for a
// job that can stop.
//
// What is not guaranteed: what Redlock alone does not guarantee (a holder
// paused past its validity, nodes that lose data, clocks that jump), and
// that each tick runs exactly once. A tick runs at most once while the
// instances' timers for it fire less than three quarters of the minimum
// hold apart and the minimum hold is shorter than the job's interval; it is skipped by every
// instance when none can reach a quorum or the previous run still holds
// the lock.
//
// Bad arguments (see Validate) never panic: the job is not run and the
// error is logged at every run. A failed acquisition other than contention
// is logged (Error). A panicking job releases the lock (after the minimum
// hold) and the panic goes on, to cron.Recover if the chain has it.
func SkipIfLocked(locker *redlock.Client, key string, ttl time.Duration, opts ...Option) cron.JobWrapper {
	c := newConfig(locker, key, ttl, opts)
	return func(j cron.Job) cron.Job {
		return cron.FuncJob(func() {
			c.run(c.minHold, 0, func(*redlock.Lock) { j.Run() })
		})
	}
}

// DelayIfLocked returns a cron.JobWrapper that waits up to maxWait for the
// lock of key (Lock, retrying; woken by the holder's release) and runs the
// job under it, auto-extended like SkipIfLocked's. A run that gets no lock
// within maxWait is skipped and logged (Error).
//
// It serializes runs, it does not deduplicate them: with N instances on
// one schedule, each tick runs N times, one after another, as cron's
// DelayIfStillRunning does within one process. Use it for a job each
// instance must run but never two at once; use SkipIfLocked to run a tick
// once. Its guarantees and limits are otherwise SkipIfLocked's; the
// minimum hold does not apply. A maxWait <= 0 is invalid (logged at every
// run, like the arguments Validate checks).
func DelayIfLocked(locker *redlock.Client, key string, ttl, maxWait time.Duration, opts ...Option) cron.JobWrapper {
	c := newConfig(locker, key, ttl, opts)
	if c.err == nil && maxWait <= 0 {
		c.err = fmt.Errorf("%w: redlockcron: max wait must be positive, got %v", redlock.ErrInvalid, maxWait)
	}
	return func(j cron.Job) cron.Job {
		return cron.FuncJob(func() {
			c.run(0, maxWait, func(*redlock.Lock) { j.Run() })
		})
	}
}

type lockCtxKey struct{}

// Func returns a cron.Job that runs fn like a job wrapped by SkipIfLocked
// (no wait for a holder, auto-extension, minimum hold), with a ctx that is
// cancelled, with a cause matching redlock.ErrLockLost, the moment the
// lock can no longer be proven held: no extension reached a quorum before
// its validity fell to the loss margin, or an extension found the key gone
// or taken (see redlock.Lock.Done). That is before the lease can end on
// the nodes, so fn, if it stops when ctx is done, does not run on while
// another instance holds the lock. The ctx carries the lock (FromContext).
//
// fn's error, and the loss, are logged (Error). A nil fn is invalid
// (logged at every run, like the arguments Validate checks). When fn
// panics, the lock is released (after the minimum hold) and the panic
// goes on.
func Func(locker *redlock.Client, key string, ttl time.Duration, fn func(ctx context.Context) error, opts ...Option) cron.Job {
	c := newConfig(locker, key, ttl, opts)
	if c.err == nil && fn == nil {
		c.err = fmt.Errorf("%w: redlockcron: nil job function", redlock.ErrInvalid)
	}
	return cron.FuncJob(func() {
		c.run(c.minHold, 0, func(lock *redlock.Lock) {
			ctx, cancel := context.WithCancelCause(context.WithValue(context.Background(), lockCtxKey{}, lock))
			ended := make(chan struct{})
			go func() {
				select {
				case <-lock.Done():
					cancel(lock.Err())
				case <-ended:
				}
			}()
			defer func() {
				close(ended)
				cancel(context.Canceled)
			}()
			if err := fn(ctx); err != nil {
				c.logger.Error(err, "redlockcron: job failed", "key", c.key)
			}
		})
	})
}

// FromContext returns the lock held for the run of Func whose ctx is ctx,
// and whether there is one: for its Validity, its Fence (with
// redlock.WithFencing in WithLockOptions), or its Done.
func FromContext(ctx context.Context) (*redlock.Lock, bool) {
	if ctx == nil {
		return nil, false
	}
	lock, ok := ctx.Value(lockCtxKey{}).(*redlock.Lock)
	return lock, ok
}

// run acquires the lock (by obtain when wait is 0, else waiting up to
// wait), runs body under it and releases it, logging what it did not do.
func (c *config) run(minHold, wait time.Duration, body func(*redlock.Lock)) {
	if c.err != nil {
		c.logger.Error(c.err, "redlockcron: job not run", "key", c.key)
		return
	}
	ctx := context.Background()
	var (
		lock *redlock.Lock
		err  error
	)
	if wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		lock, err = c.locker.Lock(wctx, c.key, c.ttl, c.lockOpts...)
		cancel()
	} else {
		lock, err = minhold.Obtain(ctx, c.locker, c.key, c.ttl, minHold, c.lockOpts)
	}
	if err == nil {
		var h *minhold.Hold
		if h, err = minhold.Start(ctx, "redlockcron", lock, minHold); err == nil {
			defer func() {
				if err := h.Release(ctx); errors.Is(err, redlock.ErrLockLost) {
					c.logger.Error(err, "redlockcron: lock lost while the job ran", "key", c.key)
				}
			}()
			body(lock)
			return
		}
	}
	if wait == 0 && errors.Is(err, redlock.ErrContended) {
		c.logger.Info("redlockcron: skip, locked elsewhere", "key", c.key)
		return
	}
	c.logger.Error(err, "redlockcron: job not run, lock not obtained", "key", c.key)
}
