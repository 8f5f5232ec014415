package redlock_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/redistest"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	// Tests kill nodes on purpose; go-redis would log every refused dial.
	redis.SetLogger(quietLogger{})
	urls, store, shared, stop, err := startExampleNodes()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the examples' nodes:", err)
		os.Exit(1)
	}
	nodeURLs, storeURL, locker = urls, store, shared
	code := m.Run()
	stop()
	if code == 0 {
		code = redistest.VerifyNoLeaks(10 * time.Second) // no goroutine may outlive its lock
	}
	os.Exit(code)
}
