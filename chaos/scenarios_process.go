package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// Scenarios whose faults hit the node processes: kill, pause, outage.

// latencyBound is the longest an attempt with ttl may take at p95 while
// nodes are down, paused or cut off: the acquire round and the fencing
// round may each wait out the per-node timeout, plus 200ms of slack for
// a loaded machine (the race detector, two cores, other tests). On a
// machine so loaded that even the unfaulted attempts' p95 exceeds that,
// the bound is that p95 plus the two timeouts. A library that waited on
// the faulty nodes would instead take go-redis's 500ms read timeout, or
// the whole fault, on most attempts.
//
// p95 rather than p99 or the maximum: on a shared two-core machine a few
// attempts in a hundred stall for hundreds of milliseconds whatever the
// library does, and the suite must not fail on them.
func latencyBound(ttl time.Duration, base []time.Duration) time.Duration {
	t := nodeTimeoutFor(ttl)
	return max(2*t+200*time.Millisecond, percentile(base, 0.95)+2*t)
}

// checkLatency fails the scenario when the p95 of the faulted attempts
// exceeds latencyBound, or the slowest of them lasted as long as the
// fault (limit): it waited the fault out.
func (e *env) checkLatency(what string, faulted, base []time.Duration, ttl, limit time.Duration) {
	if len(faulted) == 0 {
		e.failf("no attempt was made %s", what)
		return
	}
	p95, worst := percentile(faulted, 0.95), percentile(faulted, 1)
	if bound := latencyBound(ttl, base); p95 > bound {
		e.failf("unbounded latency %s: p95 %s > %s (unfaulted p95 %s; slowest %s)", what, ms(p95), ms(bound), ms(percentile(base, 0.95)), ms(worst))
	}
	if worst >= limit {
		e.failf("an attempt waited the fault out %s: %s >= %s", what, ms(worst), ms(limit))
	}
}

func baseline(ctx context.Context, e *env) error {
	keys := []string{"k0", "k1"}
	stop, err := e.start(ctx, workload{Keys: keys, TTL: e.p.TTL})
	if err != nil {
		return err
	}
	err = sleep(ctx, e.p.Duration)
	stop()
	per := map[string]int{}
	for _, s := range e.rec.History().Sections {
		per[s.Key]++
	}
	for _, k := range keys {
		if per[k] == 0 {
			e.failf("no lock on %q was ever granted", k)
		}
	}
	return err
}

// window is a span during which a fault lasted.
type window struct{ from, to time.Duration }

// recoveryWait bounds how long a scenario waits for the first lock after
// a restart: go-redis, after a run of failed dials, redials a dead node
// only once a second, so recovery may lag a restart by that much.
const recoveryWait = 3 * time.Second

// awaitProgress waits until a lock is granted at or after t, for at most
// recoveryWait; it reports whether one was.
func (e *env) awaitProgress(ctx context.Context, t time.Duration) bool {
	deadline := time.Now().Add(recoveryWait)
	for e.rec.History().AcquiredAfter(t) == 0 {
		if time.Now().After(deadline) || sleep(ctx, 20*time.Millisecond) != nil {
			return false
		}
	}
	return true
}

func killMinority(ctx context.Context, e *env) error {
	stop, err := e.start(ctx, workload{TTL: e.p.TTL})
	if err != nil {
		return err
	}
	defer stop()
	clock, n := e.rec.Clock(), e.cl.N()
	end := clock.Now() + e.p.Duration
	var wins []window
	for len(wins) == 0 || clock.Now()+e.p.guard() < end {
		if err := e.rec.WaitHeld(ctx); err != nil {
			return err
		}
		w := window{from: clock.Now()}
		var g errgroup.Group
		for _, v := range rand.Perm(n)[:(n-1)/2] {
			g.Go(func() error { return e.cl.RestartAfter(ctx, v, e.p.guard()) })
		}
		if err := g.Wait(); err != nil {
			return err
		}
		w.to = clock.Now()
		wins = append(wins, w)
		if err := sleep(ctx, e.p.TTL/2); err != nil {
			return err
		}
	}
	last := wins[len(wins)-1].to
	recovered := e.awaitProgress(ctx, last)
	stop()
	h := e.rec.History()
	for i, w := range wins {
		if h.AcquiredDuring(w.from, w.to) == 0 {
			e.failf("no progress: no lock granted while a minority was down (fault %d, %s to %s); %s", i+1, ms(w.from), ms(w.to), h.activity(w.from, w.to))
		}
	}
	if !recovered {
		e.failf("no progress within %v after the last restart at %s", recoveryWait, ms(last))
	}
	return ctx.Err()
}

