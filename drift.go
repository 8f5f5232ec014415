package redlock

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Clock arithmetic of the Redlock algorithm and of its retries: validity,
// deadline, per-node timeout, retry jitter and the writer's mark. Each is
// a function of its arguments alone (jitter also of a random draw), so
// that it can be table-tested without Redis.

const (
	// defaultDriftFactor is the share of the TTL allowed for the difference
	// between the rate of our clock and the nodes' expiry timers.
	defaultDriftFactor = 0.01

	// driftFloor is the fixed part of the drift allowance (the Redlock
	// spec's "+ 2 milliseconds" for the millisecond granularity of PX).
	driftFloor = 2 * time.Millisecond

	// minValidity is the smallest validity a TTL must leave after drift.
	// A TTL that cannot leave this much is rejected with ErrInvalid.
	minValidity = time.Millisecond

	// Bounds of the default per-node timeout, which is TTL/20 clamped to
	// [minNodeTimeout, maxNodeTimeout].
	minNodeTimeout = 5 * time.Millisecond
	maxNodeTimeout = 200 * time.Millisecond
)

// drift returns the clock-drift allowance for a lease of ttl:
// ttl*factor + 2ms.
func drift(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(math.Ceil(float64(ttl)*factor)) + driftFloor
}

// validity returns how long a lease of ttl remains safe when elapsed has
// passed since before the first request was sent: ttl - elapsed - drift.
// It is <= 0 once the lease can no longer be relied on.
func validity(ttl, elapsed time.Duration, factor float64) time.Duration {
	return ttl - elapsed - drift(ttl, factor)
}

// deadline returns when a lease of ttl whose first request was sent at
// start stops being safe: start + ttl - drift, the instant its validity
// reaches 0. It is the one place the deadline is computed.
func deadline(start time.Time, ttl time.Duration, factor float64) time.Time {
	return start.Add(validity(ttl, 0, factor))
}

// checkTTL reports whether ttl can leave at least minValidity after drift.
func checkTTL(ttl time.Duration, factor float64) bool {
	return ttl > 0 && validity(ttl, 0, factor) >= minValidity
}

// DefaultNodeTimeout returns the per-node timeout of a lock of ttl when
// none is set with WithNodeTimeout: ttl/20 clamped to [5ms, 200ms]. A
// 10s TTL gets 200ms, a 1s TTL 50ms. Tools that report or budget a
// lock's waits call it rather than repeat the formula.
func DefaultNodeTimeout(ttl time.Duration) time.Duration {
	d := ttl / 20
	if d < minNodeTimeout {
		d = minNodeTimeout
	}
	if d > maxNodeTimeout {
		d = maxNodeTimeout
	}
	return d
}

// quorum returns the number of votes needed among n nodes: n/2+1.
func quorum(n int) int { return n/2 + 1 }

// writerMark is how long a Lock attempt that readers refused marks the
// key (key/acquire.lua): new readers are refused until then, and each attempt
// renews the mark. Three mean retry delays (at least 100ms) plus the
// per-node timeout nodeTimeout: longer than the widest gap between
// attempts (jitter's 1.5 delays, plus an attempt, which a silent node
// can hold for nodeTimeout), with room for a stalled scheduler, so the
// mark lasts while the writer waits; and no longer than that after it
// stops waiting. It saturates: a retry delay of centuries (a writer that
// counts on the hand-off alone) marks for as long, not for a
// wrapped-around 3 x delay.
func writerMark(retryDelay, nodeTimeout time.Duration) time.Duration {
	if retryDelay > math.MaxInt64/3 {
		return math.MaxInt64
	}
	m := max(3*retryDelay, minWriterMark)
	if nodeTimeout > math.MaxInt64-m {
		return math.MaxInt64
	}
	return m + max(nodeTimeout, 0)
}

// markFor is the mark of an attempt made under ctx: mark (writerMark),
// but no longer than until ctx's deadline, if it has one (at least
// minWriterMark): a writer that will have given up by then does not hold
// new readers off after it, whatever its retry delay. 0 (no mark) stays 0.
func markFor(ctx context.Context, mark time.Duration) time.Duration {
	if mark <= 0 {
		return 0
	}
	if ctx == nil { // tryLock refuses it (ErrInvalid)
		return mark
	}
	if dl, ok := ctx.Deadline(); ok {
		mark = min(mark, max(time.Until(dl), minWriterMark))
	}
	return mark
}

// minWriterMark is writerMark's least.
const minWriterMark = 100 * time.Millisecond

// jitter draws a delay uniformly from [d/2, 3d/2), saturating at the
// largest Duration rather than wrapping around to a negative one.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	j := rand.N(d)
	if j > math.MaxInt64-d/2 {
		return math.MaxInt64
	}
	return d/2 + j
}

// semaphoreQuorum returns how many of nodes must grant a permit so that a
// semaphore of limit k never has more than k holders: floor(k*N/(k+1)) +
// 1. It returns 0 when nodes or limit is below 1.
//
// Why not a majority: with N = 5 and k = 2, holders A on nodes {0,1,2}, B
// on {2,3,4} and C on {0,1,3,4} leave no node above 2 permits, yet make 3
// holders. Proof that q = floor(kN/(k+1)) + 1 is enough: were k+1
// holders valid at once, each would hold a live permit on q nodes, (k+1)q
// permits in all, while the N nodes hold at most kN; but (k+1)q > kN.
// For k = 1 it is the majority N/2+1.
//
// What it costs: N - q nodes may be down (or refuse) and permits still be
// granted. For N = 5: limit 1 tolerates 2, limit 2 or 3 tolerates 1,
// limit 4 or more tolerates none; for N = 3: limit 1 tolerates 1, limit 2
// or more none.
func semaphoreQuorum(nodes, limit int) int {
	if nodes < 1 || limit < 1 {
		return 0
	}
	return limit*nodes/(limit+1) + 1
}
