package redlockgocron_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockgocron"
	"github.com/seed543a70bd/redlock/redlocktest"
)

// Two replicas of a service, each with its own scheduler and Client over
// the same three nodes, schedule the same job for the same instant: one
// runs it, the other skips it.
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

	at := time.Now().Add(time.Second)
	var ran, skipped atomic.Int64
	done := make(chan struct{}, 2)
	for range 2 { // each replica
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

		// A 30s lease, auto-extended while the job runs. The minimum hold
		// is longer than the default here, so that a loaded test machine
		// that fires one replica's timer late does not make it run the
		// job again.
		locker, err := redlockgocron.New(client, 30*time.Second, redlockgocron.WithMinHold(2*time.Second))
		if err != nil {
			fmt.Println(err)
			return
		}
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
		if err != nil {
			fmt.Println(err)
			return
		}
		defer s.Shutdown()
		_, err = s.NewJob(
			gocron.OneTimeJob(gocron.OneTimeJobStartDateTime(at)),
			gocron.NewTask(locker.Job(func(ctx context.Context) error {
				// ctx is cancelled if the lock is lost: stop then.
				ran.Add(1)
				return nil
			})),
			gocron.WithName("report:daily"),
			gocron.WithEventListeners(
				gocron.AfterJobRuns(func(uuid.UUID, string) { done <- struct{}{} }),
				gocron.AfterLockError(func(uuid.UUID, string, error) { skipped.Add(1); done <- struct{}{} }),
			),
		)
		if err != nil {
			fmt.Println(err)
			return
		}
		s.Start()
	}
	<-done
	<-done
	fmt.Println("ran:", ran.Load(), "skipped:", skipped.Load())
	// Output: ran: 1 skipped: 1
}

// Two replicas, each with its own scheduler, Client and Elector over the
// same three nodes: the leader's scheduler runs the job, the other's
// skips it; when the leader closes its Elector (it resigns), the other is
// elected at once and runs the job from then on.
func ExampleElector() {
	nodes, err := redlocktest.StartNodes(3)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, nd := range nodes {
		defer nd.Close()
	}

	runs := make(chan string, 64)
	hosts := []string{"host-a", "host-b"}
	electors := make(map[string]*redlockgocron.Elector)
	schedulers := make(map[string]gocron.Scheduler)
	for _, host := range hosts { // each replica
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

		elector, err := redlockgocron.NewElector(client, "reports", host, 10*time.Second)
		if err != nil {
			fmt.Println(err)
			return
		}
		if err := elector.Start(context.Background()); err != nil {
			fmt.Println(err)
			return
		}
		defer elector.Close() // resign, so that another replica takes over at once
		s, err := gocron.NewScheduler(gocron.WithDistributedElector(elector))
		if err != nil {
			fmt.Println(err)
			return
		}
		defer s.Shutdown()
		_, err = s.NewJob(gocron.DurationJob(100*time.Millisecond),
			gocron.NewTask(func() {
				// A job that writes gives elector.Term() to the resource
				// as its fencing token.
				select {
				case runs <- host:
				default:
				}
			}),
			gocron.WithName("report"))
		if err != nil {
			fmt.Println(err)
			return
		}
		s.Start()
		electors[host], schedulers[host] = elector, s
	}

	leader := <-runs
	fmt.Println("the leader runs the job")
	if err := electors[leader].Close(); err != nil {
		fmt.Println(err)
		return
	}
	_ = schedulers[leader].Shutdown()
	for host := range runs {
		if host != leader {
			break
		}
	}
	fmt.Println("after it resigned, the other replica runs it")
	// Output:
	// the leader runs the job
	// after it resigned, the other replica runs it
}
