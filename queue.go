package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// Waiting in line: how many Lock calls on one key share the nodes
// without a herd (docs/contention.md).
//
// In one Client, the Lock calls on a key form a line, first come first
// served: only the front one sends attempts to the nodes; the others
// wait in process and take its place when it returns. So however many
// goroutines wait, a Client costs the nodes what one waiter does.
//
// Across Clients, each node keeps a wait queue per key lock: a sorted
// set of the waiting Clients' ids, each scored by its ticket, the time
// its line began to wait (key/acquire_queued.lua). Every node orders the
// same waiters alike, so the nodes agree on who is next and votes do not
// split. An Unlock pops the head off each node's queue, reserves the key
// for it there for a moment instead of deleting it, and announces the
// release naming it (key/release_one.lua): that waiter alone is woken,
// and a newcomer's SET cannot slip in before it. A Client that has more
// goroutines waiting queues again, at the back, as it is granted the
// key.
//
// The queue is a hint and nothing more: a grant is always the
// compare-and-set on a quorum that it is without a queue, so mutual
// exclusion, validity and fencing do not depend on it. What the queue
// can lose (a node restarted empty, a waiter that died in it, an entry
// on some nodes only) costs fairness or a reservation's time, never
// safety:
//   - the queue expires queueLife after its last write, and every
//     waiter writes at least every queuePoll;
//   - a waiter named by a release but gone leaves the key reserved for
//     reserveFor, after which the next attempt to find the key free
//     names the next head;
//   - a node that lost its queue receives it back from the waiters'
//     next attempts, under their first tickets.

// queueFor returns the queue part of a waiting Lock's attempts on keys,
// or nil when the key has no queue: the family, several keys, fencing
// (its acquire has a script of its own), WithHandoff(false), and a
// sharded node set where the key's queue would lie in another slot.
func queued(c *Client, keys []string, cfg *config, fam *family) bool {
	if fam != nil || len(keys) != 1 || cfg.fencing || cfg.noHandoff {
		return false
	}
	return queueable(c, keys[0], cfg.prefix)
}

// queueable reports whether a key lock on key (stored after prefix) has
// a wait queue: always, but on sharded nodes for a key without a hash
// tag, whose queue key would hash elsewhere.
func queueable(c *Client, key, prefix string) bool {
	k := prefix + key
	return c.shard == shardNone || hashTag(k) != k
}

// queuePoll is how often a queued waiter that is not next checks in:
// its attempt keeps its entry alive, and finds a release whose
// announcement it missed. queueLife is how long a queue outlives its
// last write.
func queuePoll(cfg *config) time.Duration {
	return min(max(5*cfg.retryDelay, 100*time.Millisecond), time.Second)
}

func queueLife(cfg *config) time.Duration { return 4 * queuePoll(cfg) }

// namedFor is how long a waiter named by a release stays the one
// expected: long enough for its attempt to follow the announcement,
// short enough that one that died holds nobody up for long.
func namedFor(cfg *config) time.Duration {
	return min(max(2*cfg.retryDelay, 20*time.Millisecond), 200*time.Millisecond)
}

// newWaiterID returns a Client's id in the nodes' queues.
func newWaiterID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// lines holds a Client's lines, by key. The zero value is ready.
type lines struct {
	mu sync.Mutex
	m  map[string]*line
	h  *hub // the Client's: a line's hub waiter leaves with the line
}

// line is the Lock calls of one Client waiting on one key.
type line struct {
	n    int             // calls in the line, the front one included
	next []chan struct{} // the calls behind the front, oldest first
	// The front call's alone (handed on with the front):
	ticket int64   // the Client's ticket in the nodes' queue; 0: none
	w      *waiter // the hub waiter; nil until the key was found held
	// The hand-on (handon.go): the front call's request to be handed the
	// key, and how many more times this Client's Unlocks may hand it on.
	ask    *baton
	budget int
}

