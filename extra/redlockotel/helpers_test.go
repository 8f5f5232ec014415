package redlockotel_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockotel"
	"github.com/seed543a70bd/redlock/redlocktest"
)

// Metric attributes that the tests look for.
var (
	opLock   = attribute.String("redlock.op", "lock")
	opUnlock = attribute.String("redlock.op", "unlock")
	won      = attribute.String("redlock.reason", "won")
	busy     = attribute.String("redlock.reason", "contended")
)

// harness is a Client over real nodes whose Observer records into an
// in-memory span recorder and a manual metric reader.
type harness struct {
	locker *redlock.Client
	obs    *redlockotel.Observer
	spans  *tracetest.SpanRecorder
	tracer trace.Tracer // for the callers' parent spans
	reader *sdkmetric.ManualReader
	nodes  []*redlocktest.Node
}

func newHarness(t *testing.T, n int, opts ...redlock.Option) *harness {
	t.Helper()
	h := newObserver(t)
	nodes := redlocktest.Start(t, n)
	locker, err := redlock.New(clients(t, nodes), append([]redlock.Option{redlock.WithObserver(h.obs.Observe)}, opts...)...)
	if err != nil {
		t.Fatalf("redlock.New: want no error, got %v", err)
	}
	t.Cleanup(func() { _ = locker.Close() })
	h.locker = locker
	h.nodes = nodes
	return h
}

// newObserver is a harness without nodes, for events made by hand.
func newObserver(t *testing.T) *harness {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	obs, err := redlockotel.New(redlockotel.WithTracerProvider(tp), redlockotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatalf("redlockotel.New: want no error, got %v", err)
	}
	return &harness{obs: obs, spans: sr, tracer: tp.Tracer("test"), reader: reader}
}

var keySeq atomic.Int64

// key returns a key unique to the test.
func key(t *testing.T) string {
	return fmt.Sprintf("%s:%d", t.Name(), keySeq.Add(1))
}

// ended returns the ended spans named name.
func (h *harness) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// metrics collects the reader's metrics, by name.
func (h *harness) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: want no error, got %v", err)
	}
	out := make(map[string]metricdata.Aggregation)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// has reports whether set holds every kv.
func has(set attribute.Set, kvs []attribute.KeyValue) bool {
	for _, kv := range kvs {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// sum adds up the data points of an int64 sum that carry kvs; 0 when
// the metric has none.
func sum(t *testing.T, ms map[string]metricdata.Aggregation, name string, kvs ...attribute.KeyValue) int64 {
	t.Helper()
	agg, ok := ms[name]
	if !ok {
		return 0
	}
	s, ok := agg.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s: want an int64 sum, got %T", name, agg)
	}
	var n int64
	for _, dp := range s.DataPoints {
		if has(dp.Attributes, kvs) {
			n += dp.Value
		}
	}
	return n
}

// count adds up the counts of a float64 histogram's data points that
// carry kvs; 0 when the metric has none.
func count(t *testing.T, ms map[string]metricdata.Aggregation, name string, kvs ...attribute.KeyValue) uint64 {
	t.Helper()
	agg, ok := ms[name]
	if !ok {
		return 0
	}
	hs, ok := agg.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s: want a float64 histogram, got %T", name, agg)
	}
	var n uint64
	for _, dp := range hs.DataPoints {
		if has(dp.Attributes, kvs) {
			n += dp.Count
		}
	}
	return n
}

// attr returns a span's attribute k, and whether it has it.
func attr(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// events returns a span's events named name.
func events(s sdktrace.ReadOnlySpan, name string) []sdktrace.Event {
	var out []sdktrace.Event
	for _, e := range s.Events() {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// eventAttr returns an event's attribute k.
func eventAttr(e sdktrace.Event, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range e.Attributes {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// clients returns one go-redis client per node, with the library's
// settings for lock nodes (redlock.NewClients), closed when t ends.
func clients(t testing.TB, nodes []*redlocktest.Node) []redis.UniversalClient {
	t.Helper()
	cs, err := redlock.NewClients(redlocktest.URLs(nodes)...)
	if err != nil {
		t.Fatalf("redlock.NewClients: want no error, got %v", err)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			_ = c.Close()
		}
	})
	return cs
}
