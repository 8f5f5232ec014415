package chaos

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
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

// TestAwaitNextWantsAHigherTerm: a leader's pause ends only once a
// candidate leads with a term above the paused one's. A candidate that
// still holds a deposed leadership of a lower term (a leader paused
// before, thawed but not yet aware) does not end it: else the pause that
// follows a thaw ends at once and the paused leader leads on.
func TestAwaitNextWantsAHigherTerm(t *testing.T) {
	ctx := context.Background()
	cl, err := NewCluster(ctx, NewRecorder(NewClock()), ClusterOptions{Nodes: 1})
	if err != nil {
		t.Fatalf("want a node, got %v", err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	rl, err := redlock.New(cl.Clients())
	if err != nil {
		t.Fatalf("want a client, got %v", err)
	}
	t.Cleanup(func() { _ = rl.Close() })
	el := rl.Election("await-next")
	campaign := func(resign bool) *redlock.Leadership {
		t.Helper()
		ld, err := el.Campaign(ctx, "candidate", time.Minute)
		if err != nil {
			t.Fatalf("want elected, got %v", err)
		}
		if resign {
			if err := ld.Resign(ctx); err != nil {
				t.Fatalf("want resigned, got %v", err)
			}
		}
		return ld
	}
	deposed, paused, next := campaign(true), campaign(true), campaign(false)
	t.Cleanup(func() { _ = next.Resign(context.Background()) })

	prev := &candidate{ld: deposed}
	r := &electionRun{cands: []*candidate{prev, {ld: paused}}}
	if ok, err := r.awaitNext(ctx, paused.Lock().Fence(), 50*time.Millisecond); ok || err != nil {
		t.Fatalf("want no leader above term %d while the others hold terms %d and %d, got %v, %v",
			paused.Lock().Fence(), deposed.Lock().Fence(), paused.Lock().Fence(), ok, err)
	}
	prev.mu.Lock()
	prev.ld = next
	prev.mu.Unlock()
	if ok, err := r.awaitNext(ctx, paused.Lock().Fence(), time.Minute); !ok || err != nil {
		t.Fatalf("want the leader of term %d found above term %d, got %v, %v", next.Lock().Fence(), paused.Lock().Fence(), ok, err)
	}
}
