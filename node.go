package redlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
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

// sender is what a node's requests go through: the node's go-redis
// client, or its pipe leader's own connection (leaderConn).
type sender interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
	Pipeline() redis.Pipeliner
}

var (
	_ sender = redis.UniversalClient(nil)
	_ sender = (*redis.Tx)(nil)
)

// A node's pipe leader (pipe.go) sends on a go-redis connection of its
// own while the node is busy: taken from the node's pool at a request,
// and given back once the leader has waited more than leaderConnIdle
// for the next (checked every leaderConnCheck), or held it for
// leaderConnAge, or a request on it failed,
// or the leader ends. Through the pool, every request paid a checkout
// and its health check: a syscall and three allocations, 27 of the 72
// allocations of an uncontended TryLock+Unlock on 5 nodes, and 6% of the
// client's CPU.
//
// The connection is held by a go-redis Tx (redis.Client.Watch, with no
// key: no WATCH is sent, and none is left to undo), not a redis.Conn. A
// Conn shares its client's *Options, and with RESP3 go-redis v9.23 may
// write there (it switches its maintenance notifications off, in auto
// mode, on a server that refuses them) under a lock of the client's or
// of the Conn's own: a connection initialized through a Conn while the
// pool initializes another is a data race (the race detector caught it
// in TestStress). A Tx takes a copy of the options, under the client's
// lock, and writes only its copy. Watch hands the Tx to a callback and
// ends it when the callback returns, so a short-lived goroutine holds
// that callback open until the leader drops the connection (and then
// ends, without the leader waiting for it).
//
// What the health check gave is kept. A connection that sat idle is
// given back, and the next request's checkout checks the one it takes.
// A request that fails because the connection was closed under it (EOF,
// a reset: the server restarted, or closed it in the last idle instant)
// is sent once more through the pool, as the pool would have sent it on
// a live connection. Every failed request drops the connection, so a
// timeout, or a reply out of step, is not carried over. Only for a plain
// *redis.Client with room in its pool (ownConnFits): not Sentinel's
// failover client (its pool follows the master), nor a cluster or a
// ring; the leader holds one connection of the pool, and the leaders of
// all Clients on one server's pool hold at most a quarter of it
// (connSlots). go-redis copies
// a client's hooks into a Tx when it makes it: a hook added to a client
// after its first lock request reaches the leader's requests once the
// connection is replaced, within leaderConnAge.
type leaderConn struct {
	tx    *redis.Tx
	done  chan struct{} // closed to end the Watch that holds tx, or will
	until time.Time     // give it back then (leaderConnAge)
	off   bool          // the node's client is not one for a connection of its own
	slots *connSlots    // its client's (connslots.go), once looked up
	// A take in progress (see get): the Watch goroutine sends the Tx on
	// got, or closes ended if Watch returned without one.
	got   chan *redis.Tx
	ended chan struct{}
}

// minPoolForConn is the smallest go-redis pool a leader takes a
// connection from.
const minPoolForConn = 4

// ownConnFits reports whether a leader may hold a connection of a client
// with options o: not Sentinel's failover client, a pool of at least
// minPoolForConn, so that the client's other users are not left waiting
// for one, and no MaxActiveConns below PoolSize. go-redis turns a
// request over MaxActiveConns into ErrPoolExhausted at once, where one
// over PoolSize waits up to PoolTimeout: a connection held under such a
// hard cap would turn the waits of the client's other users into errors.
func ownConnFits(o *redis.Options) bool {
	return o.Addr != failoverAddr && o.PoolSize >= minPoolForConn &&
		(o.MaxActiveConns <= 0 || o.MaxActiveConns >= o.PoolSize)
}

// leaderConnIdle is how long a leader waits for the next request before
// it gives its connection back: longer than the gap between the rounds
// of back-to-back calls, shorter than a server restart.
const leaderConnIdle = time.Millisecond

// leaderConnCheck is how often a parked leader that holds a connection
// checks whether it has been idle for leaderConnIdle; so an idle leader
// gives its connection back within about leaderConnCheck. The check is
// a timer firing that often while the connection is held, and its cost
// shows: back-to-back TryLock+Unlock cycles measured about 11% more
// client CPU with a 5ms check and about 4% with 20ms (4 interleaved
// runs each, against no check).
const leaderConnCheck = 20 * time.Millisecond

