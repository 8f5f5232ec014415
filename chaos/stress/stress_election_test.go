package stress_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/chaos"
)

// The election operations: Campaign (then, while leader, Proclaim,
// Inspect, Leader and fenced writes with the term, and Resign), Inspect of
// any contended key, and Observe. Every leadership is recorded as a
// section of chaos.ModeLeader, so checkHistory finds two valid at once
// (chaos.Overlaps) and terms that did not rise in election order
// (chaos.TermOrder), and fenceRegressions checks the term as a fence.
// Beside them:
//
//   - Observe delivers in term order, without duplicates, never "no
//     leader", and its channel closes once its ctx ends; no leadership
//     whose term lies between two it delivered is missing (checked at
//     the end, against the recorded sections);
//   - Inspect never returns a holder's token, of any lock the run took;
//   - while no node is killed or paused, Inspect of a leader's own
//     election says held, by its holder ID (the SHA-1 of its token), with a
//     fence at least its term, and Leader reports its term.

// Kinds of the election operations, counted in the report.
const (
	opCampaign = "Campaign"
	opProclaim = "Proclaim"
	opResign   = "Resign"
	opInspect  = "Inspect"
	opLeader   = "Leader"
	opObserve  = "Observe"
)

// electionStepShare is the share, in percent, of a worker's steps that run
// an election operation.
const electionStepShare = 6

// electionName returns the name of election i of the run: under the run's
// prefix, so that its key (redlock.ElectionKey) is found by the leftover
// check.
func (s *stressRun) electionName(i int) string { return fmt.Sprintf("%se%d", s.prefix, i) }

// stressElections is how many elections the workers share.
const stressElections = 2

// electionStep runs one election operation, drawn from rng, and reports
// whether it did.
func (s *stressRun) electionStep(ctx context.Context, id int, rng *rand.Rand) bool {
	if rng.IntN(100) >= electionStepShare {
		return false
	}
	lk := pick(rng, s.quorum[rng.IntN(len(s.quorum))], s.multi[rng.IntN(len(s.multi))])
	name := s.electionName(rng.IntN(stressElections))
	switch p := rng.IntN(100); {
	case p < 60:
		s.campaign(ctx, id, rng, lk, name)
	case p < 80:
		keys := append([]string{redlock.ElectionKey(name), s.sem}, s.plain...)
		keys = append(keys, s.fenced...)
		keys = append(keys, s.rw...)
		s.inspectAny(ctx, id, keys[rng.IntN(len(keys))])
	default:
		s.observe(ctx, id, rng, name)
	}
	return true
}

// electionOf returns lk's election called name.
func electionOf(lk *stressLocker, name string) *redlock.Election {
	if lk.client != nil {
		return lk.client.Election(name)
	}
	return lk.acq.(interface {
		Election(string) *redlock.Election
	}).Election(name)
}

// electionTTL draws a leadership's TTL, from 300ms to 3s.
func electionTTL(rng *rand.Rand) time.Duration {
	return 300*time.Millisecond + time.Duration(rng.Int64N(int64(2700*time.Millisecond)))
}

