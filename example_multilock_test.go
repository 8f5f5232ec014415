package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed543a70bd/redlock"
)

func ExampleMultiLock() {
	clients, stop := startNodes(3)
	defer stop()

	// Every node must grant the lock: it survives data loss on up to two
	// of the three nodes, but not the loss of any one node's availability.
	locker, err := redlock.NewMultiLock(clients)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()

	lock, err := locker.TryLock(ctx, "ledger:close", 10*time.Second)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	fmt.Println("held on all", locker.Nodes(), "nodes")
	_ = lock.Unlock(ctx)

	// With one node gone no lock can be won, whatever the others say.
	_ = clients[2].Close()
	_, err = locker.TryLock(ctx, "ledger:close", 10*time.Second)
	var qe *redlock.QuorumError
	if errors.Is(err, redlock.ErrUnreachable) && errors.As(err, &qe) {
		for _, n := range qe.Failed() {
			fmt.Println("node", n.Node, n.Status)
		}
	}
	// Output:
	// held on all 3 nodes
	// node 2 failed
}

func ExampleClient_TryLockKeys() {
	clients, stop := startNodes(3)
	defer stop()
	locker, _ := redlock.New(clients)
	ctx := context.Background()

	// A transfer locks both accounts, or neither. With a Redis Cluster
	// node the keys must share a hash slot: "{bank}:account:1" and
	// "{bank}:account:2" do, through their common hash tag "bank".
	lock, err := locker.TryLockKeys(ctx, []string{"account:1", "account:2"}, 10*time.Second)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	fmt.Println("holding", lock.Key())

	// A set that overlaps a held one is refused, and takes nothing.
	_, err = locker.TryLockKeys(ctx, []string{"account:2", "account:3"}, 10*time.Second)
	fmt.Println("account:2 busy:", errors.Is(err, redlock.ErrContended))

	// A disjoint set is independent.
	other, err := locker.TryLockKeys(ctx, []string{"account:3", "account:4"}, 10*time.Second)
	fmt.Println("account:3 and account:4 free:", err == nil)

	_ = other.Unlock(ctx)
	_ = lock.Unlock(ctx)
	// Output:
	// holding account:1,account:2
	// account:2 busy: true
	// account:3 and account:4 free: true
}
