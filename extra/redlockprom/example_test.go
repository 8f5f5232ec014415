package redlockprom_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockprom"
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

	metrics := redlockprom.New()
	reg := prometheus.NewRegistry() // or prometheus.MustRegister(metrics)
	reg.MustRegister(metrics)
	locker, err := redlock.New(clients, redlock.WithObserver(metrics.Observe))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	ctx := context.Background()
	lock, err := locker.TryLock(ctx, "report:daily", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = locker.TryLock(ctx, "report:daily", 10*time.Second) // contended
	_ = lock.Unlock(ctx)

	// What a scrape of reg shows (counters and gauges only: durations vary).
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var v float64
			switch {
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			default:
				continue
			}
			labels := ""
			for _, lp := range m.GetLabel() {
				labels += fmt.Sprintf("{%s=%q}", lp.GetName(), lp.GetValue())
			}
			if v != 0 {
				fmt.Printf("%s%s %v\n", mf.GetName(), labels, v)
			}
		}
	}
	// Output:
	// redlock_acquire_attempts_total{reason="contended"} 1
	// redlock_acquire_attempts_total{reason="won"} 1
	// redlock_locks_released_total 1
}