// outage kills victims mid-lock, keeps them down for longer than the
// TTL, then restarts them one by one; no lock may be granted while too
// few nodes are up for a quorum (a majority, every node for a
// MultiLock), every attempt made then must fail with ErrNotObtained
// within latencyBound, and locks must be granted again after the
// restarts. The window ends when the restart that brings a quorum back
// begins: from there on a grant is legitimate, though other victims are
// still down.
func outage(victims []int, multi bool) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
		stop, err := e.start(ctx, workload{TTL: e.p.TTL, Multi: multi})
		if err != nil {
			return err
		}
		defer stop()
		clock := e.rec.Clock()
		if err := sleep(ctx, e.p.Duration/4); err != nil {
			return err
		}
		if err := e.rec.WaitHeld(ctx); err != nil {
			return err
		}
		for _, v := range victims {
			if err := e.cl.Kill(v); err != nil {
				return err
			}
		}
		down := window{from: clock.Now()}
		if err := sleep(ctx, max(e.p.Duration/2, e.p.guard())); err != nil {
			return err
		}
		n, ended := e.cl.N(), false
		for k, v := range victims {
			if !ended && quorumBack(n, len(victims)-k-1, multi) {
				down.to, ended = clock.Now(), true
			}
			if err := e.cl.Restart(v); err != nil {
				return err
			}
		}
		restarted := clock.Now()
		recovered := e.awaitProgress(ctx, restarted)
		err = sleep(ctx, e.p.Duration/4)
		stop()
		h := e.rec.History()
		if n := h.AcquiredDuring(down.from, down.to); n > 0 {
			e.failf("%d lock(s) granted while nodes %v were down", n, victims)
		}
		e.checkFailures(h, down, victims)
		if !recovered {
			e.failf("no recovery: no lock granted within %v after the restarts at %s", recoveryWait, ms(restarted))
		}
		return err
	}
}

// quorumBack reports whether a lock can be granted on n nodes once the
// victim restarted next is up, with still others of the victims down: a
// majority of nodes up, or, for a MultiLock (multi), every node.
func quorumBack(n, still int, multi bool) bool {
	if multi {
		return still == 0
	}
	return n-still >= n/2+1
}

// checkFailures checks that the attempts made wholly within w failed
// with ErrNotObtained within latencyBound of the attempts before it.
func (e *env) checkFailures(h History, w window, victims []int) {
	var lat, base []time.Duration
	others := map[string]int{}
	for _, a := range h.Attempts {
		if a.Start+a.Latency < w.from {
			base = append(base, a.Latency)
		}
		if a.Start < w.from || a.Start+a.Latency >= w.to {
			continue
		}
		lat = append(lat, a.Latency)
		if strings.HasPrefix(a.Reason, "error") {
			others[a.Reason]++
		}
	}
	for r, n := range others {
		e.failf("%d attempt(s) failed without ErrNotObtained: %s", n, r)
	}
	e.checkLatency(fmt.Sprintf("while nodes %v were down", victims), lat, base, e.p.TTL, w.to-w.from)
}

func pause(ctx context.Context, e *env) error {
	stop, err := e.start(ctx, workload{TTL: e.p.TTL})
	if err != nil {
		return err
	}
	defer stop()
	stopProbe, err := e.probe(ctx, 20*time.Millisecond, e.p.TTL)
	if err != nil {
		return err
	}
	defer stopProbe()
	clock, n := e.rec.Clock(), e.cl.N()
	end := clock.Now() + e.p.Duration
	stopped := min(e.p.Duration/4, time.Second)
	var wins []window
	for len(wins) == 0 || clock.Now()+stopped < end {
		if err := e.rec.WaitHeld(ctx); err != nil {
			return err
		}
		victims := rand.Perm(n)[:(n-1)/2]
		for _, v := range victims {
			if err := e.cl.Pause(v); err != nil {
				return err
			}
		}
		w := window{from: clock.Now()}
		err := sleep(ctx, stopped)
		for _, v := range victims {
			if rerr := e.cl.Resume(v); rerr != nil {
				return rerr
			}
		}
		w.to = clock.Now()
		wins = append(wins, w)
		if err != nil {
			return err
		}
		if err := sleep(ctx, stopped/2); err != nil {
			return err
		}
	}
	stopProbe()
	stop()
	h := e.rec.History()
	inside := func(a Attempt) bool {
		for _, w := range wins {
			if a.Start+a.Latency >= w.from && a.Start < w.to {
				return true
			}
		}
		return false
	}
	granted := 0
	for _, w := range wins {
		granted += h.AcquiredDuring(w.from, w.to)
	}
	e.checkLatency("while nodes were paused", latencies(h, inside),
		latencies(h, func(a Attempt) bool { return !inside(a) }), e.p.TTL, stopped)
	if granted == 0 {
		e.failf("no progress: no lock granted while a minority was paused")
	}
	return nil
}
