package redlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// node is one independent Redis master and what we learnt about it.
type node struct {
	idx  int
	c    redis.UniversalClient
	addr string

	identified atomic.Bool // run_id read (or known unreadable)
	runID      string      // guarded by Client.idMu

	guard   *nodeGuard  // restart guard (guard.go); nil when off
	refused atomic.Bool // the guard refused the last vote (for WithLogger)
	pipe    pipe        // queues and batches the requests of rounds (pipe.go)
	retry   retryQueue  // failed releases to retry (cleanup.go)
}

// failoverAddr is the placeholder address go-redis gives the clients of
// NewFailoverClient.
const failoverAddr = "FailoverClient"

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

// newNodes validates the clients and wraps them. It rejects nil clients and
// the same client, or two clients for the same address and database, given
// twice. Servers reached under different addresses are caught later, by
// run_id, on first contact (see identify).
func newNodes(clients []redis.UniversalClient) ([]*node, error) {
	if len(clients) == 0 {
		return nil, invalidf("no nodes")
	}
	nodes := make([]*node, len(clients))
	seen := make(map[string]int, len(clients))
	for i, c := range clients {
		if c == nil || isNilPointer(c) {
			return nil, invalidf("node %d is nil", i+1)
		}
		for j := 0; j < i; j++ {
			if sameClient(c, clients[j]) {
				return nil, causef([]error{ErrInvalid, ErrDuplicateNode}, "duplicate node: nodes %d and %d are the same client", j+1, i+1)
			}
		}
		// A Sentinel-managed client (NewFailoverClient) has a placeholder
		// address; its server is identified by run_id on first contact.
		if rc, ok := c.(*redis.Client); ok && rc.Options().Addr != failoverAddr {
			o := rc.Options()
			id := fmt.Sprintf("%s/%d", o.Addr, o.DB)
			if j, dup := seen[id]; dup {
				return nil, causef([]error{ErrInvalid, ErrDuplicateNode}, "duplicate node: nodes %d and %d both address %s", j+1, i+1, id)
			}
			seen[id] = i
		}
		nodes[i] = &node{idx: i, c: c, addr: addrOf(c)}
		if _, ok := c.(*redis.ClusterClient); ok {
			nodes[i].identified.Store(true)
		}
	}
	return nodes, nil
}

func isNilPointer(c any) bool {
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func sameClient(a, b redis.UniversalClient) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && any(a) == any(b)
}

// A node is identified by its server's run_id on first contact (see
// firstContact), so that one server given twice under different
// addresses is caught before it can vote twice. A server that refuses
// INFO (ACL) is accepted without a run_id; a network error leaves the
// node unidentified, to be tried again on the next contact. A Redis
// Cluster node is not identified: its shards have run_ids of their own.

// identified records what an INFO server to n returned (info, err); see
// above.
func (c *Client) identified(n *node, info string, err error) error {
	var rerr redis.Error
	if err != nil && !errors.As(err, &rerr) {
		return err
	}
	id := infoField(info, "run_id")
	c.idMu.Lock()
	defer c.idMu.Unlock()
	if n.identified.Load() {
		return nil
	}
	if id != "" {
		for _, o := range c.nodes {
			if o != n && o.identified.Load() && o.runID == id {
				err := causef([]error{ErrInvalid, ErrDuplicateNode}, "duplicate node: nodes %d and %d are the same server (run_id %s)", o.idx+1, n.idx+1, id)
				if c.dupErr.CompareAndSwap(nil, &err) {
					c.logDuplicate(err)
				}
				return err
			}
		}
	}
	n.runID = id
	n.identified.Store(true)
	return nil
}

// waitTimeout runs wait and returns when it does, or after d: go-redis
// may not honour a context deadline, so waits on node requests are
// bounded here. A wait cut short goes on in its goroutine until it ends.
func waitTimeout(wait func(), d time.Duration) {
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// infoField returns the value of field in an INFO reply, or "".
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
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
