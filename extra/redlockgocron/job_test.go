package redlockgocron_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockgocron"
	"github.com/seed543a70bd/redlock/redlocktest"
)

// When the lock is lost while the job runs (its key deleted on every node,
// as by nodes that lost their data), the job's ctx is cancelled with a
// cause matching ErrLockLost, and the wrapper and Unlock report the loss.
func TestLostLockCancelsJobCtx(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	k := key(t)
	l, err := redlockgocron.New(newClient(t, nodes), 300*time.Millisecond)
	if err != nil {
		t.Fatalf("New: want no error, got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run, err := l.Lock(ctx, k)
	if err != nil {
		t.Fatalf("Lock: want no error, got %v", err)
	}
	delEverywhere(t, nodes, k)
	var cause error
	err = l.Job(func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return errors.New("ctx not cancelled within 10s")
		}
	})(ctx)
	if !errors.Is(cause, redlock.ErrLockLost) {
		t.Errorf("job ctx cause: want ErrLockLost, got %v", cause)
	}
	if !errors.Is(err, redlock.ErrLockLost) || !errors.Is(err, context.Canceled) {
		t.Errorf("Job: want ErrLockLost joined with the job's error, got %v", err)
	}
	if err := run.Unlock(ctx); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Unlock after loss: want ErrLockLost, got %v", err)
	}
}

// A panicking job function: the panic reaches the caller unchanged, and
// the run's Unlock (which gocron defers) still releases the key.
func TestJobPanicPassesThrough(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	k := key(t)
	l, err := redlockgocron.New(newClient(t, nodes), time.Second, redlockgocron.WithMinHold(0))
	if err != nil {
		t.Fatalf("New: want no error, got %v", err)
	}
	ctx := context.Background()
	run, err := l.Lock(ctx, k)
	if err != nil {
		t.Fatalf("Lock: want no error, got %v", err)
	}
	got := func() (v any) {
		defer func() { v = recover() }()
		defer run.Unlock(ctx)
		_ = l.Job(func(context.Context) error { panic("job failed") })(ctx)
		return nil
	}()
	if got != "job failed" {
		t.Errorf("recovered: want the job's panic, got %v", got)
	}
	if !free(t, newClient(t, nodes), k) {
		t.Errorf("key after a panicking run: want free, got held")
	}
}

