package redlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Background retries of releases that failed.
//
// A release that did not get a definite answer from its node (a timeout,
// a dropped connection, a request refused before it was sent because
// the node's queue was full) may leave our token on that node for the
// key's whole TTL: nobody can win the key there, and with enough such
// nodes nobody can win it at all. So every failed release of a token
// we may have set (the clean-up of a lost or cancelled attempt, and the
// nodes an Unlock could not reach in time) is queued here and retried
// until the node answers, the key's TTL has passed (it has expired by
// itself), the go-redis client is closed, or Client.Close.
//
// Bounds: one goroutine per node at most, and only while that node has
// releases queued; at most maxRetries queued per node (beyond that a
// release is dropped: its key expires with its TTL). The caller never
// waits for a retry.

// retryQueue holds one node's releases to retry.
type retryQueue struct {
	mu      sync.Mutex
	items   []retryItem
	running bool // a retryLoop runs for this node
}

// retryItem is one release to retry.
type retryItem struct {
	req     *request
	until   time.Time // the key has expired on the node by then: give up
	next    time.Time // not before
	tries   int
	checked bool // a recheck is done or scheduled (see retryBatch)
}

const (
	maxRetries     = 1 << 16                // queued releases per node
	retryFirst     = 5 * time.Millisecond   // first delay, doubled per failure
	retryMaxDelay  = 500 * time.Millisecond // delay cap
	retryFinalWait = ReleaseTimeout         // Close's last attempt, per node
	// retryRecheck is how long after a release that found nothing, where
	// the request it undoes may still land, the release is tried again.
	retryRecheck = time.Second
)

// retryRelease queues req, a release that failed on nd, for a retry. ttl
// is the TTL the released token was set with; err the failure. With a
// positive recheck, req did not fail but found nothing while the request
// it undoes may still land: it is tried once more, that much later.
// Releases of a closed go-redis client, and every release after Close,
// are dropped: the keys expire with their TTL.
func (c *Client) retryRelease(nd *node, req *request, ttl time.Duration, err error, recheck time.Duration) {
	if errors.Is(err, redis.ErrClosed) || req.userToken {
		// A token given with WithToken may be reused by a later lock,
		// which a retry sent after it would delete: not retried.
		return
	}
	now := time.Now()
	it := retryItem{
		req:   req,
		until: now.Add(ttl + drift(ttl, c.cfg.driftFactor)),
		next:  now.Add(jitter(retryFirst)),
	}
	if recheck > 0 {
		it.next, it.checked = now.Add(recheck), true
	}
	q := &nd.retry
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) >= maxRetries {
		c.logDroppedRetry(nd, req)
		return
	}
	if !q.running {
		// The loop takes q.mu first, so it sees the item added below.
		if !c.spawn(func() error { c.retryLoop(nd); return nil }, false) {
			c.logDroppedRetry(nd, req) // after Close
			return
		}
		q.running = true
	}
	q.items = append(q.items, it)
}

// retryLoop retries nd's queued releases until none is left.
func (c *Client) retryLoop(nd *node) {
	q := &nd.retry
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		closing := c.isClosed()
		q.mu.Lock()
		due, wait := q.takeDueLocked(time.Now(), closing)
		if len(due) == 0 && wait == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		if len(due) == 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-c.closed:
			}
			continue
		}
		failed := c.retryBatch(nd, due, closing)
		if closing {
			// Close: one last attempt each, and no more.
			q.mu.Lock()
			clear(q.items)
			q.items = q.items[:0]
			q.running = false
			q.mu.Unlock()
			return
		}
		if len(failed) > 0 {
			q.mu.Lock()
			q.items = append(q.items, failed...)
			q.mu.Unlock()
		}
	}
}

// takeDueLocked removes and returns the items due at now (every item
// when closing), dropping those whose key has expired. When none is due
// it returns how long until the next one, or 0 when the queue is empty.
func (q *retryQueue) takeDueLocked(now time.Time, closing bool) (due []retryItem, wait time.Duration) {
	kept := q.items[:0]
	var next time.Time
	for _, it := range q.items {
		switch {
		case now.After(it.until):
			// Expired by itself on the node: nothing left to release.
		case closing || !it.next.After(now):
			due = append(due, it)
		default:
			kept = append(kept, it)
			if next.IsZero() || it.next.Before(next) {
				next = it.next
			}
		}
	}
	clear(q.items[len(kept):])
	q.items = kept
	if len(due) == 0 && !next.IsZero() {
		wait = max(next.Sub(now), time.Millisecond)
	}
	return due, wait
}

