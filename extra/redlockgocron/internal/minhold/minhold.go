// Package minhold holds a scheduled run's lock for at least a minimum
// time, so that replicas whose timers fire a little apart for the same
// tick find the key taken instead of free. extra/redlockcron has the same
// package: a released module imports no internal package of another
// module, whose internals are no contract once the modules are tagged
// apart. A change to one is made to both.
package minhold

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/seed543a70bd/redlock"
)

// Hold is one run's lock, auto-extended until Release, and released no
// sooner than minHold after it was won.
type Hold struct {
	name     string // the adapter's package, which prefixes its errors
	lock     *redlock.Lock
	stop     context.CancelFunc // ends the auto-extension's ctx
	won      time.Time
	minHold  time.Duration
	released atomic.Bool
}

// Acquire obtains key (Obtain) and starts its auto-extension (Start).
func Acquire(ctx context.Context, name string, locker *redlock.Client, key string, ttl, minHold time.Duration, opts []redlock.LockOption) (*Hold, error) {
	lock, err := Obtain(ctx, locker, key, ttl, minHold, opts)
	if err != nil {
		return nil, err
	}
	return Start(ctx, name, lock, minHold)
}

// Start auto-extends lock until Release. The extension's ctx keeps ctx's
// values but not its cancellation: a job whose ctx is cancelled (a
// scheduler shutting down) may still be finishing, and its lock must
// last until it has. name, the adapter's package, prefixes Release's
// errors.
func Start(ctx context.Context, name string, lock *redlock.Lock, minHold time.Duration) (*Hold, error) {
	ext, stop := context.WithCancel(context.WithoutCancel(ctx))
	if err := lock.AutoExtend(ext); err != nil {
		stop()
		_ = lock.Unlock(context.WithoutCancel(ctx))
		return nil, err
	}
	return &Hold{name: name, lock: lock, stop: stop, won: time.Now(), minHold: minHold}, nil
}

// Obtain makes one attempt at key and, when it finds the key held by
// another owner and minHold is positive, retries for a quarter of minHold
// from the first attempt's start. Replicas whose timers fire at the same
// instant can split the nodes' votes so that none wins (each attempt then
// reads as contended); the retries, jittered, let one of them win. They
// end well before a winner's minimum hold does, so they cannot take the
// tick a winner already ran: the spread of timers a tick tolerates is
// three quarters of minHold.
func Obtain(ctx context.Context, locker *redlock.Client, key string, ttl, minHold time.Duration, opts []redlock.LockOption) (*redlock.Lock, error) {
	begin := time.Now()
	lock, err := locker.TryLock(ctx, key, ttl, opts...)
	window := minHold / 4
	delay := window / 4
	if err == nil || delay <= 0 || !errors.Is(err, redlock.ErrContended) {
		return lock, err
	}
	wctx, cancel := context.WithDeadline(ctx, begin.Add(window))
	defer cancel()
	if wctx.Err() != nil {
		return nil, err
	}
	// The caller's options come last, so that they win. No hand-off: a
	// winner's release comes after the window.
	retry := append([]redlock.LockOption{redlock.WithRetryDelay(delay), redlock.WithHandoff(false)}, opts...)
	return locker.Lock(wctx, key, ttl, retry...)
}

// Lock returns the lock held.
func (h *Hold) Lock() *redlock.Lock { return h.lock }

// Release ends the hold. Before minHold has passed since the lock was won
// it returns at once and leaves the lock held, still auto-extended, until
// then: a replica whose timer fires a little later for the same tick
// finds the key taken instead of free. It returns the loss when the lock
// was lost while held (an error matching redlock.ErrLockLost), else
// Unlock's error; a release deferred by minHold reports neither. A second
// Release returns an error matching redlock.ErrReleased.
func (h *Hold) Release(ctx context.Context) error {
	if !h.released.CompareAndSwap(false, true) {
		return fmt.Errorf("%s: %w", h.name, redlock.ErrReleased)
	}
	ctx = context.WithoutCancel(ctx)
	lost := h.lock.Err()
	if wait := h.minHold - time.Since(h.won); wait > 0 && lost == nil {
		time.AfterFunc(wait, func() {
			_ = h.lock.Unlock(ctx)
			h.stop()
		})
		return nil
	}
	err := h.lock.Unlock(ctx)
	h.stop()
	if lost != nil {
		return lost
	}
	return err
}

// IsNil reports whether v is nil or an interface holding a nil pointer
// (a nil *redlock.Client), whose methods would fail on every run.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice:
		return rv.IsNil()
	}
	return false
}
