package stress_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/seed543a70bd/redlock"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	// Tests kill nodes on purpose; go-redis would log every refused dial.
	redis.SetLogger(quietLogger{})
	code := m.Run()
	if code == 0 {
		code = verifyNoLeaks(10 * time.Second)
	}
	os.Exit(code)
}

// verifyNoLeaks fails the run when goroutines outlive the tests, after
// retrying for up to wait: a release retry loop ends at its next attempt
// once its go-redis client is closed, up to a second later.
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
		time.Sleep(100 * time.Millisecond) // polling: goroutines ending is not an event we can await
	}
}

var keySeq atomic.Int64

// key returns a key unique to this test run.
func key(t testing.TB) string {
	return fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), keySeq.Add(1))
}

// testNodeTimeout is far above a node's reply time even on a loaded
// 2-core machine under -race.
const testNodeTimeout = 250 * time.Millisecond

// newClient returns a Client on clients with testNodeTimeout, unless
// opts set another, closed when the test ends.
func newClient(t testing.TB, clients []redis.UniversalClient, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := redlock.New(clients, append([]redlock.Option{redlock.WithNodeTimeout(testNodeTimeout)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