// retryBatch tries each due release once, in order, and returns those to
// try again, with their next attempt scheduled. A node that fails one
// is not asked the rest this time: they wait for the same back-off.
//
// A release that failed before and now finds nothing is tried once more,
// retryRecheck later: the attempts that failed, or the acquire it
// undoes, may have been held in a stopped server's socket and run after
// this one once it resumed.
func (c *Client) retryBatch(nd *node, due []retryItem, closing bool) (again []retryItem) {
	timeout := max(c.cfg.nodeTimeout, ReleaseTimeout)
	if closing {
		timeout = retryFinalWait
	}
	var deadline time.Time
	if closing {
		deadline = time.Now().Add(retryFinalWait)
	}
	for k, it := range due {
		if closing && time.Now().After(deadline) {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		r := c.exec(ctx, nd, it.req)
		cancel()
		if r.st != NodeFailed {
			// The node answered: released, or not ours.
			if r.st != NodeOK && !it.checked && !closing {
				it.checked = true
				it.next = time.Now().Add(retryRecheck)
				again = append(again, it)
			}
			continue
		}
		if errors.Is(r.err, redis.ErrClosed) {
			return nil // the go-redis client is closed: nothing can be sent
		}
		for _, rest := range due[k:] {
			if rest.req == it.req && rest.checked && r.st != NodeFailed {
				continue
			}
			rest.tries++
			d := min(retryFirst<<min(rest.tries, 10), retryMaxDelay)
			rest.next = time.Now().Add(jitter(d))
			again = append(again, rest)
		}
		return again
	}
	return nil
}

// pendingReleases returns how many releases wait for a retry, over
// every node.
func (c *Client) pendingReleases() int {
	n := 0
	for _, nd := range c.nodes {
		nd.retry.mu.Lock()
		n += len(nd.retry.items)
		nd.retry.mu.Unlock()
	}
	return n
}

// spawn runs f on a goroutine of the client's group, which Close waits
// for. After Close it runs f on a goroutine of its own when always is
// set (the pipe leaders of the rounds still allowed: Extend, Unlock), and
// not at all otherwise (retry loops), and reports whether it ran f. goMu
// makes every g.Go happen before Close's Wait: a Wait does not race an
// Add of the same group.
func (c *Client) spawn(f func() error, always bool) bool {
	c.goMu.RLock()
	if !c.isClosed() {
		c.g.Go(f)
		c.goMu.RUnlock()
		return true
	}
	c.goMu.RUnlock()
	if always {
		go func() { _ = f() }()
	}
	return always
}

// isClosed reports whether Close was called.
func (c *Client) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// closeWait bounds Close's wait for the retry loops' last attempts.
const closeWait = 2 * retryFinalWait

// Close ends the client's background work and waits for it, so that a
// process may exit right after it: the releases still in flight (see
// Unlock) get up to ReleaseTimeout to be answered, then the releases
// still being retried get one last attempt each, bounded by
// ReleaseTimeout per node, and are dropped; their keys expire with their
// TTL. Close returns within about 3*ReleaseTimeout (750ms) in all, even
// when a stalled node holds a request of a go-redis client that has no
// read timeout (that request's goroutine then ends with it). Locks already held can still be extended and unlocked, but a
// release that fails after Close is not retried, and new acquisitions
// return an error matching ErrClosed (and ErrInvalid). It closes the
// go-redis clients of a Client made by Dial, last, and not those given
// to New. Close is idempotent and returns nil; on a nil or zero Client
// it does nothing.
func (c *Client) Close() error {
	if c == nil || c.closed == nil {
		return nil
	}
	c.flights.wait(ReleaseTimeout)
	c.goMu.Lock()
	c.closeOnce.Do(func() { close(c.closed) })
	c.goMu.Unlock()
	// Every goroutine of the group (pipe leaders, retry loops) was
	// started before this Wait. Bounded: a node whose go-redis client
	// has no read timeout and does not honour context deadlines can hold
	// a request forever; the retry loops' last attempts are bounded by
	// retryFinalWait each.
	waitTimeout(func() { _ = c.g.Wait() }, closeWait) // its goroutines return nil: failures are outcomes
	c.ownedOnce.Do(func() { closeClients(c.owned) })
	return nil
}

// Close is Client.Close for the MultiLock's client. It returns nil; on a
// nil or zero MultiLock it does nothing.
func (m *MultiLock) Close() error {
	if m == nil {
		return nil
	}
	return m.c.Close()
}
