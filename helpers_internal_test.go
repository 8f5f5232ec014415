package redlock

// The in-package tests' helpers: go-redis clients of test nodes, Clients
// on them, and the checks that a test left nothing
// behind (keys, Watch goroutines, borrowed connections, held slots).

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/stretchr/testify/require"
)

// poll calls cond every interval until it holds (true) or wait passes
// (false).
func poll(wait, interval time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(wait); !cond(); time.Sleep(interval) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// eventually polls cond every 5ms until it holds or wait passes.
func eventually(t *testing.T, wait time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	if !poll(wait, 5*time.Millisecond, cond) {
		t.Fatalf("after %v: "+format, append([]any{wait}, args...)...)
	}
}

// nodeClient is a go-redis client of nd with the test defaults (no
// retries, short timeouts) changed by mod, closed when the test ends.
func nodeClient(t *testing.T, nd *redisnode.Node, mod func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: nd.Addr(), Password: nd.Password(), MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond}
	if mod != nil {
		mod(o)
	}
	cl := redis.NewClient(o)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func nodeClients(t *testing.T, nodes []*redisnode.Node, mod func(*redis.Options)) []redis.UniversalClient {
	t.Helper()
	out := make([]redis.UniversalClient, len(nodes))
	for i, nd := range nodes {
		out[i] = nodeClient(t, nd, mod)
	}
	return out
}

// newTestClient is New with a per-node timeout far above a reply's time on a
// loaded machine, closed when the test ends.
func newTestClient(t *testing.T, clients []redis.UniversalClient, opts ...Option) *Client {
	t.Helper()
	c, err := New(clients, append([]Option{WithNodeTimeout(250 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// takeWatchers counts the goroutines that hold a leader's Tx open (the
// Watch of leaderConn.take).
func takeWatchers() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "node.(*leaderConn).take.func") {
			n++
		}
	}
	return n
}

// inFlight counts c's requests not yet answered: those queued on its
// nodes, the releases waiting for a retry, and the connections of
// clients (c's) out of their pools, on which a request waits for its
// reply (or a leader for its next request).
func inFlight(c *Client, clients []redis.UniversalClient) int {
	n := 0
	for _, nd := range c.nodes {
		n += nd.Queued() + nd.PendingReleases()
	}
	for _, cl := range clients {
		s := cl.(*redis.Client).PoolStats()
		n += int(s.TotalConns - s.IdleConns)
	}
	return n
}

// requireSettled waits until no leader holds a Tx and every client's pool
// has all its connections idle: none was kept out of the pool.
func requireSettled(t *testing.T, clients []redis.UniversalClient) {
	t.Helper()
	eventually(t, 5*time.Second, func() bool { return takeWatchers() == 0 }, "%d Watch goroutines left", takeWatchers())
	for i, cl := range clients {
		rc := cl.(*redis.Client)
		eventually(t, 2*time.Second, func() bool {
			s := rc.PoolStats()
			return s.TotalConns == s.IdleConns
		}, "node %d: connections out of the pool: %+v", i, rc.PoolStats())
	}
}
