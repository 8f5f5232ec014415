package node

import (
	"context"
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
	code := m.Run()
	if code == 0 {
		code = redistest.VerifyNoLeaks(10 * time.Second)
	}
	os.Exit(code)
}
