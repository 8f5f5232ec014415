package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterOptions configures a Cluster.
type ClusterOptions struct {
	// Nodes is the number of independent masters. Default: 5.
	Nodes int
	// Proxy puts a toxiproxy in front of every node, which Slow and
	// Partition need. Default: false, clients dial the nodes directly.
	Proxy bool
	// AppendOnly starts the nodes with appendfsync always, so that a
	// restarted node keeps its keys. Default: false, memory only.
	AppendOnly bool
	// Backend starts the nodes. Default: Local{}.
	Backend Backend
}

// Cluster is N independent Redis masters under fault injection: the
// nodes, a proxy in front of each (optional), and a clock-skew hook per
// node. Faults (faults.go) are its methods; each is recorded as an Event.
// It is safe for concurrent use.
type Cluster struct {
	opts    ClusterOptions
	rec     *Recorder
	nodes   []Node
	proxies []*Proxy // nil without ClusterOptions.Proxy
	skew    []*SkewHook

	mu      sync.Mutex
	clients []*redis.Client
	closed  bool
}

// NewCluster starts the nodes (and proxies) and records its faults in
// rec. On error, whatever was started is stopped.
func NewCluster(ctx context.Context, rec *Recorder, opts ClusterOptions) (*Cluster, error) {
	if opts.Nodes <= 0 {
		opts.Nodes = 5
	}
	if opts.Backend == nil {
		opts.Backend = Local{}
	}
	c := &Cluster{opts: opts, rec: rec}
	c.nodes = make([]Node, opts.Nodes)
	errs := make([]error, opts.Nodes)
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.nodes[i], errs[i] = opts.Backend.Start(ctx, NodeOptions{AppendOnly: opts.AppendOnly})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = c.Close()
		return nil, err
	}
	for i, n := range c.nodes {
		c.skew = append(c.skew, &SkewHook{})
		if !opts.Proxy {
			continue
		}
		p, err := NewProxy(fmt.Sprintf("node%d", i), n.Addr())
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		c.proxies = append(c.proxies, p)
	}
	return c, nil
}

// N returns the number of nodes.
func (c *Cluster) N() int { return len(c.nodes) }

// Node returns node i, for faults the Cluster has no method for.
func (c *Cluster) Node(i int) Node { return c.nodes[i] }

// Addr returns the address clients dial for node i: its proxy's, or the
// node's own.
func (c *Cluster) Addr(i int) string {
	if c.proxies != nil {
		return c.proxies[i].Addr()
	}
	return c.nodes[i].Addr()
}

// Clients returns a new go-redis client for every node, through the
// node's proxy and with the node's skew hook, so that each workload
// client has connections of its own. Close closes them.
//
// The clients fail fast, as lock clients should: one dial attempt of at
// most 250ms, no command retries, 500ms read and write timeouts.
func (c *Cluster) Clients() []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(c.nodes))
	for i := range c.nodes {
		rc := redis.NewClient(&redis.Options{
			Addr:          c.Addr(i),
			DialTimeout:   250 * time.Millisecond,
			ReadTimeout:   500 * time.Millisecond,
			WriteTimeout:  500 * time.Millisecond,
			MaxRetries:    -1,
			DialerRetries: 1,
		})
		rc.AddHook(c.skew[i])
		c.track(rc)
		out[i] = rc
	}
	return out
}

// Admin returns a new client straight to node i, past its proxy and
// skew: for orchestration (placing a foreign key), not for locking.
func (c *Cluster) Admin(i int) *redis.Client {
	rc := redis.NewClient(&redis.Options{
		Addr: c.nodes[i].Addr(), MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: time.Second,
	})
	c.track(rc)
	return rc
}

func (c *Cluster) track(rc *redis.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clients = append(c.clients, rc)
}

// Close closes every client, proxy and node. It is idempotent.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	clients := c.clients
	c.clients = nil
	c.mu.Unlock()
	var errs []error
	for _, rc := range clients {
		_ = rc.Close()
	}
	for _, p := range c.proxies {
		p.Close()
	}
	for _, n := range c.nodes {
		if n != nil {
			errs = append(errs, n.Close())
		}
	}
	return errors.Join(errs...)
}
