package redlock

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLockExtExclusionAndWakeups: lockExt and unlockExt from 8
// goroutines, half of the waits with contexts that end at random
// instants, mixed with the scheduler's TryLock. At most one holder at a
// time, every wait ends (no lost wake-up: with no ctx to end it, a lost
// one would hang), and a wait whose ctx ends returns its error without
// the lock.
func TestLockExtExclusionAndWakeups(t *testing.T) {
	var l Lock
	var inside atomic.Int32
	var ctxEnded atomic.Int64
	critical := func() {
		if n := inside.Add(1); n != 1 {
			t.Errorf("%d holders of extMu at once", n)
		}
		if rand.IntN(4) == 0 {
			time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond)
		}
		inside.Add(-1)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 3000 {
				switch {
				case g == 0 && i%2 == 0: // the scheduler's way in
					if l.extMu.TryLock() {
						critical()
						l.unlockExt()
					}
				case g%2 == 1:
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(100))*time.Microsecond)
					if err := l.lockExt(ctx); err != nil {
						if ctx.Err() == nil {
							t.Errorf("lockExt failed with a live ctx: %v", err)
						}
						ctxEnded.Add(1)
					} else {
						critical()
						l.unlockExt()
					}
					cancel()
				default:
					if err := l.lockExt(context.Background()); err != nil {
						t.Errorf("lockExt with a background ctx: %v", err)
						return
					}
					critical()
					l.unlockExt()
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("lockExt waits did not all end within 60s: a lost wake-up")
	}
	t.Logf("%d waits ended by their ctx", ctxEnded.Load())
	if !l.extMu.TryLock() {
		t.Fatal("extMu left held")
	}
}
