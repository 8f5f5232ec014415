package chaos

import (
	"context"
	"time"
)

// Scenarios whose faults sit between clients and nodes: latency and
// partitions through toxiproxy, clock skew through the SkewHook.

// netFault slows (or, with cut, partitions) nodes 3 and 4 mid-lock for a
// third of the run, between an unfaulted third and a healed sixth. An
// uncontended probe measures acquire latency in each phase: with the
// fault its median must stay near the unfaulted median, because a round
// is decided by the first three answers and never waits for the rest.
//
// The TTL is four times the run's, so that the per-node timeout (TTL/20)
// that a round waiting on the slow nodes would cost stands well clear of
// the noise of a loaded machine.
func netFault(cut bool) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
		victims := []int{3, 4}
		ttl := 4 * e.p.TTL
		timeout := nodeTimeoutFor(ttl)
		// Contenders wait a per-node timeout between attempts: a split
		// vote now holds its nodes until the slow ones time out, and
		// retrying faster would only split the votes again.
		stop, err := e.start(ctx, workload{TTL: ttl, Keys: []string{"k0", "k1"}, Pause: timeout})
		if err != nil {
			return err
		}
		defer stop()
		stopProbe, err := e.probe(ctx, 20*time.Millisecond, ttl)
		if err != nil {
			return err
		}
		defer stopProbe()
		clock, phase := e.rec.Clock(), e.p.Duration/3
		if err := sleep(ctx, phase); err != nil {
			return err
		}
		if err := e.rec.WaitHeld(ctx); err != nil {
			return err
		}
		base := window{to: clock.Now()}
		for _, v := range victims {
			if cut {
				err = e.cl.Partition(v)
			} else {
				err = e.cl.Slow(v, 3*timeout)
			}
			if err != nil {
				return err
			}
		}
		fault := window{from: clock.Now()}
		err = sleep(ctx, phase)
		for _, v := range victims {
			if herr := e.cl.Heal(v); herr != nil {
				return herr
			}
		}
		fault.to = clock.Now()
		if err != nil {
			return err
		}
		err = sleep(ctx, phase/2)
		stopProbe()
		stop()

		h := e.rec.History()
		probes := func(w window) []time.Duration {
			return latencies(h, func(a Attempt) bool { return a.Probe && a.Start >= w.from && a.Start < w.to })
		}
		b, f := probes(base), probes(fault)
		if len(b) == 0 || len(f) == 0 {
			e.failf("too few probes: %d unfaulted, %d faulted", len(b), len(f))
			return err
		}
		b50, f50 := percentile(b, 0.5), percentile(f, 0.5)
		// "Near": within twice the unfaulted median plus a quarter of the
		// per-node timeout, which a round that waited for the slow nodes
		// would cost in full.
		if limit := 2*b50 + timeout/4; f50 > limit {
			e.failf("acquire latency not near the unfaulted case: p50 %s with the fault, %s without (limit %s)", ms(f50), ms(b50), ms(limit))
		}
		e.checkLatency("with the fault", f, b, ttl, fault.to-fault.from)
		if h.AcquiredDuring(fault.from, fault.to) == 0 {
			e.failf("no progress: no contended lock granted during the fault (%s to %s); %s", ms(fault.from), ms(fault.to), h.activity(fault.from, fault.to))
		}
		return err
	}
}

// skew makes the clocks of nodes 0-2 (a majority) run rate times as fast
// as real time, mid-lock, while three greedy clients hold one key to the
// end of their validity and let it expire, so that only the nodes'
// expiry decides when the next client gets it. Within the drift allowance
// (the default drift factor, 1%) the keys outlive every holder's validity;
// beyond it they expire on a majority while the holder still believes
// it holds the lock, and the next client takes it.
func skew(rate float64) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
		stop, err := e.start(ctx, workload{Clients: 3, TTL: e.p.TTL, Greedy: true, Pause: 5 * time.Millisecond})
		if err != nil {
			return err
		}
		defer stop()
		if err := sleep(ctx, e.p.Duration/5); err != nil {
			return err
		}
		if err := e.rec.WaitHeld(ctx); err != nil {
			return err
		}
		at := e.rec.Clock().Now()
		for _, v := range []int{0, 1, 2} {
			e.cl.Skew(v, rate)
		}
		err = sleep(ctx, e.p.Duration*4/5)
		stop()
		if e.rec.History().AcquiredAfter(at) == 0 {
			e.failf("no lock granted after the skew")
		}
		return err
	}
}
