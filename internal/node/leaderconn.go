package node

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

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

// A node's pipe leader (pipeline.go) sends on a go-redis connection of its
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
// pool initializes another is a data race. A Tx takes a copy of the options, under the client's
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
// (ConnSlots). go-redis copies
// a client's hooks into a Tx when it makes it: a hook added to a client
// after its first lock request reaches the leader's requests once the
// connection is replaced, within leaderConnAge.
type leaderConn struct {
	tx    *redis.Tx
	done  chan struct{} // closed to end the Watch that holds tx, or will
	until time.Time     // give it back then (leaderConnAge)
	off   bool          // the node's client is not one for a connection of its own
	slots *ConnSlots    // its client's (connslots.go), once looked up
	// A take in progress (see get): the Watch goroutine sends the Tx on
	// got, or closes ended if Watch returned without one.
	got   chan *redis.Tx
	ended chan struct{}
}

// MinPoolForConn is the smallest go-redis pool a leader takes a
// connection from.
const MinPoolForConn = 4

// ownConnFits reports whether a leader may hold a connection of a client
// with options o: not Sentinel's failover client, a pool of at least
// MinPoolForConn, so that the client's other users are not left waiting
// for one, and no MaxActiveConns below PoolSize. go-redis turns a
// request over MaxActiveConns into ErrPoolExhausted at once, where one
// over PoolSize waits up to PoolTimeout: a connection held under such a
// hard cap would turn the waits of the client's other users into errors.
func ownConnFits(o *redis.Options) bool {
	return o.Addr != FailoverAddr && o.PoolSize >= MinPoolForConn &&
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
// shows on back-to-back TryLock+Unlock cycles: about 11% more client CPU
// with a 5ms check, about 4% with 20ms.
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
func (lc *leaderConn) get(nd *Node) (sender, bool) {
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
			return nd.C, false
		default: // still taking
			return nd.C, false
		}
	}
	if lc.off || !nd.identified.Load() {
		return nd.C, false // a first contact goes through the pool
	}
	rc, ok := nd.C.(*redis.Client)
	if !ok || !ownConnFits(rc.Options()) {
		lc.off = true
		return nd.C, false
	}
	if lc.slots == nil {
		lc.slots = ConnSlotsOf(rc)
	}
	if !lc.slots.take() {
		return nd.C, false // the client's leaders hold their share: look again next time
	}
	lc.take(rc, lc.slots, &nd.held)
	return nd.C, false
}

// take starts a Watch on rc that hands its Tx to the leader (on lc.got)
// and holds it until lc.done is closed; the slot taken from slots is
// given back, and held told, once the Watch has returned the connection
// to the pool.
func (lc *leaderConn) take(rc *redis.Client, slots *ConnSlots, held *Count) {
	got := make(chan *redis.Tx, 1)
	done, ended := make(chan struct{}), make(chan struct{})
	held.Add(1)
	go func() {
		defer held.Done()
		defer close(ended)
		defer slots.give()
		// A panic in go-redis here would end the process: it is taken
		// as a Watch that returned (no connection of our own).
		defer func() { _ = recover() }()
		if hook := takeHook.Load(); hook != nil {
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

// takeHook, if set by a test (SetTakeHook), runs on the goroutine of
// every take before its Watch. It is atomic: a take goroutine of an
// earlier test's Client may still be starting when the next test sets
// or clears it.
var takeHook atomic.Pointer[func()]

// SetTakeHook makes f run on the goroutine of every take of a leader's
// connection, before its Watch; nil clears it. For tests.
func SetTakeHook(f func()) {
	if f == nil {
		takeHook.Store(nil)
		return
	}
	takeHook.Store(&f)
}

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
