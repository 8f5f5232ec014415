package redlock

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock/internal/node"
)

// newNodes validates the clients and wraps them. It rejects nil clients and
// the same client, or two clients for the same address and database, given
// twice. Servers reached under different addresses are caught later, by
// run_id, on first contact (see identify).
// Each node gets h, through which it reaches the Client.
func newNodes(clients []redis.UniversalClient, h *node.Host) ([]*node.Node, error) {
	if len(clients) == 0 {
		return nil, invalidf("no nodes")
	}
	nodes := make([]*node.Node, len(clients))
	seen := make(map[string]int, len(clients))
	for i, c := range clients {
		if c == nil || isNilPointer(c) {
			return nil, invalidf("node %d is nil", i+1)
		}
		for j := 0; j < i; j++ {
			if sameClient(c, clients[j]) {
				return nil, causef([]error{ErrInvalid}, "duplicate node: nodes %d and %d are the same client", j+1, i+1)
			}
		}
		// A Sentinel-managed client (NewFailoverClient) has a placeholder
		// address; its server is identified by run_id on first contact.
		if rc, ok := c.(*redis.Client); ok && rc.Options().Addr != node.FailoverAddr {
			o := rc.Options()
			id := fmt.Sprintf("%s/%d", o.Addr, o.DB)
			if j, dup := seen[id]; dup {
				return nil, causef([]error{ErrInvalid}, "duplicate node: nodes %d and %d both address %s", j+1, i+1, id)
			}
			seen[id] = i
		}
		nodes[i] = node.New(i, c, h)
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
// node.Host.Identified), so that one server given twice under different
// addresses is caught before it can vote twice. A server that refuses
// INFO (ACL) is accepted without a run_id; a network error leaves the
// node unidentified, to be tried again on the next contact. A Redis
// Cluster node is not identified: its shards have run_ids of their own.

// identified records what an INFO server to n returned (info, err); see
// above.
func identified(c *Client, n *node.Node, info string, err error) error {
	var rerr redis.Error
	if err != nil && !errors.As(err, &rerr) {
		return err
	}
	id := node.InfoField(info, "run_id")
	c.idMu.Lock()
	defer c.idMu.Unlock()
	if n.Identified() {
		return nil
	}
	if id != "" {
		for _, o := range c.nodes {
			if o != n && o.Identified() && o.RunID == id {
				// Lower number first, whichever node answered first.
				a, b := min(o.Idx, n.Idx), max(o.Idx, n.Idx)
				err := causef([]error{ErrInvalid}, "duplicate node: nodes %d and %d are the same server (run_id %s)", a+1, b+1, id)
				if c.dupErr.CompareAndSwap(nil, &err) {
					logDuplicate(c, err)
				}
				return err
			}
		}
	}
	n.SetIdentified(id)
	return nil
}
