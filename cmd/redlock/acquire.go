package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/seed543a70bd/redlock"
)

// settle waits, if need be, until two per-node timeouts have passed since
// the last acquisition round ended (at the latest), before the clients
// close and redlock exits. A node's grant that arrives after its round was
// decided (won early by a quorum, or lost) is released by the library in
// the background, within a per-node timeout for the reply and another for
// the release; closing the clients sooner would leave that key on its node
// until the TTL. Only a command that ends within that time, or a failed
// wait, waits here: at most 400ms.
func settle(acquired time.Time, c *runConfig) {
	nt := c.nodeTimeout
	if nt == 0 { // the library's default: ttl/20 clamped to [5ms, 200ms]
		nt = min(max(c.ttl/20, 5*time.Millisecond), 200*time.Millisecond)
	}
	if d := time.Until(acquired.Add(2 * nt)); d > 0 {
		time.Sleep(d)
	}
}

// errSignal cancels the wait for the lock when a signal arrives.
var errSignal = errors.New("interrupted by a signal")

// acquire takes the lock, waiting as --wait says, or returns nil and the
// exit code. A forwarded signal ends the wait with 128+n.
func acquire(ctx context.Context, lk locker, c *runConfig, sigs <-chan os.Signal, stderr io.Writer) (*redlock.Lock, int) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if c.wait.set && c.wait.d > 0 {
		var cancelT context.CancelFunc
		actx, cancelT = context.WithTimeout(actx, c.wait.d)
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
			fmt.Fprintf(stderr, "redlock run: waiting for %q; nodes are failing: %v\n", c.key, err)
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
	if sig != nil {
		if l != nil {
			_ = release(context.WithoutCancel(ctx), l)
		}
		fmt.Fprintf(stderr, "redlock run: %v while waiting for %q\n", sig, c.key)
		return nil, exitSignal + signalNumber(sig)
	}
	switch {
	case err == nil:
		return l, exitOK
	case errors.Is(err, redlock.ErrInvalid):
		return nil, usageExit(err, "redlock run", stderr)
	case c.wait.set && c.wait.d == 0:
		fmt.Fprintf(stderr, "redlock run: lock %q not obtained (--wait 0: one attempt): %v\n", c.key, err)
	case c.wait.set:
		fmt.Fprintf(stderr, "redlock run: lock %q not obtained within %v: %v\n", c.key, c.wait.d, err)
	default:
		fmt.Fprintf(stderr, "redlock run: lock %q not obtained: %v\n", c.key, err)
	}
	return nil, exitNotObtained
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
