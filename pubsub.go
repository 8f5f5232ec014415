package redlock

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// Pub/sub hand-off.
//
// Unlock's release script publishes on releaseChannel(key), on each node
// where it deleted the key; for a key lock of one key, on two of them,
// the key's queue node, whose message names the next waiter, and the
// node after it (queue.go). A Lock call that found the key contended
// joins its Client's hub, which holds one pattern subscription
// (PSUBSCRIBE redlock:release:*, after the key prefix if any) per node
// while any of the Client's Lock calls waits, and retries as soon as a
// release of one of its keys arrives instead of sleeping the rest of its
// retry delay. A message from any node is only a hint: the retry is an
// ordinary attempt.
//
// The last reader of a read lock announces its release with the message
// "r", a writer and a permit with an empty one. Waiting readers ignore
// "r": what refused them was a writer, or a waiting writer's mark (see
// Client.TryRLock), and the writer that "r" wakes should not have to
// race them for the key.
//
// A waiter of the releasing Client itself is woken at once, in process,
// when its Unlock has handed the release to every node (hub.wakeLocal):
// a node runs one Client's requests in order, so the waiter's attempt
// runs right behind the release, often in the same pipelined batch. It
// is a hint as a message is, and WithHandoff(false) turns it off too.
//
// The jittered delay stays as the fallback, since messages are lost when
// the holder's lock expires instead of being released, when a node is
// down, or between a subscription's loss and its renewal.
//
// No release is missed between the failed attempt and the subscription:
// a waiter that joins is woken once the subscription is confirmed on some
// node (at once, when it already is), and retries.
//
// The hub starts its subscriptions when the first waiter joins and
// closes them when the last one leaves, in the background: no goroutine
// outlives the waits by more than the time to close a connection.
// Releases of a lost attempt's partial grants are not published, so that
// split votes do not wake every waiter into another split.

// hub multiplexes the release subscriptions of one Client among its
// waiting Lock calls. The zero value is ready to use.
type hub struct {
	mu      sync.Mutex
	waiters map[string]map[*waiter]struct{} // by key
	n       int                             // waiters joined
	any     atomic.Bool                     // n > 0, read without mu by wakeLocal
	// local counts this Client's releases (wakeLocal), so that a Lock
	// whose attempt failed before it joined can tell that one of them
	// may have freed its key meanwhile (see Client.lock).
	local atomic.Uint64
	sess  *session // nil when no waiter
	id    string   // the Client's id in the nodes' wait queues (queue.go)
}

// waiter is one waiting Lock call.
type waiter struct {
	keys []string
	wake chan struct{} // buffered: wake-ups coalesce
	// reader: an RLock, which readers' releases do not wake (message
	// "r", read/release.lua): it waits for a writer's release, or for
	// a waiting writer's mark to end (see Client.RLock).
	reader bool
	// watch: an election's observer (Election.Observe), which the
	// election's own announcements (electedMsg) wake; they do not wake
	// the candidates, whom only a release concerns.
	watch bool
	// queued: a Lock call in its key's wait queue (queue.go), which a
	// release naming another waiter does not wake, nor its own Client's
	// release unless head says that it is next. Off while the key's
	// queue node fails: the waiter is woken as one without a queue.
	queued atomic.Bool
	head   atomic.Bool  // its last check-in found it next
	ticket atomic.Int64 // its line's ticket: a release naming another is old news
	named  atomic.Bool  // woken by a release that named it: attempt at once
}

// session is the set of subscriptions, one per node, of one busy period.
type session struct {
	chans     string // the channels' prefix: key prefix + releasePrefix
	subs      []*node.Subscription
	done      chan struct{}
	confirmed atomic.Bool // some node confirmed the subscription
	wg        sync.WaitGroup
}

// join registers a waiter for keys, starting the subscriptions if none
// run. The waiter is woken when the subscriptions are (or already were)
// confirmed, and on every release of one of its keys.
func (h *hub) join(c *Client, keys []string, reader, watch, queued bool) *waiter {
	w := &waiter{keys: keys, wake: make(chan struct{}, 1), reader: reader, watch: watch}
	w.queued.Store(queued)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiters == nil {
		h.waiters = make(map[string]map[*waiter]struct{})
	}
	for _, k := range keys {
		m := h.waiters[k]
		if m == nil {
			m = make(map[*waiter]struct{})
			h.waiters[k] = m
		}
		m[w] = struct{}{}
	}
	h.n++
	h.any.Store(true)
	if h.sess == nil {
		h.sess = h.start(c)
	}
	if h.sess.confirmed.Load() {
		w.notify()
	}
	return w
}

