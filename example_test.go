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

// nodeURLs are the examples' Redis masters, one URL each, as a program
// would list its own ("redis://redis1:6379", ...). TestMain fills it
// with local redis-server processes (startExampleNodes).
var nodeURLs []string

// startExampleNodes starts three local redis-server processes for the
// examples and returns their URLs, and a func that stops them.
func startExampleNodes() ([]string, func(), error) {
	nodes, err := redisnode.StartN(3, redisnode.Options{})
	if err != nil {
		return nil, nil, err
	}
	urls := make([]string, len(nodes))
	for i, nd := range nodes {
		urls[i] = "redis://" + nd.Addr()
	}
	return urls, func() {
		for _, nd := range nodes {
			_ = nd.Close()
		}
	}, nil
}

// startNodes starts n local redis-server processes and returns a client
// for each, for examples that need nodes of their own.
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

// The whole life of a lock: Dial the nodes, wait for the lock, tell why
// it was not had, release it, and Close before the process exits.
func Example() {
	locker, err := redlock.Dial(nodeURLs) // "redis://redis1:6379", ...
	if err != nil {
		fmt.Println(err) // bad input: errors.Is(err, redlock.ErrInvalid)
		return
	}
	// Close waits for releases still in flight and closes the
	// connections Dial opened.
	defer locker.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // how long to wait
	defer cancel()
	lock, err := locker.Lock(ctx, "report:daily", 30*time.Second)
	if err != nil { // matches redlock.ErrNotObtained
		switch {
		case errors.Is(err, redlock.ErrContended): // someone else holds it
			fmt.Println("busy:", err)
		case errors.Is(err, redlock.ErrUnreachable): // too few nodes answered
			fmt.Println("outage:", err)
		case errors.Is(err, context.DeadlineExceeded): // waited too long
			fmt.Println("gave up:", err)
		}
		return
	}
	defer func() {
		// Unlock fails when the nodes cannot confirm the release; the
		// keys then expire with their TTL.
		if err := lock.Unlock(context.WithoutCancel(ctx)); err != nil {
			fmt.Println("unlock:", err)
		}
	}()

	// Act only while the lock is provably held.
	if lock.Validity() > 0 {
		fmt.Println("holding", lock.Key())
	}
	// Output: holding report:daily
}

// Do holds the lock while fn runs: it waits for the lock, extends it in
// the background, cancels fn's ctx if it is lost, and releases it when
// fn returns.
func ExampleClient_Do() {
	locker, err := redlock.Dial(nodeURLs)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // how long to wait
	defer cancel()
	err = locker.Do(ctx, "report:weekly", 30*time.Second, func(ctx context.Context) error {
		fmt.Println("building the report")
		return ctx.Err() // ctx ends if the lock is lost: stop then
	})
	switch {
	case errors.Is(err, redlock.ErrNotObtained):
		fmt.Println("not obtained:", err)
	case errors.Is(err, redlock.ErrLockLost):
		fmt.Println("lost the lock while working:", err)
	case err != nil:
		fmt.Println("the work failed:", err)
	}
	// Output: building the report
}

// A wait that ctx ends still says why the lock was not had: here, held
// by another owner.
func ExampleClient_Lock() {
	locker, err := redlock.Dial(nodeURLs)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	ctx := context.Background()

	first, err := locker.TryLock(ctx, "job:41", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	wait, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = locker.Lock(wait, "job:41", 10*time.Second)
	fmt.Println("waited too long:", errors.Is(err, context.DeadlineExceeded))
	fmt.Println("held by another owner:", errors.Is(err, redlock.ErrContended))

	if err := first.Unlock(ctx); err != nil {
		fmt.Println("unlock:", err)
	}
	// Output:
	// waited too long: true
	// held by another owner: true
}

func ExampleClient_TryLock() {
	locker, err := redlock.Dial(nodeURLs)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	ctx := context.Background()

	first, err := locker.TryLock(ctx, "job:42", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.TryLock(ctx, "job:42", 10*time.Second)
	switch {
	case errors.Is(err, redlock.ErrContended):
		fmt.Println("busy: another holder has it")
	case errors.Is(err, redlock.ErrUnreachable):
		fmt.Println("outage: too few nodes answered")
	}
	if err := first.Unlock(ctx); err != nil {
		fmt.Println("unlock:", err)
	}
	// Output: busy: another holder has it
}

func ExampleQuorumError() {
	// Clients of its own, for New: this example closes two of them.
	clients, err := redlock.NewClients(nodeURLs...)
	if err != nil {
		fmt.Println(err)
		return
	}
	locker, err := redlock.New(clients)
	if err != nil {
		fmt.Println(err)
		return
	}
	// New's Client leaves its go-redis clients to the caller: close
	// them after it.
	defer func() {
		_ = locker.Close()
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	// Two nodes are gone: a quorum of 2 of 3 is impossible.
	_ = clients[1].Close()
	_ = clients[2].Close()

	_, err = locker.TryLock(context.Background(), "job:43", 10*time.Second)
	var qe *redlock.QuorumError
	if errors.As(err, &qe) {
		fmt.Println("unreachable:", errors.Is(err, redlock.ErrUnreachable))
		for _, n := range qe.Failed() {
			fmt.Println("node", n.Node+1, n.Status, n.Err)
		}
	}
	// Output:
	// unreachable: true
	// node 2 failed redis: client is closed
	// node 3 failed redis: client is closed
}

func ExampleLock_Extend() {
	locker, err := redlock.Dial(nodeURLs)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	ctx := context.Background()

	lock, err := locker.TryLock(ctx, "batch", 5*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := lock.Unlock(ctx); err != nil {
			fmt.Println("unlock:", err)
		}
	}()
	// Before the validity runs out, push the expiry further.
	if err := lock.Extend(ctx, 30*time.Second); errors.Is(err, redlock.ErrNotHeld) {
		fmt.Println("lost the lock: stop working")
		return
	}
	fmt.Println(lock.Validity() > 5*time.Second)
	// Output: true
}

func ExampleWithObserver() {
	// Stats counts; a real program adapts Observer to its metrics library
	// (see docs/observability.md for the metric names).
	stats := &redlock.Stats{}
	locker, err := redlock.Dial(nodeURLs, redlock.WithObserver(stats))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	ctx := context.Background()

	lock, err := locker.TryLock(ctx, "invoice:7", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.TryLock(ctx, "invoice:7", 10*time.Second)
	fmt.Println("second attempt contended:", errors.Is(err, redlock.ErrContended))
	if err := lock.Extend(ctx, 10*time.Second); err != nil {
		fmt.Println("extend:", err)
	}
	if err := lock.Unlock(ctx); err != nil {
		fmt.Println("unlock:", err)
	}

	s := stats.Snapshot()
	fmt.Printf("attempts %d, won %d, contended %d\n", s.Attempts, s.Won, s.Contended)
	fmt.Printf("extensions %d, released %d, lost %d\n", s.Extensions, s.Released, s.Lost)
	// Output:
	// second attempt contended: true
	// attempts 2, won 1, contended 1
	// extensions 1, released 1, lost 0
}
