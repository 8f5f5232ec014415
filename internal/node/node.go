package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Node is one independent Redis master and what we learnt about it.
type Node struct {
	Idx  int
	C    redis.UniversalClient
	Addr string

	identified atomic.Bool // run_id read (or known unreadable)
	// RunID is the server's run_id once identified; the host guards it
	// (see Host.Identified).
	RunID string

	guard *guard // restart guard (guard.go); nil when off
	// replicas: replica sync (replicas.go); nil when off.
	replicas *replicaSync
	// Refused: the restart guard refused the last vote (for the host's
	// log of its verdicts).
	Refused atomic.Bool
	pipe    pipe       // queues and batches the requests of rounds (pipeline.go)
	retry   retryQueue // failed releases to retry (retry.go)
	h       *Host
	// held counts the goroutines that hold a connection of the node's
	// pool, or are taking one, for the leader (leaderconn.go) or the
	// direct path (direct.go): GiveBack waits for them.
	held Count
}

// Count counts work in flight (goroutines, requests) that someone may
// wait for, with a bound: the releases in flight that the Client's Close
// waits for, and the goroutines that hold a node's pooled connection
// (GiveBack). Its zero value is ready.
type Count struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n falls to 0; nil when nobody waits
}

// Add adds n to the count.
func (c *Count) Add(n int) {
	c.mu.Lock()
	c.n += n
	c.mu.Unlock()
}

// Done takes one from the count.
func (c *Count) Done() {
	c.mu.Lock()
	c.n--
	if c.n == 0 && c.zero != nil {
		close(c.zero)
		c.zero = nil
	}
	c.mu.Unlock()
}

// Wait returns when the count is 0, or after d.
func (c *Count) Wait(d time.Duration) {
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return
	}
	if c.zero == nil {
		c.zero = make(chan struct{})
	}
	ch := c.zero
	c.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

// GiveBack gives the direct path's connection back to the pool (unless a
// caller runs on it now) and waits, for at most d, until every
// connection the node's leaders and direct path held is back in the
// pool. The Client's Close calls it once the leaders have ended, so that
// a user who closes the go-redis client next does not close a
// connection still held by us: go-redis logs "Unexpected conn state
// changed by hook to CLOSED" when such a connection is returned.
func (nd *Node) GiveBack(d time.Duration) {
	p := &nd.pipe
	p.mu.Lock()
	if !p.direct {
		p.dc.drop()
	}
	p.mu.Unlock()
	nd.held.Wait(d)
}

// Host is what a node needs of the Client it serves. Its functions run
// off the request path: when a leader starts, on first contact, and for
// failed releases.
type Host struct {
	// Spawn runs f on a goroutine of the Client's group, which Close
	// waits for. After Close it runs f on a goroutine of its own when
	// always is set (the pipe leaders of the rounds still allowed:
	// Extend, Unlock), and not at all otherwise (retry loops); it
	// reports whether it ran f.
	Spawn func(f func() error, always bool) bool
	// Closed is closed by the Client's Close.
	Closed <-chan struct{}
	// Identified records what INFO server returned on n's first contact
	// (info, err), and returns an error when n turns out to duplicate
	// another node. It marks n identified (SetIdentified) when it
	// accepts it.
	Identified func(n *Node, info string, err error) error
	// DroppedRetry is told of a failed release of keys on n that is not
	// retried (after Close, or with too many queued).
	DroppedRetry func(n *Node, keys []string)
	// Jitter draws a delay from [d/2, 3d/2).
	Jitter func(d time.Duration) time.Duration
	// RetryTimeout bounds each background retry of a release;
	// FinalWait bounds Close's last attempt at each node's retries.
	RetryTimeout, FinalWait time.Duration
}

// New returns the node of client c, the idx-th of its Client. A Redis
// Cluster client is taken as identified: its shards have run_ids of
// their own.
func New(idx int, c redis.UniversalClient, h *Host) *Node {
	n := &Node{Idx: idx, C: c, Addr: addrOf(c), h: h}
	if _, ok := c.(*redis.ClusterClient); ok {
		n.identified.Store(true)
	}
	return n
}

// Identified reports whether n's run_id was read (or is known
// unreadable).
func (n *Node) Identified() bool { return n.identified.Load() }

// SetIdentified marks n identified with run_id id. The host calls it
// under the lock it reads the other nodes' RunID under.
func (n *Node) SetIdentified(id string) {
	n.RunID = id
	n.identified.Store(true)
}

// Guarded reports whether n has a restart guard.
func (n *Node) Guarded() bool { return n.guard != nil }

func (n *Node) isClosed() bool {
	select {
	case <-n.h.Closed:
		return true
	default:
		return false
	}
}

// FailoverAddr is the placeholder address go-redis gives the clients of
// NewFailoverClient.
const FailoverAddr = "FailoverClient"

// addrOf returns a printable address for a client, or "" when the client
// type does not expose a single one.
func addrOf(c redis.UniversalClient) string {
	switch v := c.(type) {
	case *redis.Client:
		return v.Options().Addr
	case *redis.ClusterClient:
		return "cluster:" + strings.Join(v.Options().Addrs, ",")
	}
	return ""
}

// WaitTimeout runs wait and returns when it does, or after d: go-redis
// may not honour a context deadline, so waits on node requests are
// bounded here. A wait cut short goes on in its goroutine until it ends.
func WaitTimeout(wait func(), d time.Duration) {
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// InfoField returns the value of field in an INFO reply, or "".
func InfoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// ServerVersion returns the server's name and version from an INFO
// server reply: "valkey" and valkey_version on Valkey, whose
// redis_version is the Redis version it forked from (7.2.4 on Valkey 8)
// and which names itself in server_name; "redis" and redis_version on
// Redis, which has no server_name. Both are "" when info has neither.
func ServerVersion(info string) (name, version string) {
	if name = InfoField(info, "server_name"); name != "" {
		if version = InfoField(info, name+"_version"); version != "" {
			return name, version
		}
		return name, InfoField(info, "redis_version")
	}
	if version = InfoField(info, "redis_version"); version != "" {
		return "redis", version
	}
	return "", ""
}

// infoServer runs INFO server, turning a panic of go-redis on a malformed
// reply into an error.
func infoServer(ctx context.Context, c redis.UniversalClient) (info string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("redlock: malformed reply to INFO: go-redis panicked: %v", p)
		}
	}()
	return c.Info(ctx, "server").Result()
}

// ErrNodeTimeout is the error of a node that did not answer within the
// per-node timeout; the root re-exports it.
var ErrNodeTimeout = errors.New("redlock: node timeout")

// NodeErr marks a request cut short by the per-node deadline as a
// timeout.
func NodeErr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errors.Join(ErrNodeTimeout, err)
	}
	return err
}
