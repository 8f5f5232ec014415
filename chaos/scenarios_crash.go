package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

// Orchestrated scenarios: two clients, A and B, and faults placed at the
// one moment that matters, so that an unsafe configuration is caught
// every time rather than by luck.

// await tries lk on key every 10ms until it wins, ctx ends, or d passes.
func (e *env) await(ctx context.Context, id int, lk tryLocker, key string, d time.Duration) *redlock.Lock {
	deadline := time.Now().Add(d)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if l, err := e.try(ctx, id, lk, key, e.p.TTL, false); err == nil {
			return l
		}
		_ = sleep(ctx, 10*time.Millisecond)
	}
	return nil
}

// restart runs rounds of: a short-lived foreign key on nodes 3 and 4; A
// locks nodes 0-2 and holds to the end of its validity; node 0 restarts
// at once; B tries until it wins. Node 0's memory is lost unless the
// cluster is AppendOnly, so B can win on nodes 0, 3 and 4 while A's lock
// is valid: two holders. With guard, both clients use
// WithRestartGuard and B must not count node 0 until A's lock is gone.
//
// The restart is timed for the worst case of a guard that dates a node's
// start from INFO's uptime_in_seconds: that field is the difference of
// two whole-second wall-clock readings, so a node started at x.85s reads
// 1 second of uptime at (x+1).15s after 0.3s. A locks at .80 of a
// wall-clock second, node 0 restarts at once, and B first contacts it
// 350ms after A's lock, once Redis's cached clock has passed the second.
func restart(guard bool) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
		ttl := e.p.TTL
		var opts []redlock.Option
		if guard {
			opts = append(opts, redlock.WithRestartGuard(e.p.guard()))
		}
		a, err := e.locker(false, opts...)
		if err != nil {
			return err
		}
		b, err := e.locker(false, opts...)
		if err != nil {
			return err
		}
		idA, idB := e.newClientID(), e.newClientID()
		admins := []*redis.Client{e.cl.Admin(3), e.cl.Admin(4)}
		// How long after a node's start a guard may take to trust it: the
		// guard, plus up to 2s of whole-second uptime and cached clock.
		settle := e.p.guard() + 2500*time.Millisecond
		lastStart := time.Now() // the nodes have just started
		per, least := 2*ttl+time.Second, 2
		if guard {
			per, least = settle+time.Second, 1
		}
		rounds := e.p.rounds(per, least)
		for r := 0; r < rounds && ctx.Err() == nil; r++ {
			if guard { // let both guards trust every node again
				if err := sleep(ctx, settle-time.Since(lastStart)); err != nil {
					return err
				}
			}
			if err := alignWall(ctx, 0.80); err != nil {
				return err
			}
			key := fmt.Sprintf("restart-%d", r)
			la, err := e.lockFirstThree(ctx, idA, a, key, admins)
			if err != nil {
				e.failf("round %d: A could not lock %q on nodes 0-2: %v", r, key, err)
				continue
			}
			locked := time.Now()
			_ = e.write(ctx, idA, la)
			var wg sync.WaitGroup
			wg.Go(func() { // A holds to the end of its validity
				_ = sleep(ctx, time.Until(time.Now().Add(la.Validity()))-time.Millisecond)
				e.release(la)
			})
			err = e.cl.Restart(0)
			lastStart = time.Now()
			if err == nil {
				err = sleep(ctx, time.Until(locked.Add(ttl*7/10)))
			}
			if err != nil {
				wg.Wait()
				return err
			}
			if lb := e.await(ctx, idB, b, key, 3*ttl); lb != nil {
				e.hold(ctx, idB, lb, ttl/10)
			} else {
				e.failf("round %d: B never acquired %q", r, key)
			}
			wg.Wait()
		}
		return ctx.Err()
	}
}

// alignWall sleeps until the wall clock is frac (in [0, 1)) into a second.
func alignWall(ctx context.Context, frac float64) error {
	ns := time.Now().UnixNano() % int64(time.Second)
	d := int64(frac*float64(time.Second)) - ns
	if d < 0 {
		d += int64(time.Second)
	}
	return sleep(ctx, time.Duration(d))
}

// lockFirstThree locks key with lk on nodes 0-2 only: a foreign key,
// set straight on nodes 3 and 4 through admins, lives for 3/10 of the
// TTL, and lk tries within the first half of that (a loaded machine may
// make an attempt time out). The whole is tried up to 5 times.
func (e *env) lockFirstThree(ctx context.Context, id int, lk tryLocker, key string, admins []*redis.Client) (*redlock.Lock, error) {
	block := e.p.TTL * 3 / 10
	var err error
	for range 5 {
		for _, c := range admins {
			if err := c.Set(ctx, key, "foreign", block).Err(); err != nil {
				return nil, fmt.Errorf("foreign key on %s: %w", c.Options().Addr, err)
			}
		}
		until := time.Now().Add(block / 2)
		for time.Now().Before(until) {
			var l *redlock.Lock
			if l, err = e.try(ctx, id, lk, key, e.p.TTL, false); err == nil {
				return l, nil
			}
			if err := sleep(ctx, 10*time.Millisecond); err != nil {
				return nil, err
			}
		}
		if err := sleep(ctx, block); err != nil {
			return nil, err
		}
	}
	return nil, err
}

// pausedHolder runs rounds of: A locks; A is paused (a stop-the-world GC,
// a page fault storm) from just after it locked until after its
// validity, doing nothing; B takes the lock once it expires, writes to
// the fenced resource and releases; A wakes and writes with its old
// fencing token. The resource must reject A's write (ErrStaleFence):
// the lease alone cannot stop a paused holder, the fence can.
func pausedHolder(ctx context.Context, e *env) error {
	ttl := e.p.TTL
	a, err := e.locker(false)
	if err != nil {
		return err
	}
	b, err := e.locker(false)
	if err != nil {
		return err
	}
	idA, idB := e.newClientID(), e.newClientID()
	rounds := e.p.rounds(2*ttl, 3)
	for r := 0; r < rounds && ctx.Err() == nil; r++ {
		key := fmt.Sprintf("paused-%d", r)
		la := e.await(ctx, idA, a, key, ttl)
		if la == nil {
			e.failf("round %d: A could not lock %q", r, key)
			continue
		}
		e.note("client %d pauses past its validity", idA)
		lb := e.await(ctx, idB, b, key, 3*ttl)
		if lb == nil {
			e.failf("round %d: B never acquired %q", r, key)
			e.release(la)
			continue
		}
		if err := e.write(ctx, idB, lb); err != nil {
			e.failf("round %d: B's write with fence %d was rejected: %v", r, lb.Fence(), err)
		}
		e.release(lb)
		if err := sleep(ctx, time.Until(time.Now().Add(la.Validity()))+10*time.Millisecond); err != nil {
			return err
		}
		e.note("client %d wakes and writes with fence %d", idA, la.Fence())
		werr := e.write(ctx, idA, la)
		e.release(la)
		switch {
		case werr == nil:
			e.failf("round %d: the paused holder's late write (fence %d, after fence %d) was accepted", r, la.Fence(), lb.Fence())
		case !errors.Is(werr, redlock.ErrStaleFence):
			e.failf("round %d: the late write failed without ErrStaleFence: %v", r, werr)
		}
		if lb.Fence() <= la.Fence() {
			e.failf("round %d: fencing tokens did not increase: A got %d, B (later) got %d", r, la.Fence(), lb.Fence())
		}
	}
	return ctx.Err()
}