// campaign campaigns under a context that ends at a random instant and,
// once elected, leads for up to 1.5s: fenced writes with the term,
// Proclaims, Inspects of its election and Leader reads, at random; then
// records the leadership and resigns.
func (s *stressRun) campaign(ctx context.Context, id int, rng *rand.Rand, lk *stressLocker, name string) {
	s.count(opCampaign)
	el := electionOf(lk, name)
	ttl := electionTTL(rng)
	cctx, stop, until := callCtx(ctx, rng, true)
	at := s.clock.Now()
	t0 := time.Now()
	ld, err := el.Campaign(cctx, fmt.Sprintf("worker %d", id), ttl)
	took := time.Since(t0)
	stop()
	what := fmt.Sprintf("Campaign(%s, ttl %v) on %s, ctx ending after %v", name, ttl, lk.name, until)
	// Lock's wait, its last attempt's rounds, the term's publication and
	// the release of a leadership that could not publish it.
	s.checkBound(id, what, took, until+6*lk.roundWait(ttl)+stressSlack)
	if err != nil {
		if !errors.Is(err, redlock.ErrNotObtained) {
			s.failf("worker %d: %s: want an error matching ErrNotObtained, got %v", id, what, err)
		}
		return
	}
	s.count(opCampaign + " won")
	l := ld.Lock()
	h := &stressHold{worker: id, lk: lk, l: l, attempt: at, acquired: s.clock.Now(), mode: chaos.ModeLeader}
	h.note("%s won after %v (term %d)", what, took.Round(time.Microsecond), ld.Term())
	s.holdStarted(h)
	if ld.Term() != l.Fence() || ld.Term() <= 0 {
		s.failf("worker %d: %s: want a positive term equal to the lock's fence, got term %d, fence %d", id, what, ld.Term(), l.Fence())
	}
	s.fencedWrite(ctx, h)
	end := time.Now().Add(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
	for n := 0; time.Now().Before(end) && ctx.Err() == nil && !isClosed(ld.Done()); n++ {
		t := time.NewTimer(20*time.Millisecond + time.Duration(rng.Int64N(int64(130*time.Millisecond))))
		select {
		case <-ctx.Done():
		case <-ld.Done():
		case <-t.C:
		}
		t.Stop()
		if ld.Validity() <= 0 {
			break
		}
		switch rng.IntN(4) {
		case 0:
			s.proclaim(ctx, rng, h, ld, n)
		case 1:
			s.inspectLeader(ctx, h, ld, name)
		case 2:
			s.leader(ctx, h, ld, name)
		default:
			s.fencedWrite(ctx, h)
		}
	}
	released, deadline := s.clock.Now(), s.clock.Of(l.Deadline())
	h.note("stopped leading after %v with Validity %v", (released - h.acquired).Round(time.Microsecond), (deadline - released).Round(time.Microsecond))
	s.rec.Section(chaos.Section{
		Client: id, Key: l.Key(), Token: l.Token(), Fence: ld.Term(), Mode: chaos.ModeLeader,
		Attempt: h.attempt, Acquired: h.acquired, Released: released, Deadline: deadline,
	})
	s.count(opResign)
	t1 := time.Now()
	rerr := ld.Resign(context.Background())
	s.checkBound(id, "Resign of "+name, time.Since(t1), lk.roundWait(ttl)+stressSlack)
	if rerr != nil && !errors.Is(rerr, redlock.ErrNotHeld) {
		s.failf("worker %d: Resign: want nil or ErrNotHeld, got %v (%s)", id, rerr, h)
	}
	h.note("Resign: %v", errText(rerr))
	s.holdEnded(h)
}

// proclaim changes the leader's value under a context that ends at a
// random instant.
func (s *stressRun) proclaim(ctx context.Context, rng *rand.Rand, h *stressHold, ld *redlock.Leadership, n int) {
	s.count(opProclaim)
	cctx, stop, until := callCtx(ctx, rng, false)
	defer stop()
	v := fmt.Sprintf("worker %d, proclaim %d", h.worker, n)
	t0 := time.Now()
	err := ld.Proclaim(cctx, v)
	s.checkBound(h.worker, fmt.Sprintf("Proclaim, ctx ending after %v", until), time.Since(t0), h.lk.roundWait(ld.Lock().TTL())+stressSlack)
	switch {
	case err == nil:
		if ld.Value() != v {
			s.failf("worker %d: Proclaim(%q) succeeded: want Value %q, got %q", h.worker, v, v, ld.Value())
		}
	case errors.Is(err, redlock.ErrNotHeld), errors.Is(err, redlock.ErrUnreachable), isCtxErr(err):
	default:
		s.failf("worker %d: Proclaim: want nil, ErrNotHeld, ErrUnreachable or a context error, got %v (%s)", h.worker, err, h)
	}
	h.note("Proclaim(%q), ctx ending after %v: %v", v, until, errText(err))
}

// healthyFor runs f and reports whether no node was killed or paused at
// any instant while it ran, nor within dialBreakerGrace before.
func (s *stressRun) healthyFor(f func()) bool {
	g0 := s.procFaultGen.Load()
	healed := time.Duration(s.healedAt.Load())
	start := s.clock.Now()
	f()
	return g0%2 == 0 && s.procFaultGen.Load() == g0 && (healed == 0 || start-healed >= dialBreakerGrace)
}

// dialBreakerGrace is how long after a node answers again a go-redis
// client may still fail to reach it. A pool whose dials failed PoolSize
// times in a row fails every dial at once with the last dial error
// ("connection refused" from a killed node) until a background dial,
// tried once a second, gets through (go-redis v9.23, internal/pool
// ConnPool.tryDial): up to a second, plus that dial's DialTimeout, plus
// slack for a loaded machine.
const dialBreakerGrace = 2 * time.Second

// inspectLeader inspects the leader's own election: the leadership must
// be held by it, while it stays valid and no node is killed or paused.
func (s *stressRun) inspectLeader(ctx context.Context, h *stressHold, ld *redlock.Leadership, name string) {
	key := redlock.ElectionKey(name)
	var hd *redlock.Holding
	var err error
	valid := ld.Validity() > 0
	healthy := s.healthyFor(func() { hd, err = s.timedInspect(ctx, h.worker, key) })
	if err != nil {
		return
	}
	valid = valid && ld.Validity() > 0 && !isClosed(ld.Done())
	h.note("Inspect of its election: %s", hd.State)
	if !valid || !healthy {
		return
	}
	id := holderID(h.l.Token())
	if hd.State != redlock.HoldHeld || len(hd.Holders) != 1 || hd.Holders[0].ID != id || hd.Fence < ld.Term() {
		s.failf("worker %d: Inspect of its election %s while it led (term %d) and every node ran: want held by %s with a fence of at least %d, got %s (%s)",
			h.worker, key, ld.Term(), id, ld.Term(), describeHolding(hd), h)
	}
}

// leader reads the election's leader: while the leadership stays valid
// and no node is killed or paused, it must report the leader's term.
func (s *stressRun) leader(ctx context.Context, h *stressHold, ld *redlock.Leadership, name string) {
	s.count(opLeader)
	var got redlock.Leader
	var err error
	valid := ld.Validity() > 0
	healthy := s.healthyFor(func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		t0 := time.Now()
		got, err = s.inspector.Election(name).Leader(cctx)
		s.checkBound(h.worker, "Leader of "+name, time.Since(t0), 250*time.Millisecond+stressSlack)
	})
	valid = valid && ld.Validity() > 0 && !isClosed(ld.Done())
	h.note("Leader: term %d: %v", got.Term, errText(err))
	switch {
	case err != nil && !errors.Is(err, redlock.ErrNoLeader) && !errors.Is(err, redlock.ErrUnreachable) && !isCtxErr(err):
		s.failf("worker %d: Leader: want a leader, ErrNoLeader, ErrUnreachable or a context error, got %v", h.worker, err)
	case valid && healthy && ctx.Err() == nil && (err != nil || got.Term != ld.Term()):
		s.failf("worker %d: Leader of %s while it led (term %d) and every node ran: want term %d, got %+v, %v (%s)",
			h.worker, name, ld.Term(), ld.Term(), got, err, h)
	}
}

