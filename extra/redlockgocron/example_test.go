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
	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// Two replicas of a service, each with its own scheduler and Client over
// the same three nodes, schedule the same job for the same instant: one
// runs it, the other skips it.
func Example() {
	// Three local redis-server processes; real code passes clients for
	// its own independent masters.
	nodes, err := redisnode.StartN(3, redisnode.Options{})
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
