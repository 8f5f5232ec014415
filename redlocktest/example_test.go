package redlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/redlocktest"
)

// A test of code that takes a lock starts its own nodes: here, what a
// caller sees while one of three nodes is down, and then two.
func Example() {
	// In a test, redlocktest.Start(t, 3) starts them and closes them
	// when the test ends.
	nodes, err := redlocktest.StartNodes(3)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		for _, nd := range nodes {
			_ = nd.Close()
		}
	}()
	locker, err := redlock.Dial(redlocktest.URLs(nodes))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	ctx := context.Background()

	_ = nodes[0].Kill()
	lock, err := locker.TryLock(ctx, "report", 10*time.Second)
	fmt.Println("1 of 3 down:", err)
	_ = lock.Unlock(ctx)

	_ = nodes[1].Kill()
	_, err = locker.TryLock(ctx, "report", 10*time.Second)
	fmt.Println("2 of 3 down, not obtained:", errors.Is(err, redlock.ErrNotObtained))
	// Output:
	// 1 of 3 down: <nil>
	// 2 of 3 down, not obtained: true
}

// uses stands for the code under test, which takes a lock.
func uses(ctx context.Context, locker *redlock.Client) error {
	return locker.Do(ctx, "nightly", 30*time.Second, func(context.Context) error { return nil })
}

func ExampleStart() {
	// In a test file:
	_ = func(t *testing.T) {
		nodes := redlocktest.Start(t, 3)
		locker, err := redlock.Dial(redlocktest.URLs(nodes))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = locker.Close() })
		if err := uses(context.Background(), locker); err != nil {
			t.Fatal(err)
		}
	}
}
