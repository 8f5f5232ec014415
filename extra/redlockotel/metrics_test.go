package redlockotel_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/seed543a70bd/redlock"
)

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

// The duration histograms advise the documented buckets, 0.5ms to 10s
// (a round takes about a network round trip), and no metric carries a
// lock's key: keys are unbounded.
func TestMetricsBucketsAndNoKeys(t *testing.T) {
	h := newObserver(t)
	ctx := context.Background()
	keys := []string{"secret-key"}
	h.obs.Observe(redlock.Event{Kind: "node", Ctx: ctx, Op: "lock", Keys: keys, Node: 0, Status: "failed", Err: errors.New("x"), Latency: time.Millisecond})
	h.obs.Observe(redlock.Event{Kind: "round", Ctx: ctx, Op: "lock", Keys: keys, Reason: "won", Start: time.Now(), Duration: time.Millisecond})
	h.obs.Observe(redlock.Event{Kind: "lock", Ctx: ctx, Keys: keys, Held: time.Second})

	want := []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	ms := h.metrics(t)
	for _, name := range []string{"redlock.round.duration", "redlock.node.request.duration", "redlock.lock.hold.duration"} {
		hs, ok := ms[name].(metricdata.Histogram[float64])
		if !ok || len(hs.DataPoints) == 0 {
			t.Errorf("%s: want a float64 histogram with data, got %T", name, ms[name])
			continue
		}
		for _, dp := range hs.DataPoints {
			if !slices.Equal(dp.Bounds, want) {
				t.Errorf("%s: want the bounds %v, got %v", name, want, dp.Bounds)
			}
		}
	}
	for name, agg := range ms {
		var sets []attribute.Set
		switch a := agg.(type) {
		case metricdata.Histogram[float64]:
			for _, dp := range a.DataPoints {
				sets = append(sets, dp.Attributes)
			}
		case metricdata.Sum[int64]:
			for _, dp := range a.DataPoints {
				sets = append(sets, dp.Attributes)
			}
		default:
			t.Errorf("%s: want a float64 histogram or an int64 sum, got %T", name, agg)
		}
		for _, set := range sets {
			for _, kv := range set.ToSlice() {
				if kv.Key == "redlock.keys" || strings.Contains(kv.Value.String(), "secret-key") {
					t.Errorf("%s: want no key among the attributes, got %v", name, kv)
				}
			}
		}
	}
}
