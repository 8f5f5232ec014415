package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// A resource kept in Redis, written only with the writer's fencing token:
// a holder that paused past its lease, and whose lock was taken by a later
// holder meanwhile, is refused by the resource itself.
func ExampleFencedSet() {
	clients, stop := startNodes(3)
	defer stop()
	store, err := redisnode.Start(redisnode.Options{}) // where the resource lives
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	db := redis.NewClient(&redis.Options{Addr: store.Addr()})
	defer db.Close()

	locker, err := redlock.New(clients, redlock.WithFencing())
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()

	first, err := locker.TryLock(ctx, "report:daily", 100*time.Millisecond)
	if err != nil {
		fmt.Println(err)
		return
	}
	// first pauses (GC, page fault, slow network) past its validity...
	for first.Validity() > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	// ...and a second holder takes the lock once the keys expire.
	second, err := locker.Lock(ctx, "report:daily", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Unlock(ctx)
	fmt.Println("second's token is larger:", second.Fence() > first.Fence())

	err = redlock.FencedSet(ctx, db, "report:daily:data", second.Fence(), "written by second")
	fmt.Println("second writes:", err)

	// first wakes up and writes with its old token: refused.
	err = redlock.FencedSet(ctx, db, "report:daily:data", first.Fence(), "written by first")
	fmt.Println("first is refused:", errors.Is(err, redlock.ErrStaleFence))

	v, _ := db.HGet(ctx, "report:daily:data", "value").Result()
	fmt.Println("value:", v)
	// Output:
	// second's token is larger: true
	// second writes: <nil>
	// first is refused: true
	// value: written by second
}
