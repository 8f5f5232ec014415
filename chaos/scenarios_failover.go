package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/seed543a70bd/redlock"
)

// Failover scenarios: three nodes, each a master with a replica, watched
// by three Sentinels (sentinel.go), reached through FailoverClients.
// Node 1's master dies after granting A's lock, before its replica has
// the key, and Sentinel promotes the replica.

// failoverTTL is A's and B's lease: long enough to outlast a failover
// (Sentinel needs a few seconds), so that B's only way in is a node
// that forgot A.
const failoverTTL = 10 * time.Second

// failoverWait is the WAIT timeout of failover-replicas: below the
// per-node timeout of failoverTTL (200ms) and the clients' 500ms read
// timeout.
const failoverWait = 100 * time.Millisecond

// failover runs, once: node 1's replica is cut off its master (holdBack);
// node 3 holds a foreign key for a second; A locks "failover", winning
// nodes 1 and 2 at once. Node 1's master is killed, and Sentinel
// promotes its replica, which never saw A's key. B then tries while A
// holds: it wins on nodes 1 and 3 (the foreign key has expired), a
// second holder. With withReplicas, both clients use WithReplicas(1, …):
// A's grant on node 1 waits for a replica that does not answer and does
// not count, so A wins only once node 3 is free, on nodes 2 and 3, whose
// replicas have the key; B is then refused by both, and wins once A
// releases.
func failover(withReplicas bool) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
		rs, err := replicate(ctx, e.cl)
		if err != nil {
			return err
		}
		defer rs.close()
		e.note("3 nodes replicated, 3 sentinels ready")
		opts := []redlock.Option{redlock.WithFencing()}
		if withReplicas {
			opts = append(opts, redlock.WithReplicas(1, failoverWait))
		}
		a, err := redlock.New(rs.clients(), opts...)
		if err != nil {
			return err
		}
		defer a.Close()
		b, err := redlock.New(rs.clients(), opts...)
		if err != nil {
			return err
		}
		defer b.Close()
		idA, idB := e.newClientID(), e.newClientID()
		const key = "failover"

		if err := e.cl.Admin(2).Set(ctx, key, "foreign", time.Second).Err(); err != nil {
			return err
		}
		if err := rs.holdBack(ctx, 0); err != nil {
			return err
		}
		la := e.tryFor(ctx, idA, a, key, 3*time.Second)
		if la == nil {
			e.failf("A never acquired %q", key)
			return ctx.Err()
		}
		_ = e.write(ctx, idA, la)
		if err := e.cl.Kill(0); err != nil {
			e.release(la)
			return err
		}
		took, err := rs.awaitPromotion(ctx, 0, 15*time.Second)
		if err != nil {
			e.release(la)
			return err
		}
		e.note("node 1's replica promoted %v after its master died", took.Round(time.Millisecond))

		// B tries while A holds, for as long as the FailoverClient may
		// take to find the new master (go-redis redials a failed pool
		// once a second).
		if lb := e.tryFor(ctx, idB, b, key, 3*time.Second); lb != nil {
			e.hold(ctx, idB, lb, 10*time.Millisecond)
			if withReplicas {
				e.failf("B acquired %q while A held it", key)
			}
		} else if !withReplicas {
			e.failf("B never acquired %q from the promoted node: the failover lost no lock", key)
		}
		e.release(la)
		if withReplicas {
			// Progress: with A gone, B wins on the nodes whose replicas
			// acknowledge (2 and 3; node 1 has none now).
			if lb := e.tryFor(ctx, idB, b, key, 3*time.Second); lb != nil {
				e.hold(ctx, idB, lb, 10*time.Millisecond)
			} else {
				e.failf("B never acquired %q after A released it", key)
			}
		}
		return ctx.Err()
	}
}

// tryFor tries lk on key for failoverTTL every 20ms until it wins, ctx
// ends, or d passes.
func (e *env) tryFor(ctx context.Context, id int, lk tryLocker, key string, d time.Duration) *redlock.Lock {
	deadline := time.Now().Add(d)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if l, err := e.try(ctx, id, lk, key, failoverTTL, false); err == nil {
			return l
		}
		_ = sleep(ctx, 20*time.Millisecond)
	}
	return nil
}

// failoverDoc is the scenarios' shared description.
var failoverDoc = fmt.Sprintf("3 nodes, each a master with a replica, watched by 3 Sentinels (quorum 2, down after %v), reached through FailoverClients. Node 1's replica is cut off its master; A locks (TTL %v) while node 3 holds a foreign key for 1s; node 1's master is killed and Sentinel promotes its replica, which never saw A's key; B then tries while A holds.", sentinelDownAfter, failoverTTL)