// inspectAny inspects key, which the workers contend for.
func (s *stressRun) inspectAny(ctx context.Context, id int, key string) {
	_, _ = s.timedInspect(ctx, id, key)
}

// timedInspect calls Inspect through the inspector and checks its bound,
// its error, and that no token of any lock the run took is in its result.
func (s *stressRun) timedInspect(ctx context.Context, id int, key string) (*redlock.Holding, error) {
	s.count(opInspect)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t0 := time.Now()
	hd, err := s.inspector.Inspect(cctx, key)
	s.checkBound(id, "Inspect of "+key, time.Since(t0), 250*time.Millisecond+stressSlack)
	if err != nil {
		if !isCtxErr(err) {
			s.failf("worker %d: Inspect of %s: want a result or a context error, got %v", id, key, err)
		}
		return nil, err
	}
	dump := describeHolding(hd)
	s.mu.Lock()
	defer s.mu.Unlock()
	for tok, h := range s.holds {
		if strings.Contains(dump, tok) {
			s.failures = append(s.failures, fmt.Sprintf("worker %d: Inspect of %s returned a holder's token %q (%s): %s", id, key, tok, h, dump))
		}
	}
	return hd, nil
}

// holderID is Inspect's ID of the holder of token: its SHA-1, in hex.
func holderID(token string) string {
	sum := sha1.Sum([]byte(token))
	return hex.EncodeToString(sum[:])
}

