package node

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Subscription is a pattern subscription on one node: the release
// announcements that wake waiting Lock calls. It is go-redis's PubSub
// behind the calls the hub needs, each guarded against a panic in
// go-redis's reply parsing (a malformed reply is an error, as for every
// other request; see doc.go). It is not safe for concurrent Receive
// calls; Close may be called from any goroutine.
type Subscription struct{ ps *redis.PubSub }

// Subscribe returns a subscription on n that is not subscribed yet: it
// does no I/O, so a slow or dead node never holds up its caller. The
// reader calls Start, then Receive.
func (n *Node) Subscribe() *Subscription {
	return &Subscription{ps: n.C.Subscribe(context.Background())}
}

// Start subscribes to the channels matching pattern. On an error the
// pattern stays recorded: Receive reconnects and subscribes again.
func (s *Subscription) Start(ctx context.Context, pattern string) error {
	return unpanic(func() error { return s.ps.PSubscribe(ctx, pattern) })
}

// Event is what a subscription received: a message on Channel, or, with
// Subscribed, the node's confirmation that the pattern is subscribed
// (again, after a reconnection: a message may have gone unseen).
type Event struct {
	Channel, Payload string
	Subscribed       bool
}

// Receive waits for the next event; other replies (pongs, other kinds of
// subscription) are skipped. An error means the node is down or the
// connection broke; Receive may be called again, and reconnects.
func (s *Subscription) Receive(ctx context.Context) (Event, error) {
	for {
		var msg any
		err := unpanic(func() (err error) { msg, err = s.ps.Receive(ctx); return err })
		if err != nil {
			return Event{}, err
		}
		switch m := msg.(type) {
		case *redis.Message:
			return Event{Channel: m.Channel, Payload: m.Payload}, nil
		case *redis.Subscription:
			if m.Kind == "psubscribe" {
				return Event{Subscribed: true}, nil
			}
		}
	}
}

// Close ends the subscription; a Receive under way returns an error.
func (s *Subscription) Close() error { return s.ps.Close() }

// unpanic runs f, turning a panic in go-redis into an error.
func unpanic(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("redlock: malformed pub/sub reply: go-redis panicked: %v", p)
		}
	}()
	return f()
}
