// Package redistest starts real redis-server processes for tests.
package redistest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

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

// Replica starts a replica of master (--replicaof, plus args), closed
// when the test ends, and returns it once a write on master is
// acknowledged by it (WAIT 1): after a diskless sync, master starts
// streaming writes to the replica only at the replica's first REPLCONF
// ACK, up to a second after both sides report the link up and the
// replica online, and until then WAIT does not count it. It first sets
// master's repl-diskless-sync-delay to 0, so that the full sync starts
// at once (Redis 7 waits 5s for more replicas).
func Replica(t testing.TB, master *redisnode.Node, args ...string) *redisnode.Node {
	t.Helper()
	ctx := context.Background()
	mc := Client(t, master)
	if err := mc.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatalf("redistest: %s: CONFIG SET repl-diskless-sync-delay: %v", master.Addr(), err)
	}
	opts := redisnode.Options{Args: append([]string{"--replicaof", "127.0.0.1", fmt.Sprint(master.Port())}, args...)}
	if pass := master.Password(); pass != "" {
		opts.Args = append(opts.Args, "--masterauth", pass, "--requirepass", pass)
	}
	r := NodesWith(t, 1, opts)[0]
	deadline := time.Now().Add(15 * time.Second)
	for {
		// The probe key expires: it outlives no test.
		err := mc.Set(ctx, "redistest:replica-probe", r.Addr(), time.Second).Err()
		if err == nil {
			var n int64
			// WAIT's own timeout, below the client's ReadTimeout.
			if n, err = mc.Do(ctx, "wait", 1, 400).Int64(); err == nil && n >= 1 {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: replica %s of %s: no write acknowledged after 15s (last: %v)", r.Addr(), master.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// VerifyNoLeaks checks, after a package's tests, that no goroutine
// outlived them, retrying for up to wait: a release retry loop of a
// client a test did not Close ends at its next attempt once its go-redis
// client is closed, up to a second after the test, longer than goleak's
// own half second. It returns the exit code for TestMain: 0, or 1 after
// printing the goroutines left.
func VerifyNoLeaks(wait time.Duration) int {
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
		time.Sleep(100 * time.Millisecond) // polling: goroutines ending is not an event we can await
	}
}

// SlowHandshake is a go-redis hook that delays go-redis's own CLIENT
// MAINT_NOTIFICATIONS, which it sends as a RESP3 connection opens, by
// its duration: so that connections keep opening (and go-redis keeps
// downgrading its maintenance notifications, on Redis 7) while a test
// does something else.
type SlowHandshake time.Duration

func (SlowHandshake) DialHook(next redis.DialHook) redis.DialHook { return next }

func (d SlowHandshake) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && cmd.Name() == "client" && fmt.Sprint(a[1]) == "maint_notifications" {
			time.Sleep(time.Duration(d))
		}
		return next(ctx, cmd)
	}
}

func (SlowHandshake) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
