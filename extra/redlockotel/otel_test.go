package redlockotel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockotel"
)

func TestContendedSpanAndMetrics(t *testing.T) {
	h := newHarness(t, 3)
	k := key(t)
	ctx := context.Background()

	l, err := h.locker.TryLock(ctx, k, 10*time.Second)
	if err != nil {
		t.Fatalf("TryLock: want no error, got %v", err)
	}
	if got := sum(t, h.metrics(t), "redlock.locks.held"); got != 1 {
		t.Errorf("redlock.locks.held while held: want 1, got %d", got)
	}
	_, err = h.locker.TryLock(ctx, k, 10*time.Second)
	if !errors.Is(err, redlock.ErrContended) {
		t.Fatalf("second TryLock: want ErrContended, got %v", err)
	}
	if err := l.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("Extend: want no error, got %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: want no error, got %v", err)
	}

	locks := h.ended("redlock.lock")
	if len(locks) != 2 {
		t.Fatalf("redlock.lock spans: want 2, got %d", len(locks))
	}
	s := locks[1]
	if s.Parent().IsValid() {
		t.Errorf("parent: want none (a root span), got %v", s.Parent().SpanID())
	}
	if v, _ := attr(s, "redlock.reason"); v.AsString() != "contended" {
		t.Errorf("redlock.reason: want contended, got %q", v.AsString())
	}
	if v, _ := attr(s, "error.type"); v.AsString() != "contended" {
		t.Errorf("error.type: want contended, got %q", v.AsString())
	}
	if v, _ := attr(s, "redlock.nodes.taken"); v.AsInt64() < 2 {
		t.Errorf("redlock.nodes.taken: want at least 2, got %d", v.AsInt64())
	}
	if s.Status().Code != codes.Error || s.Status().Description != err.Error() {
		t.Errorf("status: want Error %q, got %v", err, s.Status())
	}
	if n := len(events(s, "exception")); n != 0 {
		t.Errorf("exception events for contention: want 0, got %d", n)
	}
	if n := len(h.ended("redlock.extend")); n != 1 {
		t.Errorf("redlock.extend spans: want 1, got %d", n)
	}

	ms := h.metrics(t)
	for _, c := range []struct {
		name string
		kvs  []attribute.KeyValue
		want int64
	}{
		{"redlock.acquire.attempts", []attribute.KeyValue{won}, 1},
		{"redlock.acquire.attempts", []attribute.KeyValue{busy}, 1},
		{"redlock.locks.held", nil, 0},
		{"redlock.extensions", nil, 1},
		{"redlock.locks.released", nil, 1},
		{"redlock.locks.lost", nil, 0},
		// Only op "lock" is exact: see redlockprom's TestLockExtendUnlock.
		{"redlock.node.errors", []attribute.KeyValue{opLock}, 0},
	} {
		if got := sum(t, ms, c.name, c.kvs...); got != c.want {
			t.Errorf("%s%v: want %d, got %d", c.name, c.kvs, c.want, got)
		}
	}
	for _, c := range []struct {
		name string
		kvs  []attribute.KeyValue
		want uint64
	}{
		{"redlock.round.duration", []attribute.KeyValue{opLock, won}, 1},
		{"redlock.round.duration", []attribute.KeyValue{opLock, busy}, 1},
		{"redlock.round.duration", []attribute.KeyValue{opUnlock, won}, 1},
		{"redlock.lock.hold.duration", nil, 1},
	} {
		if got := count(t, ms, c.name, c.kvs...); got != c.want {
			t.Errorf("%s%v count: want %d, got %d", c.name, c.kvs, c.want, got)
		}
	}
	// Replies that decided a round are observed before it: at least a
	// quorum per round (lock, contended lock, extend, unlock).
	if got := count(t, ms, "redlock.node.request.duration"); got < 8 {
		t.Errorf("redlock.node.request.duration count: want at least 8, got %d", got)
	}
}

func TestLostLock(t *testing.T) {
	h := newHarness(t, 3)
	ctx, parent := h.tracer.Start(context.Background(), "job")
	defer parent.End()
	l, err := h.locker.TryLock(ctx, key(t), 200*time.Millisecond)
	if err != nil {
		t.Fatalf("TryLock: want no error, got %v", err)
	}
	<-l.Done() // not extended: lost at the loss margin
	if !errors.Is(l.Err(), redlock.ErrLockLost) {
		t.Fatalf("Err: want ErrLockLost, got %v", l.Err())
	}
	ms := h.metrics(t)
	if got := sum(t, ms, "redlock.locks.lost"); got != 1 {
		t.Errorf("redlock.locks.lost: want 1, got %d", got)
	}
	if got := sum(t, ms, "redlock.locks.held"); got != 0 {
		t.Errorf("redlock.locks.held: want 0, got %d", got)
	}
	_ = l.Unlock(ctx) // reported once: no second decrement
	if got := sum(t, h.metrics(t), "redlock.locks.held"); got != 0 {
		t.Errorf("redlock.locks.held after Unlock of a lost lock: want 0, got %d", got)
	}
	parent.End()
	if n := len(events(h.ended("job")[0], "redlock.lock.lost")); n != 1 {
		t.Errorf("redlock.lock.lost events on the acquiring span: want 1, got %d", n)
	}
}

// TestZeroValues: nil contexts, empty events, the zero Observer and a
// nil *Observer do not panic.
func TestZeroValues(t *testing.T) {
	h := newObserver(t)
	h.obs.Observe(redlock.Event{Kind: "round"})
	h.obs.Observe(redlock.Event{Kind: "node"})
	h.obs.Observe(redlock.Event{Kind: "lock"})
	if n := len(h.ended("redlock.")); n != 1 {
		t.Errorf("spans of an empty round: want 1 (named redlock.), got %d", n)
	}
	var zero redlockotel.Observer
	zero.Observe(redlock.Event{Kind: "round", Op: "lock"})
	zero.Observe(redlock.Event{Kind: "node"})
	zero.Observe(redlock.Event{Kind: "lock"})
	var nilObs *redlockotel.Observer
	nilObs.Observe(redlock.Event{Kind: "round", Op: "lock"})
	nilObs.Observe(redlock.Event{Kind: "node"})
	nilObs.Observe(redlock.Event{Kind: "lock"})
}

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
