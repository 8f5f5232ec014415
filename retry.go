package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// lock retries tryLock with jittered delays until it wins, ctx is done or
// the retry budget is spent. Once the key is found held it also waits for
// the holder's release announcement (pubsub.go), whichever comes first.
func (c *Client) lock(ctx context.Context, keys []string, ttl time.Duration, cfg *config, fam *family) (*Lock, error) {
	// Every attempt has a token of its own. Were one token reused, the
	// release of an earlier, lost attempt that reached a slow node late
	// could delete the key a later, winning attempt had just set there,
	// and a contender could then take that node: two holders.
	if cfg.token != "" {
		return nil, invalidf("WithToken applies to TryLock only: retries under one token could release each other's keys")
	}
	var intent time.Duration
	if fam == nil {
		intent = writerMark(cfg.retryDelay, cfg.timeoutFor(ttl))
	}
	var timer *time.Timer
	var w *waiter // pub/sub hand-off, joined once the key is found held
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if w != nil {
			c.hub.leave(w)
		}
	}()
	// last is the error of the last attempt that completed: when ctx
	// ends the wait, it says why the lock was not had (held, nodes
	// down), which ctx's error alone does not.
	var last error
	for try := 1; ; try++ {
		token, err := cfg.newToken()
		if err != nil {
			return nil, err
		}
		var wake <-chan struct{}
		if w != nil {
			w.drain() // this attempt sees the releases announced so far
			wake = w.wake
		}
		local := c.hub.local.Load()
		l, err := c.tryLock(ctx, keys, ttl, token, cfg, fam, markFor(ctx, intent))
		if err == nil || !retryable(err) {
			if err != nil && last != nil && ctx.Err() != nil && !errors.Is(err, ErrInvalid) {
				// Cut short by ctx, with nodes still pending: the
				// completed attempt before it says more.
				return nil, waitEnded(last, ctx.Err())
			}
			return l, err
		}
		last = err
		if cfg.maxTries > 0 && try >= cfg.maxTries {
			return nil, err
		}
		if w == nil && !cfg.noHandoff && errors.Is(err, ErrContended) {
			on := keys // the keys whose releases wake us
			if fam != nil {
				on = fam.wake
			}
			w = c.hub.join(c, on, fam != nil && fam.kind == kindRead, false)
			wake = w.wake
			if c.hub.local.Load() != local {
				// One of this Client's Unlocks ran before the join and
				// may have freed the key: its wake found no waiter.
				w.notify()
			}
		}
		d := jitter(cfg.retryDelay)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-wake: // a release, or the subscription is ready
		case <-ctx.Done():
			return nil, waitEnded(last, ctx.Err())
		}
	}
}

// waitEnded is the error of a wait that ctx ended (ctxErr) after an
// attempt that failed with last: it matches ErrNotObtained, ctxErr and
// last's reasons (ErrContended, ErrUnreachable, ...), and errors.As
// reaches last's *QuorumError, with every node's answer to that attempt.
// last itself is not changed: an observer may hold it.
func waitEnded(last, ctxErr error) error {
	var qe *QuorumError
	if !errors.As(last, &qe) {
		return errors.Join(ErrNotObtained, ctxErr, last)
	}
	ended := *qe
	ended.waitErr = ctxErr
	return &ended
}

// retryable reports whether another attempt may succeed: not for an
// invalid call, a cancelled one, nor one that values of a foreign type
// at the keys alone lost (foreignBlocked).
func retryable(err error) bool {
	return !foreignBlocked(err) &&
		!errors.Is(err, ErrInvalid) &&
		!errors.Is(err, context.Canceled) &&
		!errors.Is(err, context.DeadlineExceeded)
}

// foreignBlocked reports whether err is a lost round in which more
// nodes failed with WRONGTYPE than the quorum can spare: values that
// none of our kinds writes sit at the lock's keys (see internal/wire). Those
// are the nodes' answers, not an outage: no retry can win until someone
// removes the values, so Lock returns the error rather than wait for
// them.
func foreignBlocked(err error) bool {
	return failedBeyondQuorum(err, wire.IsWrongType)
}

// deniedByACL reports whether err is a lost round in which more nodes
// refused a command by their ACL than the quorum can spare: not an
// outage, and no retry gets past it.
func deniedByACL(err error) bool {
	return failedBeyondQuorum(err, wire.IsACLDenied)
}

// failedBeyondQuorum reports whether err is a lost round in which more
// nodes failed with an error that is accepts than the quorum can spare.
func failedBeyondQuorum(err error, is func(error) bool) bool {
	var qe *QuorumError
	if !errors.As(err, &qe) {
		return false
	}
	n := 0
	for _, r := range qe.Nodes {
		if r.Status == NodeFailed && r.Err != nil && is(r.Err) {
			n++
		}
	}
	return n > len(qe.Nodes)-qe.Quorum
}
