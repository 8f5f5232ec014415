package node

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// testHost is a Host as a Client gives one, for tests of one Node: its
// goroutines are waited for when the test ends, and dropped retries are
// counted.
type testHost struct {
	Host
	wg      sync.WaitGroup
	closed  chan struct{}
	once    sync.Once
	dropped atomic.Int64
}

// newTestNode returns node 0 of a Client on c, identified, with a
// testHost that is closed (and its goroutines awaited) when t ends.
func newTestNode(t *testing.T, c redis.UniversalClient) (*Node, *testHost) {
	t.Helper()
	nd, h := newUnidentifiedNode(t, c)
	nd.SetIdentified("test")
	return nd, h
}

// newUnidentifiedNode is newTestNode before its first contact: its first
// request asks INFO server too, and the host accepts what it answers.
func newUnidentifiedNode(t *testing.T, c redis.UniversalClient) (*Node, *testHost) {
	t.Helper()
	h := &testHost{closed: make(chan struct{})}
	h.Host = Host{
		Spawn: func(f func() error, always bool) bool {
			select {
			case <-h.closed:
				if !always {
					return false
				}
			default:
			}
			h.wg.Add(1)
			go func() { defer h.wg.Done(); _ = f() }()
			return true
		},
		Closed:       h.closed,
		DroppedRetry: func(*Node, []string) { h.dropped.Add(1) },
		Identified: func(n *Node, info string, err error) error {
			if err == nil {
				n.SetIdentified(info)
			}
			return nil
		},
		Jitter:       func(d time.Duration) time.Duration { return d },
		RetryTimeout: 500 * time.Millisecond,
		FinalWait:    time.Second,
	}
	nd := New(0, c, &h.Host)
	t.Cleanup(func() {
		h.close()
		h.wg.Wait()
	})
	return nd, h
}

// close is the Client's Close, as the host sees it; idempotent.
func (h *testHost) close() { h.once.Do(func() { close(h.closed) }) }