// leave unregisters w and, if it was the last waiter, closes the
// subscriptions in the background.
func (h *hub) leave(w *waiter) {
	h.mu.Lock()
	for _, k := range w.keys {
		if m := h.waiters[k]; m != nil {
			delete(m, w)
			if len(m) == 0 {
				delete(h.waiters, k)
			}
		}
	}
	h.n--
	var s *session
	if h.n == 0 {
		s, h.sess = h.sess, nil
		h.any.Store(false)
	}
	h.mu.Unlock()
	if s != nil {
		go s.stop()
	}
}

// start opens one subscription per node; h.mu is held. The
// subscriptions are created without I/O; each reader goroutine
// subscribes, so that a slow or dead node never holds up a Lock call.
func (h *hub) start(c *Client) *session {
	s := &session{chans: c.cfg.prefix + releasePrefix, done: make(chan struct{})}
	for _, nd := range c.nodes {
		ps := nd.Subscribe()
		s.subs = append(s.subs, ps)
		s.wg.Add(1)
		go s.read(h, ps)
	}
	return s
}

// stop closes the subscriptions and waits for the readers.
func (s *session) stop() {
	close(s.done)
	for _, ps := range s.subs {
		_ = ps.Close()
	}
	s.wg.Wait()
}

// read subscribes on one node and delivers its messages until stop.
func (s *session) read(h *hub, ps *node.Subscription) {
	defer s.wg.Done()
	ctx := context.Background()
	// An error leaves the pattern recorded; Receive reconnects and
	// subscribes again.
	_ = ps.Start(ctx, s.chans+"*")
	var backoff *time.Timer
	defer func() {
		if backoff != nil {
			backoff.Stop()
		}
	}()
	for {
		ev, err := ps.Receive(ctx)
		select {
		case <-s.done:
			return
		default:
		}
		if err != nil {
			// The node is down or the connection broke: try again a
			// little later, not in a tight loop.
			if backoff == nil {
				backoff = time.NewTimer(100 * time.Millisecond)
			} else {
				backoff.Reset(100 * time.Millisecond)
			}
			select {
			case <-s.done:
				return
			case <-backoff.C:
			}
			continue
		}
		if ev.Subscribed {
			// Newly (re)subscribed: a release may have gone unseen.
			s.confirmed.Store(true)
			h.wakeAll()
		} else if k, ok := strings.CutPrefix(ev.Channel, s.chans); ok {
			h.wakeKey(k, ev.Payload)
		}
	}
}

// readersLeft is the message of the last reader's release of a read
// lock; a writer's release, and a permit's, announce an empty message.
const readersLeft = "r"

// wakeKey wakes the waiters for k that a message msg concerns: when the
// last reader of k left (readersLeft), not the readers among them; for
// an election's announcement (electedMsg), only its observers.
//
// A release that names the queue's next waiter (wire.QueueMessage, its
// id and ticket) wakes that waiter alone among the queued ones, and no
// reader. A queued waiter is woken otherwise only by its own Client's
// release (localWake) when its last check-in found it next (the release
// on the key's queue node names it then), and by the last reader's
// release (readersLeft), which names nobody: it checks in then. A waiter whose line has since
// taken another ticket ignores a message naming the old one.
func (h *hub) wakeKey(k string, msg string) {
	id, ticket, isNamed := wire.ParseNamed(msg)
	h.mu.Lock()
	for w := range h.waiters[k] {
		switch {
		case msg == readersLeft && w.reader:
		case msg == electedMsg && !w.watch:
		case isNamed && (w.reader || (w.queued.Load() && (id != h.id || ticket != w.ticket.Load()))):
		case w.queued.Load() && msg == readersLeft:
			// Readers release without a queue: check in (Client.lock).
			w.notify()
		case w.queued.Load() && !isNamed && (msg != localWake || !w.head.Load()):
		case w.queued.Load():
			w.named.Store(true)
			w.notify()
		default:
			w.notify()
		}
	}
	h.mu.Unlock()
}

// localWake is wakeKey's message for a release of this Client's own.
const localWake = "\x00local"

// wakeLocal wakes this Client's waiters for keys, which its own Unlock
// has just handed to every node's pipe: their next attempt is queued
// behind the release on each node (a node runs a Client's requests in
// the order they were handed over; see internal/node), so it does not
// wait for the nodes' announcements. Like a message, it is a hint: the
// attempt is an ordinary one. It costs an atomic load when nobody waits.
func (h *hub) wakeLocal(keys []string) {
	h.local.Add(1)
	if !h.any.Load() {
		return
	}
	for _, k := range keys {
		h.wakeKey(k, localWake)
	}
}

func (h *hub) wakeAll() {
	h.mu.Lock()
	for _, m := range h.waiters {
		for w := range m {
			w.notify()
		}
	}
	h.mu.Unlock()
}

func (w *waiter) notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// drain discards wake-ups received so far: the next attempt sees their
// releases anyway.
func (w *waiter) drain() {
	select {
	case <-w.wake:
	default:
	}
}
