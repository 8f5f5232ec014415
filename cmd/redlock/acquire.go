package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

// inflight counts the requests in flight on the go-redis clients, so that
// a failed wait can let the last round's stragglers land before the
// clients close.
//
// Why: an acquisition round is decided as soon as its outcome is known
// (for a lost one, once enough nodes said no), without waiting for the
// other nodes. A grant that arrives afterwards is released by the library
// in the background, but neither the request nor that release counts for
// Client.Close until the release starts; closing the clients while the
// request is still on the wire would leave the key on that node for its
// TTL. A won lock needs none of this: Unlock goes to every node, after the
// acquire on the same connection, and Close waits for it.
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n falls to 0; nil when nobody waits
}

var _ redis.Hook = (*inflight)(nil)

func (f *inflight) add(d int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n += d
	if f.n == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

// DialHook passes dials through.
func (f *inflight) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts a command while it runs.
func (f *inflight) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		f.add(1)
		defer f.add(-1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline while it runs.
func (f *inflight) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		f.add(1)
		defer f.add(-1)
		return next(ctx, cmds)
	}
}

// quiesce waits until no request is in flight, or for at most d. A grant
// that lands starts its clean-up release a moment after its reply, so
// quiet must last a millisecond to count.
func (f *inflight) quiesce(d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		f.mu.Lock()
		if f.n == 0 {
			f.mu.Unlock()
			time.Sleep(time.Millisecond)
			f.mu.Lock()
			if f.n == 0 {
				f.mu.Unlock()
				return
			}
		}
		if f.idle == nil {
			f.idle = make(chan struct{})
		}
		idle := f.idle
		f.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		t := time.NewTimer(left)
		select {
		case <-idle:
		case <-t.C:
		}
		t.Stop()
	}
}

// effectiveNodeTimeout returns the per-node timeout the lock uses.
func (c *runConfig) effectiveNodeTimeout() time.Duration {
	if c.nodeTimeout > 0 {
		return c.nodeTimeout
	}
	return redlock.DefaultNodeTimeout(c.ttl)
}

// errSignal cancels the wait for the lock when a signal arrives.
var errSignal = errors.New("interrupted by a signal")

// tail is what a failed bounded wait keeps of --wait for what follows the
// attempts: the last round's stragglers (up to two per-node timeouts, see
// inflight) and the read of the holders (why, up to r.probe), or half the
// wait when that is more than half of it.
func (c *runConfig) tail(r *runner) time.Duration {
	return min(c.wait.d/2, 2*c.effectiveNodeTimeout()+r.probe)
}

// acquire takes the lock, waiting as --wait says, or returns nil and the
// exit code. A forwarded signal ends the wait with 128+n. After a failure
// it waits, up to two per-node timeouts, for the requests still in
// flight (see inflight), then reads the holders to say why. end, when not
// zero, is when a bounded --wait is over, exit included: the attempts
// stop c.tail(r) before it, and what follows them ends by it.
func acquire(ctx context.Context, lk *redlock.Client, c *runConfig, r *runner, end time.Time, sigs <-chan os.Signal, stderr io.Writer) (*redlock.Lock, int) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if !end.IsZero() {
		var cancelT context.CancelFunc
		actx, cancelT = context.WithDeadline(actx, end.Add(-c.tail(r)))
		defer cancelT()
	}
	got := make(chan os.Signal, 1)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case s := <-sigs:
			got <- s
			cancel(errSignal)
		case <-done:
		}
	}()

	l, err := lk.TryLock(actx, c.key, c.ttl)
	if err != nil && (!c.wait.set || c.wait.d > 0) && !errors.Is(err, redlock.ErrInvalid) && actx.Err() == nil {
		if errors.Is(err, redlock.ErrUnreachable) {
			fmt.Fprintf(stderr, "redlock run: waiting for %q; nodes are failing:\n%s", c.key, r.nodeLines(err, nil))
		}
		l, err = lk.Lock(actx, c.key, c.ttl)
	}
	close(done)
	<-finished
	var sig os.Signal
	select {
	case sig = <-got:
	default:
	}
	if err != nil || sig != nil {
		d := 2 * c.effectiveNodeTimeout()
		if !end.IsZero() {
			d = min(d, time.Until(end)/2) // the rest is for why's read
		}
		r.flight.quiesce(d)
	}
	if sig != nil {
		if l != nil {
			_ = release(context.WithoutCancel(ctx), l)
		}
		fmt.Fprintf(stderr, "redlock run: %v while waiting for %q\n", sig, c.key)
		return nil, exitSignal + signalNumber(sig)
	}
	if err == nil {
		return l, exitOK
	}
	if errors.Is(err, redlock.ErrInvalid) {
		return nil, usageExit(r.usageError(err), "redlock run", stderr)
	}
	var when string
	switch {
	case c.wait.set && c.wait.d == 0:
		when = " (--wait 0: one attempt)"
	case c.wait.set:
		when = fmt.Sprintf(" within %v", c.wait.d)
	}
	wctx := ctx
	if !end.IsZero() {
		var cancelW context.CancelFunc
		wctx, cancelW = context.WithDeadline(ctx, end)
		defer cancelW()
	}
	why, now := r.why(wctx, err)
	fmt.Fprintf(stderr, "redlock run: lock %q not obtained%s: %s\n", c.key, when, why)
	fmt.Fprint(stderr, r.nodeLines(err, now))
	return nil, c.conflictCode
}

// closeBy closes lk, waiting for its clean-up until end at the latest
// when end is not zero: a bounded --wait ends by then, and what Close
// leaves (a release to a stalled node) expires with the TTL, as it does
// when Close gives up on it (see redlock.Client.Close).
func closeBy(lk *redlock.Client, end time.Time) {
	if end.IsZero() {
		_ = lk.Close()
		return
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = lk.Close()
	}()
	t := time.NewTimer(time.Until(end))
	defer t.Stop()
	select {
	case <-closed:
	case <-t.C:
	}
}

// releaseTries bounds the attempts to release the lock when nodes fail:
// redlock exits right after, and a key left behind blocks the next holder
// until its TTL runs out.
const releaseTries = 3

// release unlocks l, trying again while the failure is the nodes' (a
// timeout under load, a refused connection), not that the key is gone.
func release(ctx context.Context, l *redlock.Lock) error {
	var err error
	for range releaseTries {
		if err = l.Unlock(ctx); err == nil || !errors.Is(err, redlock.ErrUnreachable) {
			return err
		}
	}
	return err
}
