package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed543a70bd/redlock"
)

func ExampleClient_TryLockPath() {
	clients, stop := startNodes(3)
	defer stop()
	locker, _ := redlock.New(clients)
	ctx := context.Background()

	// A folder lock covers the folder, everything below it and, while it
	// is held, keeps every folder above it from being locked.
	held, err := locker.TryLockPath(ctx, "proj/A/C", 10*time.Second)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	fmt.Println("holding", held.Key())

	for _, path := range []string{"proj/A/C/D", "proj/A", "proj/A/B", "proj/A/CD"} {
		l, err := locker.TryLockPath(ctx, path, 10*time.Second)
		switch {
		case errors.Is(err, redlock.ErrContended):
			fmt.Println(path, "refused")
		case err != nil:
			fmt.Println(path, "error:", err)
		default:
			fmt.Println(path, "free")
			_ = l.Unlock(ctx)
		}
	}
	_ = held.Unlock(ctx)
	// Output:
	// holding proj/A/C
	// proj/A/C/D refused
	// proj/A refused
	// proj/A/B free
	// proj/A/CD free
}

func ExampleClient_TryRLock() {
	clients, stop := startNodes(3)
	defer stop()
	locker, _ := redlock.New(clients)
	ctx := context.Background()

	// Readers share the key; the writer is an ordinary TryLock on it.
	r1, _ := locker.TryRLock(ctx, "doc:7", 10*time.Second)
	r2, err := locker.TryRLock(ctx, "doc:7", 10*time.Second)
	fmt.Println("second reader in:", err == nil)

	_, err = locker.TryLock(ctx, "doc:7", 10*time.Second)
	fmt.Println("writer refused while reading:", errors.Is(err, redlock.ErrContended))

	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)
	w, err := locker.TryLock(ctx, "doc:7", 10*time.Second)
	fmt.Println("writer in once the readers left:", err == nil)

	_, err = locker.TryRLock(ctx, "doc:7", 10*time.Second)
	fmt.Println("reader refused while writing:", errors.Is(err, redlock.ErrContended))
	_ = w.Unlock(ctx)
	// Output:
	// second reader in: true
	// writer refused while reading: true
	// writer in once the readers left: true
	// reader refused while writing: true
}

func ExampleClient_TryAcquire() {
	clients, stop := startNodes(3)
	defer stop()
	locker, _ := redlock.New(clients)
	ctx := context.Background()

	// At most 2 exports at once. Every user of the key passes the same
	// limit. With limit 2 a permit needs SemaphoreQuorum(3, 2) = 3 nodes.
	const limit = 2
	fmt.Println("nodes needed:", redlock.SemaphoreQuorum(locker.Nodes(), limit))
	p1, _ := locker.TryAcquire(ctx, "exports", limit, 10*time.Second)
	p2, err := locker.TryAcquire(ctx, "exports", limit, 10*time.Second)
	fmt.Println("second permit:", err == nil)

	_, err = locker.TryAcquire(ctx, "exports", limit, 10*time.Second)
	fmt.Println("third permit refused:", errors.Is(err, redlock.ErrContended))

	// A returned permit can be taken again.
	_ = p1.Unlock(ctx)
	p3, err := locker.TryAcquire(ctx, "exports", limit, 10*time.Second)
	fmt.Println("permit after a return:", err == nil)
	_ = p2.Unlock(ctx)
	_ = p3.Unlock(ctx)
	// Output:
	// nodes needed: 3
	// second permit: true
	// third permit refused: true
	// permit after a return: true
}

func ExampleSemaphoreQuorum() {
	// How many of 5 nodes must grant a permit, and how many may then be
	// down, for each limit. Limit 1 is the ordinary majority.
	const nodes = 5
	for limit := 1; limit <= 5; limit++ {
		q := redlock.SemaphoreQuorum(nodes, limit)
		fmt.Printf("limit %d: %d of %d nodes, %d may fail\n", limit, q, nodes, nodes-q)
	}
	// Output:
	// limit 1: 3 of 5 nodes, 2 may fail
	// limit 2: 4 of 5 nodes, 1 may fail
	// limit 3: 4 of 5 nodes, 1 may fail
	// limit 4: 5 of 5 nodes, 0 may fail
	// limit 5: 5 of 5 nodes, 0 may fail
}
