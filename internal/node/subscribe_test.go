package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock/internal/redistest"
)

// TestSubscription: Subscribe does no I/O (a stopped node does not hold
// it up); Start and Receive deliver the subscription's confirmation,
// then the messages of matching channels only; a Receive whose ctx ends
// returns its error; Close ends a Receive under way.
func TestSubscription(t *testing.T) {
	t.Parallel()
	node := redistest.Nodes(t, 1)[0]
	rc := redistest.Client(t, node)
	nd, _ := newTestNode(t, rc)
	ctx := context.Background()

	require.NoError(t, node.Pause())
	start := time.Now()
	s := nd.Subscribe()
	require.Less(t, time.Since(start), 5*time.Second, "Subscribe waited for a stopped node")
	require.NoError(t, node.Resume())
	t.Cleanup(func() { _ = s.Close() })

	require.NoError(t, s.Start(ctx, "rel:*"))
	ev, err := s.Receive(ctx)
	require.NoError(t, err)
	require.True(t, ev.Subscribed, "want the confirmation first, got %+v", ev)

	require.NoError(t, rc.Publish(ctx, "other", "x").Err())
	require.NoError(t, rc.Publish(ctx, "rel:k", "tok").Err())
	ev, err = s.Receive(ctx)
	require.NoError(t, err)
	require.Equal(t, Event{Channel: "rel:k", Payload: "tok"}, ev)

	// Nothing more to receive: a Receive whose ctx ends returns its
	// error. A confirmation may come first, after go-redis reconnected
	// the subscription (a loaded machine's read timeout), as documented.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	for range 5 {
		if ev, err = s.Receive(cctx); err != nil {
			break
		}
		require.True(t, ev.Subscribed, "want no message, got %+v", ev)
	}
	cancel()
	require.Error(t, err, "a Receive with nothing to receive and an ended ctx")

	// A Receive cut short by its ctx drops the connection: the next
	// Receive reconnects and first reads the new confirmation.
	got := make(chan error, 1)
	go func() {
		for {
			ev, err := s.Receive(ctx)
			if err != nil || !ev.Subscribed {
				got <- err
				return
			}
		}
	}()
	require.NoError(t, s.Close())
	select {
	case err := <-got:
		require.Error(t, err, "want Close to end the Receive, not a message")
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end a Receive under way")
	}
}

// TestUnpanic: a panic in go-redis becomes an error naming it; errors
// and success pass through.
func TestUnpanic(t *testing.T) {
	t.Parallel()
	require.NoError(t, unpanic(func() error { return nil }))
	e := errors.New("e")
	require.ErrorIs(t, unpanic(func() error { return e }), e)
	err := unpanic(func() error { panic("bad reply") })
	require.ErrorContains(t, err, "go-redis panicked: bad reply")
}
