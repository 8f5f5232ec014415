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

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	// Tests kill nodes on purpose; go-redis would log every refused dial.
	redis.SetLogger(quietLogger{})
	code := m.Run()
	if code == 0 {
		code = redistest.VerifyNoLeaks(10 * time.Second) // no goroutine may outlive its lock
	}
	os.Exit(code)
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
