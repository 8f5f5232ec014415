package redlockgocron_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/redlocktest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		// A release deferred by a minimum hold fires up to that long after
		// its test; VerifyNoLeaks waits for it.
		code = verifyNoLeaks(5 * time.Second)
	}
	os.Exit(code)
}

var keySeq atomic.Int64

// key returns a key unique to the test.
func key(t *testing.T) string {
	return fmt.Sprintf("%s:%d", t.Name(), keySeq.Add(1))
}

// newClient returns a redlock Client of its own over nodes, as a replica
// of a service would have, closed when the test ends.
func newClient(t *testing.T, nodes []*redlocktest.Node, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := redlock.New(clients(t, nodes), opts...)
	if err != nil {
		t.Fatalf("redlock.New: want no error, got %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// eventually polls cond every 10ms until it holds or d has passed.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// free reports whether another owner can take k now; it releases what it took.
func free(t *testing.T, c *redlock.Client, k string) bool {
	t.Helper()
	l, err := c.TryLock(context.Background(), k, time.Second)
	if err != nil {
		if !errors.Is(err, redlock.ErrNotObtained) {
			t.Fatalf("TryLock: want nil or ErrNotObtained, got %v", err)
		}
		return false
	}
	_ = l.Unlock(context.Background())
	return true
}

// delEverywhere deletes k on every node, as a node that lost its data would.
func delEverywhere(t *testing.T, nodes []*redlocktest.Node, k string) {
	t.Helper()
	for _, n := range nodes {
		if err := client(t, n).Del(context.Background(), k).Err(); err != nil {
			t.Fatalf("DEL on %s: want no error, got %v", n.Addr(), err)
		}
	}
}

// clients returns one go-redis client per node, with the library's
// settings for lock nodes (redlock.NewClients), closed when t ends.
func clients(t testing.TB, nodes []*redlocktest.Node) []redis.UniversalClient {
	t.Helper()
	cs, err := redlock.NewClients(redlocktest.URLs(nodes)...)
	if err != nil {
		t.Fatalf("redlock.NewClients: want no error, got %v", err)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			_ = c.Close()
		}
	})
	return cs
}

// client returns a go-redis client of node, closed when t ends.
func client(t testing.TB, node *redlocktest.Node) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: node.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// verifyNoLeaks checks, after the tests, that no goroutine outlived them,
// retrying for up to wait: a go-redis pool's redial of a killed node, or
// a release retry, ends a little after its test. It returns the exit
// code for TestMain: 0, or 1 after printing the goroutines left.
func verifyNoLeaks(wait time.Duration) int {
	deadline := time.Now().Add(wait)
	for {
		err := goleak.Find()
		if err == nil {
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "goleak: goroutines outlived the tests by %v: %v\n", wait, err)
			return 1
		}
		time.Sleep(100 * time.Millisecond) // polling: goroutines ending is not an event to await
	}
}