// Many runs locking one key at once on one Locker (gocron without
// singleton mode, or several schedulers sharing a Locker): exactly one
// wins, the others get ErrContended or another ErrNotObtained.
func TestConcurrentLocksOneWinner(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	k := key(t)
	l, err := redlockgocron.New(newClient(t, nodes), 2*time.Second, redlockgocron.WithMinHold(0))
	if err != nil {
		t.Fatalf("New: want no error, got %v", err)
	}
	const n = 16
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		won   int
		start = make(chan struct{})
	)
	for range n {
		wg.Go(func() {
			ctx := context.WithoutCancel(context.Background()) // a ctx of its own, as each gocron job has
			<-start
			run, err := l.Lock(ctx, k)
			if err != nil {
				if !errors.Is(err, redlock.ErrNotObtained) {
					t.Errorf("Lock: want ErrNotObtained, got %v", err)
				}
				return
			}
			mu.Lock()
			won++
			mu.Unlock()
			if err := l.Job(func(context.Context) error { return nil })(ctx); err != nil {
				t.Errorf("Job of the winner: want no error, got %v", err)
			}
			time.Sleep(100 * time.Millisecond) // hold while the others try
			if err := run.Unlock(ctx); err != nil {
				t.Errorf("Unlock: want no error, got %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if won != 1 {
		t.Errorf("winners: want 1, got %d", won)
	}
}

// A Lock whose ctx is already cancelled takes nothing.
func TestCancelledLockTakesNothing(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	k := key(t)
	l, err := redlockgocron.New(newClient(t, nodes), time.Second)
	if err != nil {
		t.Fatalf("New: want no error, got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Lock(ctx, k); !errors.Is(err, context.Canceled) || !errors.Is(err, redlock.ErrNotObtained) {
		t.Errorf("Lock with a cancelled ctx: want ErrNotObtained and context.Canceled, got %v", err)
	}
	if !free(t, newClient(t, nodes), k) {
		t.Errorf("key after a cancelled Lock: want free, got held")
	}
}

// A run shorter than the minimum hold keeps its key until the minimum
// hold ends, so a replica whose timer fires a little later for the same
// tick is refused; with no minimum hold the key is free at Unlock.
func TestMinHoldKeepsShortRunsKey(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	other := newClient(t, nodes)
	for _, minHold := range []time.Duration{0, time.Second} {
		k := key(t)
		l, err := redlockgocron.New(newClient(t, nodes), 2*time.Second, redlockgocron.WithMinHold(minHold))
		if err != nil {
			t.Fatalf("New: want no error, got %v", err)
		}
		ctx := context.Background()
		run, err := l.Lock(ctx, k)
		if err != nil {
			t.Fatalf("Lock: want no error, got %v", err)
		}
		won := time.Now()
		if err := run.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: want no error, got %v", err)
		}
		isFree := free(t, other, k)
		if minHold == 0 && !isFree {
			t.Errorf("min hold 0: want the key free at Unlock, got held")
		}
		if minHold > 0 {
			if isFree && time.Since(won) < minHold {
				t.Errorf("min hold %v: want the key held right after Unlock, got free", minHold)
			}
			eventually(t, minHold+5*time.Second, "key free after the min hold", func() bool { return free(t, other, k) })
		}
		if err := run.Unlock(ctx); !errors.Is(err, redlock.ErrReleased) {
			t.Errorf("second Unlock: want ErrReleased, got %v", err)
		}
	}
}

// Bad input is an error matching ErrInvalid (or ErrNoLock), never a panic.
func TestBadInputIsAnError(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	c := newClient(t, nodes)
	var nilClient *redlock.Client
	for name, call := range map[string]func() error{
		"nil locker":        func() error { _, err := redlockgocron.New(nil, time.Second); return err },
		"nil *Client":       func() error { _, err := redlockgocron.New(nilClient, time.Second); return err },
		"ttl below MinTTL":  func() error { _, err := redlockgocron.New(c, redlockgocron.MinTTL-1); return err },
		"zero ttl":          func() error { _, err := redlockgocron.New(c, 0); return err },
		"negative min hold": func() error { _, err := redlockgocron.New(c, time.Second, redlockgocron.WithMinHold(-1)); return err },
		"nil option":        func() error { _, err := redlockgocron.New(c, time.Second, nil); return err },
	} {
		if err := call(); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("%s: want ErrInvalid, got %v", name, err)
		}
	}
	l, err := redlockgocron.New(c, time.Second)
	if err != nil {
		t.Fatalf("New: want no error, got %v", err)
	}
	if _, err := l.Lock(context.Background(), ""); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("empty key: want ErrInvalid, got %v", err)
	}
	var nilCtx context.Context
	if _, err := l.Lock(nilCtx, key(t)); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("nil ctx: want ErrInvalid, got %v", err)
	}
	if err := l.Job(nil)(context.Background()); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("nil job function: want ErrInvalid, got %v", err)
	}
	called := false
	if err := l.Job(func(context.Context) error { called = true; return nil })(context.Background()); !errors.Is(err, redlockgocron.ErrNoLock) {
		t.Errorf("job run without a lock: want ErrNoLock, got %v", err)
	}
	if called {
		t.Errorf("job run without a lock: want fn not called, got called")
	}
	bad, err := redlockgocron.New(c, time.Second, redlockgocron.WithLockOptions(redlock.WithNodeTimeout(-1)))
	if err != nil {
		t.Fatalf("New: want no error, got %v", err)
	}
	if _, err := bad.Lock(context.Background(), key(t)); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("a bad option given per call: want ErrInvalid, got %v", err)
	}
}