// enter joins the line for key and returns once the call is at its
// front, or ctx's error when ctx ends first; waited reports whether it
// waited behind another call.
func (ls *lines) enter(ctx contextLike, key string) (ln *line, waited bool, err error) {
	ls.mu.Lock()
	if ls.m == nil {
		ls.m = make(map[string]*line)
	}
	ln = ls.m[key]
	if ln == nil {
		ln = &line{}
		ls.m[key] = ln
	}
	ln.n++
	if ln.n == 1 {
		ls.mu.Unlock()
		return ln, false, nil
	}
	ch := make(chan struct{})
	ln.next = append(ln.next, ch)
	ls.mu.Unlock()
	select {
	case <-ch:
		return ln, true, nil
	case <-ctx.Done():
	}
	ls.mu.Lock()
	for i, c := range ln.next {
		if c == ch {
			ln.next = append(ln.next[:i], ln.next[i+1:]...)
			ln.n--
			ls.mu.Unlock()
			return nil, true, ctx.Err()
		}
	}
	ls.mu.Unlock()
	// Handed the front as ctx ended: hand it on.
	ls.leave(key, ln)
	return nil, true, ctx.Err()
}

// leave hands ln's front to the next call, or closes the line; the hub
// waiter goes with the line and leaves the hub with it.
func (ls *lines) leave(key string, ln *line) {
	ls.mu.Lock()
	ln.n--
	if len(ln.next) > 0 {
		ch := ln.next[0]
		ln.next = ln.next[1:]
		ls.mu.Unlock()
		close(ch)
		return
	}
	delete(ls.m, key)
	w := ln.w
	ln.w = nil
	ls.mu.Unlock()
	if w != nil && ls.h != nil {
		ls.h.leave(w)
	}
}

// setTicket records the line's ticket, for the front call's hub waiter
// too (see hub.wakeKey).
func (ln *line) setTicket(t int64) {
	ln.ticket = t
	if ln.w != nil {
		ln.w.ticket.Store(t)
	}
}

// contextLike is the part of context.Context that enter needs.
type contextLike interface {
	Done() <-chan struct{}
	Err() error
}

// lineKey names the line of a Lock call: its kind and keys.
func lineKey(keys []string, fam *family) string {
	if fam != nil {
		name := fam.name
		if fam.kind == kindPath {
			// Paths of one tree conflict with each other: one line per
			// tree, so that a Client sends one attempt on it at a time.
			name, _, _ = strings.Cut(strings.TrimPrefix(name, "/"), "/")
		}
		return fam.kind.String() + "\x00" + name
	}
	if len(keys) == 1 {
		return keys[0]
	}
	k := ""
	for _, s := range keys {
		k += s + "\x00"
	}
	return k
}

// checkIn sends a check-in of ln's front call, waiting on key, to the
// key's queue node (key/queue.lua), bounded by the per-node timeout: it
// joins the queue (or keeps its place), and learns whether the key is
// free with the call next in line (StatusOK: attempt now).
func queueCheckIn(ctx context.Context, c *Client, ln *line, key string, ttl time.Duration, cfg *config) wire.Reply {
	if ln.ticket == 0 {
		ln.setTicket(time.Now().UnixMicro())
	}
	req := &request{prefix: cfg.prefix, keys: []string{key}}
	req.w.Op = wire.OpQueue
	req.w.Queue = &wire.Queue{ID: c.hub.id, Ticket: ln.ticket, Life: queueLife(cfg), Named: namedFor(cfg)}
	req.prepare(1)
	timeout := cfg.timeoutFor(ttl)
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	done := make(chan wire.Reply, 1)
	// On a goroutine of the Client's group: go-redis may not honour the
	// deadline (ContextTimeoutEnabled off), and the wait must end at
	// the per-node timeout or ctx, whichever is first; Close waits for
	// the request.
	if !c.spawn(func() error {
		defer cancel()
		done <- exec(nctx, c, c.nodes[queueNode(cfg.prefix, key, len(c.nodes))], req)
		return nil
	}, false) {
		cancel()
		return wire.Reply{St: wire.StatusFailed, Err: ErrClosed}
	}
	t := getTimer(timeout)
	defer putTimer(t)
	select {
	case r := <-done:
		return r
	case <-t.C:
		return wire.Reply{St: wire.StatusFailed, Err: node.ErrNodeTimeout}
	case <-ctx.Done():
		return wire.Reply{St: wire.StatusFailed, Err: ctx.Err()}
	}
}

// queueNode returns the index of the node that keeps the wait queue of
// key (stored after prefix), among n. Were it down, waiters fall back to
// retrying after a jittered delay, as without a queue.
func queueNode(prefix, key string, n int) int {
	return wire.QueueNode(prefix+key, n)
}
