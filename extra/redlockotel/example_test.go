package redlockotel_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockotel"
	"github.com/seed543a70bd/redlock/redlocktest"
)

func Example() {
	// Three local redis-server processes; real code passes clients for
	// its own independent masters.
	nodes, err := redlocktest.StartNodes(3)
	if err != nil {
		fmt.Println(err)
		return
	}
	clients := make([]redis.UniversalClient, len(nodes))
	for i, nd := range nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: nd.Addr()})
		defer nd.Close()
		defer clients[i].Close()
	}

	// In-memory providers, to print what was recorded. A program usually
	// calls redlockotel.New() and gets the global providers.
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	obs, err := redlockotel.New(redlockotel.WithTracerProvider(tp), redlockotel.WithMeterProvider(mp))
	if err != nil {
		fmt.Println(err)
		return
	}
	locker, err := redlock.New(clients, redlock.WithObserver(obs.Observe))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	ctx, job := tp.Tracer("example").Start(context.Background(), "job")
	lock, err := locker.TryLock(ctx, "report:daily", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.TryLock(ctx, "report:daily", 10*time.Second) // busy
	fmt.Println("second TryLock contended:", err != nil)
	_ = lock.Unlock(ctx)
	job.End()

	for _, s := range spans.Ended() {
		if s.Name() == "job" {
			continue
		}
		reason := ""
		for _, kv := range s.Attributes() {
			if kv.Key == "redlock.reason" {
				reason = kv.Value.AsString()
			}
		}
		fmt.Printf("%s (%s), child of job: %v\n", s.Name(), reason, s.Parent().SpanID() == job.SpanContext().SpanID())
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == "redlock.locks.held" {
			fmt.Println("redlock.locks.held:", m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
		}
	}
	// Output:
	// second TryLock contended: true
	// redlock.lock (won), child of job: true
	// redlock.lock (contended), child of job: true
	// redlock.unlock (won), child of job: true
	// redlock.locks.held: 0
}
