package node

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/wire"
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
	req     *wire.Request
	keys    []string  // as the caller gave them, for the host's log
	until   time.Time // the key has expired on the node by then: give up
	next    time.Time // not before
	tries   int
	checked bool // a recheck is done or scheduled (see retryBatch)
}

const (
	maxRetries    = 1 << 16                // queued releases per node
	retryFirst    = 5 * time.Millisecond   // first delay, doubled per failure
	retryMaxDelay = 500 * time.Millisecond // delay cap
	// RetryRecheck is how long after a release that found nothing, where
	// the request it undoes may still land, the release is tried again.
	RetryRecheck = time.Second
)

// RetryRelease queues req, a prepared release that failed on nd, for a
// retry until until, when the key has expired on the node by itself.
// keys are the caller's, for the host's log. With a positive recheck,
// req did not fail but found nothing while the request it undoes may
// still land: it is tried once more, that much later. Every release
// after Close is dropped: the keys expire with their TTL.
func (nd *Node) RetryRelease(req *wire.Request, keys []string, until time.Time, recheck time.Duration) {
	now := time.Now()
	it := retryItem{
		req:   req,
		keys:  keys,
		until: until,
		next:  now.Add(nd.h.Jitter(retryFirst)),
	}
	if recheck > 0 {
		it.next, it.checked = now.Add(recheck), true
	}
	q := &nd.retry
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) >= maxRetries {
		nd.h.DroppedRetry(nd, keys)
		return
	}
	if !q.running {
		// The loop takes q.mu first, so it sees the item added below.
		if !nd.h.Spawn(func() error { nd.retryLoop(); return nil }, false) {
			nd.h.DroppedRetry(nd, keys) // after Close
			return
		}
		q.running = true
	}
	q.items = append(q.items, it)
}

// retryLoop retries nd's queued releases until none is left.
func (nd *Node) retryLoop() {
	q := &nd.retry
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		closing := nd.isClosed()
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
			case <-nd.h.Closed:
			}
			continue
		}
		failed := nd.retryBatch(due, closing)
		if closing {
			// Close: one last attempt each, and no more. What failed it,
			// and what was queued meanwhile, is dropped, and said so.
			q.mu.Lock()
			failed = append(failed, q.items...)
			clear(q.items)
			q.items = q.items[:0]
			q.running = false
			q.mu.Unlock()
			for _, it := range failed {
				nd.h.DroppedRetry(nd, it.keys)
			}
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
// When closing, it returns those Close's last attempt did not release.
//
// A release that failed before and now finds nothing is tried once more,
// RetryRecheck later: the attempts that failed, or the acquire it
// undoes, may have been held in a stopped server's socket and run after
// this one once it resumed.
func (nd *Node) retryBatch(due []retryItem, closing bool) (again []retryItem) {
	timeout := nd.h.RetryTimeout
	if closing {
		timeout = nd.h.FinalWait
	}
	var deadline time.Time
	if closing {
		deadline = time.Now().Add(nd.h.FinalWait)
	}
	for k, it := range due {
		if closing && time.Now().After(deadline) {
			return append(again, due[k:]...) // not tried: dropped
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		r := nd.Exec(ctx, it.req)
		cancel()
		if r.St != wire.StatusFailed {
			// The node answered: released, or not ours.
			if r.St != wire.StatusOK && !it.checked && !closing {
				it.checked = true
				it.next = time.Now().Add(RetryRecheck)
				again = append(again, it)
			}
			continue
		}
		if errors.Is(r.Err, redis.ErrClosed) {
			// The go-redis client is closed: nothing can be sent.
			for _, rest := range due[k:] {
				nd.h.DroppedRetry(nd, rest.keys)
			}
			return nil
		}
		for _, rest := range due[k:] {
			if rest.req == it.req && rest.checked && r.St != wire.StatusFailed {
				continue
			}
			rest.tries++
			d := min(retryFirst<<min(rest.tries, 10), retryMaxDelay)
			rest.next = time.Now().Add(nd.h.Jitter(d))
			again = append(again, rest)
		}
		return again
	}
	return nil
}

// PendingReleases returns how many releases wait for a retry on nd.
func (nd *Node) PendingReleases() int {
	nd.retry.mu.Lock()
	defer nd.retry.mu.Unlock()
	return len(nd.retry.items)
}
