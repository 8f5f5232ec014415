package redlockotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockotel"
)

var (
	opLock   = attribute.String("redlock.op", "lock")
	opUnlock = attribute.String("redlock.op", "unlock")
	won      = attribute.String("redlock.reason", "won")
	busy     = attribute.String("redlock.reason", "contended")
)

// checkChild fails unless s is a child of parent, in its trace.
func checkChild(t *testing.T, s sdktrace.ReadOnlySpan, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if got, want := s.Parent().SpanID(), parent.SpanContext().SpanID(); got != want {
		t.Errorf("%s parent: want %v, got %v", s.Name(), want, got)
	}
	if got, want := s.SpanContext().TraceID(), parent.SpanContext().TraceID(); got != want {
		t.Errorf("%s trace: want %v, got %v", s.Name(), want, got)
	}
}

func TestTryLockUnlockSpans(t *testing.T) {
	h := newHarness(t, 3)
	k := key(t)
	ctx, parent := h.tracer.Start(context.Background(), "job")

	before := time.Now()
	l, err := h.locker.TryLock(ctx, k, 10*time.Second)
	if err != nil {
		t.Fatalf("TryLock: want no error, got %v", err)
	}
	after := time.Now()
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: want no error, got %v", err)
	}
	parent.End()
	job := h.ended("job")[0]

	locks := h.ended("redlock.lock")
	if len(locks) != 1 {
		t.Fatalf("redlock.lock spans: want 1, got %d", len(locks))
	}
	s := locks[0]
	checkChild(t, s, job)
	if s.StartTime().Before(before) || s.EndTime().After(after) || s.EndTime().Before(s.StartTime()) {
		t.Errorf("span times: want within [%v, %v], got [%v, %v]", before, after, s.StartTime(), s.EndTime())
	}
	if v, _ := attr(s, "redlock.reason"); v.AsString() != "won" {
		t.Errorf("redlock.reason: want won, got %q", v.AsString())
	}
	if v, _ := attr(s, "redlock.won"); !v.AsBool() {
		t.Errorf("redlock.won: want true, got false")
	}
	if v, _ := attr(s, "redlock.keys"); len(v.AsStringSlice()) != 1 || v.AsStringSlice()[0] != k {
		t.Errorf("redlock.keys: want [%s], got %v", k, v.AsStringSlice())
	}
	if v, _ := attr(s, "redlock.nodes.ok"); v.AsInt64() < 2 {
		t.Errorf("redlock.nodes.ok: want at least 2 (the quorum), got %d", v.AsInt64())
	}
	if s.Status().Code != codes.Unset {
		t.Errorf("status: want Unset, got %v", s.Status())
	}
	nodes := events(s, "redlock.node")
	if len(nodes) != 3 {
		t.Fatalf("redlock.node events: want 3, got %d", len(nodes))
	}
	ok := 0
	for i, e := range nodes {
		if v, _ := eventAttr(e, "redlock.node.index"); v.AsInt64() != int64(i) {
			t.Errorf("event %d: redlock.node.index: want %d, got %d", i, i, v.AsInt64())
		}
		if v, _ := eventAttr(e, "redlock.node.address"); v.AsString() == "" {
			t.Errorf("event %d: redlock.node.address: want an address, got none", i)
		}
		if v, _ := eventAttr(e, "redlock.node.status"); v.AsString() == "ok" {
			ok++
		}
		if e.Time.Before(s.StartTime()) || e.Time.After(s.EndTime()) {
			t.Errorf("event %d: want its time within the span, got %v", i, e.Time)
		}
	}
	if ok < 2 {
		t.Errorf("nodes with status ok: want at least 2, got %d", ok)
	}

	unlocks := h.ended("redlock.unlock")
	if len(unlocks) != 1 {
		t.Fatalf("redlock.unlock spans: want 1, got %d", len(unlocks))
	}
	checkChild(t, unlocks[0], job)
	if len(events(job, "redlock.lock.released")) != 1 {
		t.Errorf("redlock.lock.released events on the caller's span: want 1, got %d", len(events(job, "redlock.lock.released")))
	}
}

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

func TestUnreachableIsAnException(t *testing.T) {
	h := newHarness(t, 3)
	for _, nd := range h.nodes[1:] {
		if err := nd.Kill(); err != nil {
			t.Fatalf("Kill: want no error, got %v", err)
		}
	}
	_, err := h.locker.TryLock(context.Background(), key(t), 10*time.Second)
	if !errors.Is(err, redlock.ErrUnreachable) {
		t.Fatalf("TryLock: want ErrUnreachable, got %v", err)
	}
	s := h.ended("redlock.lock")[0]
	if v, _ := attr(s, "redlock.reason"); v.AsString() != "unreachable" {
		t.Errorf("redlock.reason: want unreachable, got %q", v.AsString())
	}
	if s.Status().Code != codes.Error {
		t.Errorf("status: want Error, got %v", s.Status())
	}
	if n := len(events(s, "exception")); n != 1 {
		t.Errorf("exception events: want 1, got %d", n)
	}
	failed := 0
	for _, e := range events(s, "redlock.node") {
		if v, _ := eventAttr(e, "redlock.node.status"); v.AsString() == "failed" {
			failed++
			if v, _ := eventAttr(e, "redlock.node.error"); v.AsString() == "" {
				t.Errorf("a failed node's event: want redlock.node.error, got none")
			}
		}
	}
	if failed != 2 {
		t.Errorf("failed nodes in the span: want 2, got %d", failed)
	}
	if got := sum(t, h.metrics(t), "redlock.node.errors", opLock); got != 2 {
		t.Errorf("redlock.node.errors{op=lock}: want 2, got %d", got)
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

// TestFailedFenceUndoesHeld feeds events by hand: a fenced acquire whose
// second round fails is undone by the library without a LockEvent.
func TestFailedFenceUndoesHeld(t *testing.T) {
	h := newObserver(t)
	ctx := context.Background()
	start := time.Now()
	h.obs.Observe(redlock.Event{Kind: "round", Ctx: ctx, Op: "lock", Keys: []string{"k"}, Reason: "won", Start: start, Duration: time.Millisecond})
	fail := errors.New("fence: unreachable")
	h.obs.Observe(redlock.Event{Kind: "round", Ctx: ctx, Op: "fence", Keys: []string{"k"}, Reason: "unreachable", Start: start.Add(time.Millisecond), Duration: time.Millisecond, Err: fail})
	if got := sum(t, h.metrics(t), "redlock.locks.held"); got != 0 {
		t.Errorf("redlock.locks.held: want 0, got %d", got)
	}
	fences := h.ended("redlock.fence")
	if len(fences) != 1 {
		t.Fatalf("redlock.fence spans: want 1, got %d", len(fences))
	}
	if n := len(events(fences[0], "exception")); n != 1 {
		t.Errorf("exception events of an unreachable round: want 1, got %d", n)
	}
	if got := fences[0].EndTime().Sub(fences[0].StartTime()); got != time.Millisecond {
		t.Errorf("fence span length: want 1ms, got %v", got)
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
