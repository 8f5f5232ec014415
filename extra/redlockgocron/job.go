package redlockgocron

import (
	"context"
	"errors"
	"fmt"

	"github.com/seed543a70bd/redlock"
)

// ErrNoLock is returned by a Job wrapper run without a lock of its Locker:
// the scheduler was not given the Locker (gocron.WithDistributedLocker or
// WithDistributedJobLocker), the job disabled it, or the task was given a
// context of its own as first parameter, so that the job's ctx is not the
// one gocron locked with. The job function is not called.
var ErrNoLock = errors.New("redlockgocron: no lock held for this run")

type lockCtxKey struct{}

// Job wraps fn as a gocron task function (pass it to gocron.NewTask with
// no parameters) that runs fn under the lock Lock took for this run, with
// a ctx that is cancelled, with a cause matching redlock.ErrLockLost, the
// moment the lock can no longer be proven held: no extension reached a
// quorum before its validity fell to the loss margin, or an extension
// found the key gone or taken (see redlock.Lock.Done). That is before the
// lease can end on the nodes, so a job that stops when ctx is done does
// not run on while another replica holds the lock. The ctx is also
// cancelled when gocron cancels the job's (a shutdown), and carries the
// lock (FromContext).
//
// The task finds its lock through the job's ctx, which gocron passes both
// to Lock and to a task function whose first parameter is a
// context.Context. Do not pass a context to gocron.NewTask (use
// gocron.WithContext for a parent): the task would get that one, and fail.
//
// The wrapper returns fn's error, joined with the loss (an error matching
// redlock.ErrLockLost and redlock.ErrNotHeld) when the lock was lost while
// fn ran; ErrNoLock without calling fn when no lock of l is held for this
// run; an error matching redlock.ErrInvalid for a nil fn. When fn panics,
// the panic goes on to gocron unchanged (gocron unlocks as it unwinds,
// and recovers it only when the job has an AfterJobRunsWithPanic
// listener).
func (l *Locker) Job(fn func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if fn == nil {
			return fmt.Errorf("%w: redlockgocron: nil job function", redlock.ErrInvalid)
		}
		h := l.held(ctx)
		if h == nil {
			return ErrNoLock
		}
		lock := h.Lock()
		jctx, cancel := context.WithCancelCause(context.WithValue(ctx, lockCtxKey{}, lock))
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
		err := fn(jctx)
		// Unlock comes after the job returns, so a closed Done here means
		// the lock was lost.
		if lerr := lock.Err(); lerr != nil {
			return errors.Join(lerr, err)
		}
		return err
	}
}

// FromContext returns the lock held for the run whose ctx (given by a
// Job wrapper) is ctx, and whether there is one: for its Validity, its
// Fence (with redlock.WithFencing in WithLockOptions), or its Done.
func FromContext(ctx context.Context) (*redlock.Lock, bool) {
	if ctx == nil {
		return nil, false
	}
	lock, ok := ctx.Value(lockCtxKey{}).(*redlock.Lock)
	return lock, ok
}
