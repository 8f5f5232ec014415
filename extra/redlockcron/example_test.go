package redlockcron_test

import (
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockcron"
	"github.com/seed543a70bd/redlock/redlocktest"
)

// Two instances of a service, each with its own Cron and Client over the
// same three nodes, run the same every-second job for three seconds: each
// tick runs once, not twice.
func Example() {
	// Three local redis-server processes; real code passes clients for
	// its own independent masters.
	nodes, err := redlocktest.StartNodes(3)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, nd := range nodes {
		defer nd.Close()
	}

	var mu sync.Mutex
	runs := make(map[int64]int) // per tick, by the second in which it started
	report := cron.FuncJob(func() {
		mu.Lock()
		defer mu.Unlock()
		runs[time.Now().Unix()]++
	})
	var crons []*cron.Cron
	for range 2 { // each instance
		clients := make([]redis.UniversalClient, len(nodes))
		for i, nd := range nodes {
			clients[i] = redis.NewClient(&redis.Options{Addr: nd.Addr()})
			defer clients[i].Close()
		}
		client, err := redlock.New(clients)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer client.Close()

		c := cron.New(cron.WithSeconds())
		// A 30s lease, auto-extended while the job runs; the job's own key.
		_, err = c.AddJob("* * * * * *", cron.NewChain(
			cron.Recover(cron.DefaultLogger),
			redlockcron.SkipIfLocked(client, "report:every-second", 30*time.Second),
		).Then(report))
		if err != nil {
			fmt.Println(err)
			return
		}
		crons = append(crons, c)
	}
	// Start on a tick's half second, stop three ticks later.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1500 * time.Millisecond)))
	for _, c := range crons {
		c.Start()
	}
	time.Sleep(3 * time.Second)
	for _, c := range crons {
		<-c.Stop().Done()
	}
	once := true
	for _, n := range runs {
		once = once && n == 1
	}
	fmt.Println("each tick ran once:", once)
	// Output: each tick ran once: true
}
