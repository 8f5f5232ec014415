// Package redistest starts real redis-server processes for tests.
package redistest

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// Nodes starts n throwaway redis-server nodes (no persistence) that are
// closed when the test ends. It fails the test if redis-server is missing.
func Nodes(t testing.TB, n int) []*redisnode.Node {
	t.Helper()
	return NodesWith(t, n, redisnode.Options{})
}

// NodesWith is Nodes with explicit options.
func NodesWith(t testing.TB, n int, opts redisnode.Options) []*redisnode.Node {
	t.Helper()
	if _, err := redisnode.LookPath(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	nodes, err := redisnode.StartN(n, opts)
	if err != nil {
		t.Fatalf("redistest: starting %d redis-server node(s): %v", n, err)
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			if err := nd.Close(); err != nil {
				t.Errorf("redistest: closing %s: %v", nd.Addr(), err)
			}
		}
	})
	return nodes
}

// Clients returns one client per node, closed when the test ends.
func Clients(t testing.TB, nodes []*redisnode.Node) []redis.UniversalClient {
	t.Helper()
	out := make([]redis.UniversalClient, len(nodes))
	for i, nd := range nodes {
		out[i] = Client(t, nd)
	}
	return out
}

// Client returns a client for node with short timeouts and no retries, so
// that a killed or paused node fails fast (one dial attempt, no command
// retries). It is closed when the test ends.
func Client(t testing.TB, node *redisnode.Node) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:         node.Addr(),
		Password:     node.Password(),
		DialTimeout:  250 * time.Millisecond,
		ReadTimeout:  500 * time.Millisecond,
		WriteTimeout: 500 * time.Millisecond,
		MaxRetries:   -1,
		// One dial attempt: go-redis otherwise redials 5 times, 100ms apart.
		DialerRetries: 1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
