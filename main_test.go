package redlock_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	// Tests kill nodes on purpose; go-redis would log every refused dial.
	redis.SetLogger(quietLogger{})
	// No goroutine may outlive its lock: watchers, extenders and node
	// requests all end by the time the tests do.
	goleak.VerifyTestMain(m)
}