// leaderConnAge is how long a leader keeps a connection before it gives
// it back to the pool and takes one again.
// go-redis skips its check for RESP3 push notifications before and after
// each command only on a connection put back in the pool less than 5s
// ago; on one held longer, or never put back yet (a new one), each
// request pays that check twice, a syscall and three allocations each:
// more than the checkout saved. Giving the connection back often keeps
// it fresh, and bounds how long a hook added to the client, or a
// connection gone stale, goes unseen; taking one costs the pool's
// checkout and a goroutine, once per leaderConnAge.
const leaderConnAge = 100 * time.Millisecond

// get returns what the leader of nd sends through, and whether it is the
// leader's own connection.
//
// Taking a connection does not hold up a request: the Watch that takes
// it runs on a goroutine of its own, and until that goroutine has it,
// requests go through the pool. Waiting for it, the leader waited for
// the scheduler to run a new goroutine: about 4ms a take under load
// (256 goroutines, -race), while the node's requests queued.
func (lc *leaderConn) get(nd *node) (sender, bool) {
	now := time.Now()
	if lc.tx != nil {
		if now.Before(lc.until) {
			return lc.tx, true
		}
		lc.drop()
	}
	if lc.got != nil {
		select {
		case tx := <-lc.got:
			lc.tx, lc.got, lc.ended = tx, nil, nil
			lc.until = now.Add(leaderConnAge)
			return tx, true
		case <-lc.ended: // Watch returned without calling back: not expected
			lc.off = true
			lc.got, lc.ended, lc.done = nil, nil, nil
			return nd.c, false
		default: // still taking
			return nd.c, false
		}
	}
	if lc.off || !nd.identified.Load() {
		return nd.c, false // a first contact goes through the pool
	}
	rc, ok := nd.c.(*redis.Client)
	if !ok || !ownConnFits(rc.Options()) {
		lc.off = true
		return nd.c, false
	}
	if lc.slots == nil {
		lc.slots = connSlotsOf(rc)
	}
	if !lc.slots.take() {
		return nd.c, false // the client's leaders hold their share: look again next time
	}
	lc.take(rc, lc.slots)
	return nd.c, false
}

// take starts a Watch on rc that hands its Tx to the leader (on lc.got)
// and holds it until lc.done is closed; the slot taken from slots is
// given back once the Watch has returned the connection to the pool.
func (lc *leaderConn) take(rc *redis.Client, slots *connSlots) {
	got := make(chan *redis.Tx, 1)
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		defer slots.give()
		// A panic in go-redis here would end the process: it is taken
		// as a Watch that returned (no connection of our own).
		defer func() { _ = recover() }()
		if hook := testHookTake.Load(); hook != nil {
			(*hook)()
		}
		_ = rc.Watch(context.Background(), func(tx *redis.Tx) error {
			got <- tx // buffered: never blocks
			<-done
			return nil
		})
	}()
	lc.got, lc.ended, lc.done = got, ended, done
}

// testHookTake, if set by a test, runs on the goroutine of every take
// before its Watch. It is atomic: a take goroutine of an earlier test's
// Client may still be starting when the next test sets or clears it.
var testHookTake atomic.Pointer[func()]

// holds reports whether the leader holds a connection, or is taking one.
func (lc *leaderConn) holds() bool { return lc.done != nil }

// drop gives the connection back to the pool, which discards it if
// go-redis found it broken, or ends a take in progress. It does not
// wait: the goroutine that holds (or will hold) the Tx's Watch gives it
// back when it next runs. Waiting for it, the leader waited for the
// scheduler: under load (256 goroutines, -race) about 2.5ms a drop, and
// the node's requests queued meanwhile.
func (lc *leaderConn) drop() {
	if lc.done != nil {
		close(lc.done)
	}
	lc.tx, lc.done, lc.got, lc.ended = nil, nil, nil, nil
}

// closedUnder reports whether err says that the connection was closed
// under a request: what the pool's health check finds on a connection
// that broke while idle.
func closedUnder(err error) bool {
	return err != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE))
}
