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

// startNodes starts n local redis-server processes for the examples; real
// code passes clients for its own independent masters.
func startNodes(n int) ([]redis.UniversalClient, func()) {
	nodes, err := redisnode.StartN(n, redisnode.Options{})
	if err != nil {
		panic(err)
	}
	clients := make([]redis.UniversalClient, n)
	for i, nd := range nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: nd.Addr()})
	}
	return clients, func() {
		for i := range nodes {
			_ = clients[i].Close()
			_ = nodes[i].Close()
		}
	}
}

func Example() {
	clients, stop := startNodes(5)
	defer stop()

	locker, err := redlock.New(clients)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	lock, err := locker.Lock(ctx, "report:daily", 30*time.Second)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	defer lock.Unlock(ctx)

	// Act only while the lock is provably held.
	if lock.Validity() > 0 {
		fmt.Println("holding", lock.Key())
	}
	// Output: holding report:daily
}

func ExampleClient_TryLock() {
	clients, stop := startNodes(3)
	defer stop()
	locker, _ := redlock.New(clients)
	ctx := context.Background()

	first, _ := locker.TryLock(ctx, "job:42", 10*time.Second)
	_, err := locker.TryLock(ctx, "job:42", 10*time.Second)
	switch {
	case errors.Is(err, redlock.ErrContended):
		fmt.Println("busy: another holder has it")
	case errors.Is(err, redlock.ErrUnreachable):
		fmt.Println("outage: too few nodes answered")
	}
	_ = first.Unlock(ctx)
	// Output: busy: another holder has it
}

func ExampleQuorumError() {
	clients, stop := startNodes(3)
	defer stop()
	// Two nodes are gone: a quorum of 2 of 3 is impossible.
	_ = clients[1].Close()
	_ = clients[2].Close()
	locker, _ := redlock.New(clients)

	_, err := locker.TryLock(context.Background(), "job:43", 10*time.Second)
	var qe *redlock.QuorumError
	if errors.As(err, &qe) {
		fmt.Println("unreachable:", errors.Is(err, redlock.ErrUnreachable))
		for _, n := range qe.Failed() {
			fmt.Println("node", n.Node, n.Status, n.Err)
		}
	}
	// Output:
	// unreachable: true
	// node 1 failed redis: client is closed
	// node 2 failed redis: client is closed
}

func ExampleLock_Extend() {
	clients, stop := startNodes(3)
	defer stop()
	locker, _ := redlock.New(clients)
	ctx := context.Background()

	lock, err := locker.TryLock(ctx, "batch", 5*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lock.Unlock(ctx)
	// Before the validity runs out, push the expiry further.
	if err := lock.Extend(ctx, 30*time.Second); errors.Is(err, redlock.ErrNotHeld) {
		fmt.Println("lost the lock: stop working")
		return
	}
	fmt.Println(lock.Validity() > 5*time.Second)
	// Output: true
}

func ExampleWithObserver() {
	clients, stop := startNodes(3)
	defer stop()
	// Stats counts; a real program adapts Observer to its metrics library
	// (see docs/observability.md for the metric names).
	stats := &redlock.Stats{}
	locker, _ := redlock.New(clients, redlock.WithObserver(stats))
	ctx := context.Background()

	lock, _ := locker.TryLock(ctx, "invoice:7", 10*time.Second)
	_, err := locker.TryLock(ctx, "invoice:7", 10*time.Second)
	fmt.Println("second attempt contended:", errors.Is(err, redlock.ErrContended))
	_ = lock.Extend(ctx, 10*time.Second)
	_ = lock.Unlock(ctx)

	s := stats.Snapshot()
	fmt.Printf("attempts %d, won %d, contended %d\n", s.Attempts, s.Won, s.Contended)
	fmt.Printf("extensions %d, released %d, lost %d\n", s.Extensions, s.Released, s.Lost)
	// Output:
	// second attempt contended: true
	// attempts 2, won 1, contended 1
	// extensions 1, released 1, lost 0
}