// describeHolding renders every field of hd, each node's answer included.
func describeHolding(hd *redlock.Holding) string {
	return fmt.Sprintf("%+v", *hd)
}

// observe follows election name for up to 1.5s: what Observe delivers
// must come in term order, without duplicates, never "no leader", and
// its channel must close once its ctx ends.
func (s *stressRun) observe(ctx context.Context, id int, rng *rand.Rand, name string) {
	s.count(opObserve)
	octx, cancel := context.WithTimeout(ctx, time.Duration(rng.Int64N(int64(1500*time.Millisecond))))
	defer cancel()
	ch := s.inspector.Election(name).Observe(octx)
	var got []redlock.Leader
	seen := map[redlock.Leader]bool{}
	var last int64
	closed := false
	for !closed {
		select {
		case l, ok := <-ch:
			if !ok {
				closed = true
				break
			}
			k := redlock.Leader{Term: l.Term, Value: l.Value}
			switch {
			case l.Term <= 0:
				s.failf("worker %d: Observe of %s delivered %+v: want a leader", id, name, l)
			case l.Term < last:
				s.failf("worker %d: Observe of %s delivered term %d after term %d: want term order (delivered: %+v)", id, name, l.Term, last, append(got, l))
			case seen[k]:
				s.failf("worker %d: Observe of %s delivered term %d (%q) twice (delivered: %+v)", id, name, l.Term, l.Value, append(got, l))
			}
			seen[k], last = true, max(last, l.Term)
			got = append(got, l)
		case <-octx.Done():
			// The channel closes once its ctx ends: within a read's
			// per-node timeout and the slack.
			t := time.NewTimer(250*time.Millisecond + stressSlack)
			for !closed {
				select {
				case _, ok := <-ch:
					closed = !ok
				case <-t.C:
					s.failf("worker %d: Observe of %s: want its channel closed once its ctx ended, still open %v later", id, name, 250*time.Millisecond+stressSlack)
					t.Stop()
					return
				}
			}
			t.Stop()
		}
	}
	if len(got) > 0 {
		s.count(opObserve + " delivered")
	}
	if len(got) > 2 {
		s.mu.Lock()
		s.observed = append(s.observed, observation{worker: id, name: name, got: got})
		s.mu.Unlock()
	}
}

// observation is what one Observe of an election delivered.
type observation struct {
	worker int
	name   string
	got    []redlock.Leader
}

// checkObserved checks that no leadership is missing from what an
// Observe delivered: every recorded leadership of the election whose
// term lies between the first and the last term delivered. Campaign
// returned only once its term was on a quorum of nodes' histories, and
// the nodes keep their data across kills and pauses, so an observer that
// went on to a later term has read it. The check needs the run's
// sections, recorded when each leadership ends: it runs at the end.
func (s *stressRun) checkObserved(h chaos.History) {
	terms := map[string][]int64{} // by election key
	for _, sec := range h.Sections {
		if sec.Mode == chaos.ModeLeader {
			terms[sec.Key] = append(terms[sec.Key], sec.Fence)
		}
	}
	s.mu.Lock()
	obs := s.observed
	s.mu.Unlock()
	for _, o := range obs {
		first, last := o.got[0].Term, o.got[len(o.got)-1].Term
		delivered := map[int64]bool{}
		for _, l := range o.got {
			delivered[l.Term] = true
		}
		for _, term := range terms[redlock.ElectionKey(o.name)] {
			if term > first && term < last && !delivered[term] {
				s.failf("worker %d: Observe of %s delivered terms %d to %d but not leadership term %d (delivered: %+v)", o.worker, o.name, first, last, term, o.got)
			}
		}
	}
}
