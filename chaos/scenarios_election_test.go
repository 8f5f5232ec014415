package chaos

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestFreezeHookHoldsRequestsUntilThaw: while frozen, a request waits for
// the thaw (or its ctx), as a paused process sends nothing; after the
// thaw it goes on, late.
func TestFreezeHookHoldsRequestsUntilThaw(t *testing.T) {
	h := newFreezeHook()
	sent := make(chan struct{}, 4)
	next := h.ProcessHook(func(context.Context, redis.Cmder) error {
		sent <- struct{}{}
		return nil
	})
	cmd := redis.NewStatusCmd(context.Background(), "ping")
	if err := next(context.Background(), cmd); err != nil {
		t.Fatalf("want a request of a running client sent, got %v", err)
	}
	<-sent

	h.freeze()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := next(ctx, cmd); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a frozen client's request to wait for its ctx, got %v", err)
	}
	select {
	case <-sent:
		t.Fatal("want nothing sent while frozen, got a request")
	default:
	}
	done := make(chan error, 1)
	go func() { done <- next(context.Background(), cmd) }()
	select {
	case <-sent:
		t.Fatal("want nothing sent while frozen, got a request")
	case <-time.After(20 * time.Millisecond):
	}
	h.thaw()
	if err := <-done; err != nil {
		t.Fatalf("want the held request sent after the thaw, got %v", err)
	}
	<-sent
	if waited, err := h.wait(context.Background()); waited || err != nil {
		t.Fatalf("want a thawed client to run, got waited %v, %v", waited, err)
	}
}
