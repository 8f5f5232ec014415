package redlock_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
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

// verifyNoLeaks fails the run when goroutines outlive the tests: no
// goroutine may outlive its lock (watchers, extenders, node requests).
// A release retry loop of a client the test did not Close ends at its
// next attempt once its go-redis client is closed, up to a second after
// the test (retryRecheck), so the check retries for up to wait, longer
// than goleak's own half second.
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
