package redlockotel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/seed543a70bd/redlock"
)

// TestConcurrentLocks runs many goroutines locking a few keys, half under
// a parent span and half without one, some cancelled before they start,
// and checks that spans and metrics add up: one span per round, in the
// caller's trace or a root, and locks.held back to 0.
func TestConcurrentLocks(t *testing.T) {
	// A long node timeout: the race detector on a loaded machine must
	// not turn contention into ErrUnreachable.
	h := newHarness(t, 3, redlock.WithNodeTimeout(time.Second))
	const workers, iters = 16, 15
	keys := []string{key(t), key(t), key(t)}

	var (
		mu      sync.Mutex
		parents = map[trace.TraceID]bool{} // traces of the callers' spans
		tries   int
		wins    int
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range iters {
				ctx := context.Background()
				var parent trace.Span
				if w%2 == 0 {
					ctx, parent = h.tracer.Start(ctx, fmt.Sprintf("worker %d/%d", w, i))
					mu.Lock()
					parents[parent.SpanContext().TraceID()] = true
					mu.Unlock()
				}
				if w%4 == 1 && i%3 == 0 {
					c, cancel := context.WithCancel(ctx)
					cancel() // a cancelled round of no duration
					ctx = c
				}
				l, err := h.locker.TryLock(ctx, keys[(w+i)%len(keys)], 5*time.Second)
				mu.Lock()
				tries++
				if err == nil {
					wins++
				}
				mu.Unlock()
				switch {
				case err == nil:
					if err := l.Unlock(context.Background()); err != nil {
						t.Errorf("Unlock: want no error, got %v", err)
					}
				case errors.Is(err, redlock.ErrContended), errors.Is(err, context.Canceled):
				default:
					t.Errorf("TryLock: want nil, ErrContended or Canceled, got %v", err)
				}
				if parent != nil {
					parent.End()
				}
			}
		}()
	}
	wg.Wait()

	locks := h.ended("redlock.lock")
	if len(locks) != tries {
		t.Errorf("redlock.lock spans: want %d (one per TryLock), got %d", tries, len(locks))
	}
	rooted := 0
	for _, s := range locks {
		switch {
		case !s.Parent().IsValid():
			rooted++
		case !parents[s.SpanContext().TraceID()]:
			t.Errorf("span %v: want the trace of its caller's span, got an unknown trace", s.SpanContext().SpanID())
		}
		if s.EndTime().Before(s.StartTime()) {
			t.Errorf("span %v: want an end after its start, got [%v, %v]", s.SpanContext().SpanID(), s.StartTime(), s.EndTime())
		}
	}
	if want := tries / 2; rooted != want {
		t.Errorf("root redlock.lock spans (callers without a span): want %d, got %d", want, rooted)
	}
	if n := len(h.ended("redlock.unlock")); n != wins {
		t.Errorf("redlock.unlock spans: want %d, got %d", wins, n)
	}
	ms := h.metrics(t)
	if got := sum(t, ms, "redlock.acquire.attempts"); got != int64(tries) {
		t.Errorf("redlock.acquire.attempts: want %d, got %d", tries, got)
	}
	if got := sum(t, ms, "redlock.acquire.attempts", won); got != int64(wins) {
		t.Errorf("redlock.acquire.attempts{won}: want %d, got %d", wins, got)
	}
	if got := sum(t, ms, "redlock.locks.held"); got != 0 {
		t.Errorf("redlock.locks.held: want 0, got %d", got)
	}
	if got := sum(t, ms, "redlock.locks.released"); got != int64(wins) {
		t.Errorf("redlock.locks.released: want %d, got %d", wins, got)
	}
}

// TestConcurrentEventsByHand calls one Observer from many goroutines
// with made-up events, nil contexts among them, to give the race detector
// the attribute cache's first-use path.
func TestConcurrentEventsByHand(t *testing.T) {
	h := newObserver(t)
	ops := []string{"lock", "extend", "unlock", "fence"}
	reasons := []string{"won", "contended", "unreachable"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				var ctx context.Context
				if i%2 == 0 {
					ctx = context.Background()
				}
				h.obs.Observe(redlock.Event{Kind: "node", Ctx: ctx, Op: ops[i%4], Node: (g + i) % 5, Status: "failed", Err: errors.New("x")})
				h.obs.Observe(redlock.Event{Kind: "round", Ctx: ctx, Op: ops[i%4], Reason: reasons[i%3], Start: time.Now(), Nodes: make([]redlock.NodeResult, 5)})
			}
		}()
	}
	wg.Wait()
	if got := sum(t, h.metrics(t), "redlock.node.errors"); got != 8*200 {
		t.Errorf("redlock.node.errors: want %d, got %d", 8*200, got)
	}
}
