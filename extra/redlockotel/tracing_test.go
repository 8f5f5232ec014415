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

// A round's span by its reason: status Error with the round's error for
// every reason but won, with error.type; an exception event only for
// failures of the infrastructure or of the lock (unreachable, expired,
// not_held), never for contention or cancellation. A node's event is
// stamped at its reply, or at the decision while it is still pending.
func TestRoundSpanByReason(t *testing.T) {
	for _, tc := range []struct {
		reason    string
		exception bool
	}{
		{"won", false},
		{"contended", false},
		{"cancelled", false},
		{"unreachable", true},
		{"expired", true},
		{"not_held", true},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			h := newObserver(t)
			start := time.Now()
			const dur = 10 * time.Millisecond
			var err error
			if tc.reason != "won" {
				err = errors.New("extend: " + tc.reason)
			}
			h.obs.Observe(redlock.Event{Kind: "round", Ctx: context.Background(), Op: "extend", Keys: []string{"k"},
				Reason: tc.reason, Err: err, Start: start, Duration: dur,
				Nodes: []redlock.NodeResult{
					{Node: 0, Addr: "a:1", Status: "ok", Latency: 2 * time.Millisecond},
					{Node: 1, Addr: "b:1", Status: "pending"},
				}})
			spans := h.ended("redlock.extend")
			if len(spans) != 1 {
				t.Fatalf("redlock.extend spans: want 1, got %d", len(spans))
			}
			s := spans[0]
			if !s.StartTime().Equal(start) || !s.EndTime().Equal(start.Add(dur)) {
				t.Errorf("span: want [%v, %v], got [%v, %v]", start, start.Add(dur), s.StartTime(), s.EndTime())
			}
			et, hasType := attr(s, "error.type")
			if tc.reason == "won" {
				if s.Status().Code != codes.Unset || hasType {
					t.Errorf("won: want status Unset and no error.type, got %v, %q", s.Status(), et.AsString())
				}
			} else if s.Status().Code != codes.Error || s.Status().Description != err.Error() || et.AsString() != tc.reason {
				t.Errorf("want status Error %q and error.type %s, got %v, %q", err, tc.reason, s.Status(), et.AsString())
			}
			if n, want := len(events(s, "exception")), map[bool]int{false: 0, true: 1}[tc.exception]; n != want {
				t.Errorf("exception events: want %d, got %d", want, n)
			}
			nodes := events(s, "redlock.node")
			if len(nodes) != 2 {
				t.Fatalf("redlock.node events: want 2, got %d", len(nodes))
			}
			if want := start.Add(2 * time.Millisecond); !nodes[0].Time.Equal(want) {
				t.Errorf("a node that replied: want its event at its reply, %v, got %v", want, nodes[0].Time)
			}
			if want := start.Add(dur); !nodes[1].Time.Equal(want) {
				t.Errorf("a pending node: want its event at the decision, %v, got %v", want, nodes[1].Time)
			}
			for st, want := range map[string]int64{"redlock.nodes.ok": 1, "redlock.nodes.pending": 1, "redlock.nodes.taken": 0} {
				if v, _ := attr(s, attribute.Key(st)); v.AsInt64() != want {
					t.Errorf("%s: want %d, got %d", st, want, v.AsInt64())
				}
			}
		})
	}
}
