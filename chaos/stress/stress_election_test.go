package stress_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/chaos"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// The election operations: Campaign (then, while leader, Proclaim,
// Inspect, Leader and fenced writes with the term, and Resign), Inspect of
// any contended key, and Observe. Every leadership is recorded as a
// section of chaos.ModeLeader, so checkHistory finds two valid at once
// (chaos.Overlaps) and terms that did not rise in election order
// (chaos.TermOrder), and fenceRegressions checks the term as a fence.
// Beside them:
//
//   - Observe delivers in term order, never the same value twice in a
//     row, never "no leader", and its channel closes once its ctx ends;
//     no leadership whose term lies between two it delivered is missing
//     (checked at the end, against the recorded sections); within a term
//     it delivers the publications in the order published, skipping none
//     that reached a quorum, and its first delivery is never a value a
//     split Proclaim left on a minority (checkPublications), nor any, on
//     an observer whose reads wait for every node, started after a split
//     Proclaim while every node runs (observeAfterSplit); an Observe
//     started before Proclaims that repeat its first value delivers them
//     all (observeRacing);
//   - Leader, after a split Proclaim, reports the last value on a quorum
//     (leaderAfterSplit); a Campaign with a list at its history key stops
//     at once with WRONGTYPE (foreignHistory); an Observe ends with its
//     Client's Close (closeWhileObserved); a Client of one node returns at
//     its ctx's end (oneNodeStep);
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
// prefix, so that its key (redlock.KeyName "election") is found by the leftover
// check.
func (s *stressRun) electionName(i int) string { return fmt.Sprintf("%se%d", s.prefix, i) }

// stressElections is how many elections the workers share.
const stressElections = 2

// electionStep runs one election operation, drawn from rng, and reports
// whether it did: always, or in electionStepShare of the steps.
func (s *stressRun) electionStep(ctx context.Context, id int, rng *rand.Rand, always bool) bool {
	if !always && rng.IntN(100) >= electionStepShare {
		return false
	}
	lk := pick(rng, s.quorum[rng.IntN(len(s.quorum))], s.multi[rng.IntN(len(s.multi))])
	name := s.electionName(rng.IntN(stressElections))
	switch p := rng.IntN(100); {
	case p < 55:
		s.campaign(ctx, id, rng, lk, name)
	case p < 70:
		keys := append([]string{redlock.KeyName("election", name), s.sem}, s.plain...)
		keys = append(keys, s.fenced...)
		keys = append(keys, s.rw...)
		s.inspectAny(ctx, id, keys[rng.IntN(len(keys))])
	case p < 86:
		s.observe(ctx, id, rng, name)
	case p < 90:
		s.foreignHistory(ctx, id)
	case p < 94:
		s.closeWhileObserved(ctx, id, name)
	default:
		s.oneNodeStep(ctx, id, rng)
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
	ls := &leading{ld: ld, name: name, values: []string{ld.Value()}}
	s.publish(name, ld.Lock().Fence(), ld.Value(), pubOK)
	h := &stressHold{worker: id, lk: lk, l: l, attempt: at, acquired: s.clock.Now(), mode: chaos.ModeLeader}
	h.ttl.Store(int64(ttl))
	h.note("%s won after %v (term %d)", what, took.Round(time.Microsecond), ld.Lock().Fence())
	s.holdStarted(h)
	if ld.Lock().Fence() != l.Fence() || ld.Lock().Fence() <= 0 {
		s.failf("worker %d: %s: want a positive term equal to the lock's fence, got term %d, fence %d", id, what, ld.Lock().Fence(), l.Fence())
	}
	s.fencedWrite(ctx, h)
	end := time.Now().Add(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
	if rng.IntN(3) == 0 {
		// A split Proclaim while the leadership's last publication is
		// its Campaign's: the first of the term, whose value sorts after
		// any later one's ("term 7: a" > "term 7 #1: b"), so that a tie
		// between the holders' values broken by their order picks the
		// split one.
		s.splitProclaim(ctx, rng, h, ls, 0)
	}
	for n := 1; time.Now().Before(end) && ctx.Err() == nil && !isClosed(ld.Lock().Done()); n++ {
		t := time.NewTimer(20*time.Millisecond + time.Duration(rng.Int64N(int64(130*time.Millisecond))))
		select {
		case <-ctx.Done():
		case <-ld.Lock().Done():
		case <-t.C:
		}
		t.Stop()
		if ld.Lock().Validity() <= 0 {
			break
		}
		switch rng.IntN(6) {
		case 5:
			s.observeRacing(ctx, h, ls, n)
		case 0:
			s.proclaim(ctx, rng, h, ls, n)
		case 1:
			s.inspectLeader(ctx, h, ld, name)
		case 2:
			s.leader(ctx, h, ls)
		case 3:
			s.splitProclaim(ctx, rng, h, ls, n)
		default:
			s.fencedWrite(ctx, h)
		}
	}
	released, deadline := s.clock.Now(), s.clock.Of(time.Now().Add(l.Validity()))
	h.note("stopped leading after %v with Validity %v", (released - h.acquired).Round(time.Microsecond), (deadline - released).Round(time.Microsecond))
	s.rec.Section(chaos.Section{
		Client: id, Key: l.Key(), Token: l.Token(), Fence: ld.Lock().Fence(), Mode: chaos.ModeLeader,
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

// leading is what a leader's loop knows of its leadership.
type leading struct {
	ld     *redlock.Leadership
	name   string
	values []string // the values it published, for Proclaims that repeat one
	// uncertain: the last Proclaim failed without a split, and may have
	// landed on a quorum all the same: Leader may report it.
	uncertain bool
}

// proclaim changes the leader's value under a context that ends at a
// random instant; one in four republishes an earlier value of the
// leadership, so that observers that place themselves by value (not by
// publication) skip what lies between.
func (s *stressRun) proclaim(ctx context.Context, rng *rand.Rand, h *stressHold, ls *leading, n int) {
	s.count(opProclaim)
	ld := ls.ld
	cctx, stop, until := callCtx(ctx, rng, false)
	defer stop()
	v := fmt.Sprintf("worker %d, proclaim %d", h.worker, n)
	if rng.IntN(4) == 0 {
		v = ls.values[rng.IntN(len(ls.values))]
	}
	t0 := time.Now()
	err := ld.Proclaim(cctx, v)
	if err == nil {
		s.publish(ls.name, ld.Lock().Fence(), v, pubOK)
		ls.values, ls.uncertain = append(ls.values, v), false
	} else if !unsent(err) {
		s.publish(ls.name, ld.Lock().Fence(), v, pubUnknown)
		ls.uncertain = true
	}
	s.checkBound(h.worker, fmt.Sprintf("Proclaim, ctx ending after %v", until), time.Since(t0), h.lk.roundWait(h.maxTTL())+stressSlack)
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
	key := redlock.KeyName("election", name)
	var hd *redlock.Holding
	var err error
	valid := ld.Lock().Validity() > 0
	healthy := s.healthyFor(func() { hd, err = s.timedInspect(ctx, h.worker, key) })
	if err != nil {
		return
	}
	valid = valid && ld.Lock().Validity() > 0 && !isClosed(ld.Lock().Done())
	h.note("Inspect of its election: %s", hd.State)
	if !valid || !healthy {
		return
	}
	id := holderID(h.l.Token())
	if hd.State != "held" || len(hd.Holders) != 1 || hd.Holders[0].ID != id || hd.Fence < ld.Lock().Fence() {
		s.failf("worker %d: Inspect of its election %s while it led (term %d) and every node ran: want held by %s with a fence of at least %d, got %s (%s)",
			h.worker, key, ld.Lock().Fence(), id, ld.Lock().Fence(), describeHolding(hd), h)
	}
}

// leader reads the election's leader: while the leadership stays valid
// and no node is killed or paused, it must report the leader's term, and
// its value when known: the last value a Proclaim published on a
// quorum, not what a split Proclaim left on a minority.
func (s *stressRun) leader(ctx context.Context, h *stressHold, ls *leading) {
	ld, name := ls.ld, ls.name
	want, certain := ld.Value(), !ls.uncertain
	s.count(opLeader)
	var got redlock.Leader
	var err error
	valid := ld.Lock().Validity() > 0
	healthy := s.healthyFor(func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		t0 := time.Now()
		got, err = s.inspector.Election(name).Leader(cctx)
		s.checkBound(h.worker, "Leader of "+name, time.Since(t0), 250*time.Millisecond+stressSlack)
	})
	valid = valid && ld.Lock().Validity() > 0 && !isClosed(ld.Lock().Done())
	h.note("Leader: term %d: %v", got.Term, errText(err))
	switch {
	case err != nil && !errors.Is(err, redlock.ErrNoLeader) && !errors.Is(err, redlock.ErrUnreachable) && !isCtxErr(err):
		s.failf("worker %d: Leader: want a leader, ErrNoLeader, ErrUnreachable or a context error, got %v", h.worker, err)
	case valid && healthy && ctx.Err() == nil && (err != nil || got.Term != ld.Lock().Fence()):
		s.failf("worker %d: Leader of %s while it led (term %d) and every node ran: want term %d, got %+v, %v (%s)",
			h.worker, name, ld.Lock().Fence(), ld.Lock().Fence(), got, err, h)
	case valid && healthy && ctx.Err() == nil && certain && got.Value != want:
		s.failf("worker %d: Leader of %s while it led (term %d) and every node ran: want the value on a quorum %q, got %q (%s)",
			h.worker, name, ld.Lock().Fence(), want, got.Value, h)
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
	var last int64
	closed := false
	for !closed {
		select {
		case l, ok := <-ch:
			if !ok {
				closed = true
				break
			}
			switch {
			case l.Term <= 0:
				s.failf("worker %d: Observe of %s delivered %+v: want a leader", id, name, l)
			case l.Term < last:
				s.failf("worker %d: Observe of %s delivered term %d after term %d: want term order (delivered: %+v)", id, name, l.Term, last, append(got, l))
			case len(got) > 0 && got[len(got)-1].Term == l.Term && got[len(got)-1].Value == l.Value:
				// A value published again later in its term is delivered
				// again (checkPublications checks the order); twice in a
				// row, never.
				s.failf("worker %d: Observe of %s delivered term %d (%q) twice in a row (delivered: %+v)", id, name, l.Term, l.Value, append(got, l))
			}
			last = max(last, l.Term)
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
	if len(got) > 0 {
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
		for _, term := range terms[redlock.KeyName("election", o.name)] {
			if term > first && term < last && !delivered[term] {
				s.failf("worker %d: Observe of %s delivered terms %d to %d but not leadership term %d (delivered: %+v)", o.worker, o.name, first, last, term, o.got)
			}
		}
		s.checkPublications(o)
	}
}

// What each leadership published, for the check of what Observe
// delivered (checkPublications). A leader publishes its Campaign's value,
// then each Proclaim's, one at a time, in the order recorded here, which
// is the order of their places in the election's history.
type publication struct {
	value   string
	outcome int // pubOK, pubUnknown or pubMinority
}

const (
	pubOK       = iota // Campaign or Proclaim returned nil: on a quorum
	pubUnknown         // Proclaim failed: it may have landed on a quorum all the same
	pubMinority        // a split Proclaim: on fewer nodes than a quorum, for certain
)

// pubKey is the key of the publications of election name's term.
func pubKey(name string, term int64) string { return fmt.Sprintf("%s/%d", name, term) }

// publish records a publication of election name's term.
func (s *stressRun) publish(name string, term int64, value string, outcome int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := pubKey(name, term)
	s.pubs[k] = append(s.pubs[k], publication{value: value, outcome: outcome})
}

// unsent reports whether a Proclaim's error says it was never sent (its
// leadership resigned or already lost): it took no place in the history.
// One that its ctx cut short may have been sent, though no node's
// answer came.
func unsent(err error) bool {
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || isCtxErr(err) {
		return false
	}
	for _, n := range qe.Nodes {
		if n.Status != "pending" {
			return false
		}
	}
	return true
}

// checkPublications checks what observation o delivered against the
// publications of each term it delivered: within a term, in the order
// published, skipping none on a quorum between the first and the last
// it delivered (a repeat of the value it delivered last aside, which
// Observe does not deliver twice), and, for a term after its first, none
// before the first it delivered either. Its first delivery, the leader
// it read, is never a split Proclaim's value, which is on fewer nodes
// than a quorum: Leader reports a value surely on a quorum, or the
// earliest that may be. (A later delivery may be one: while an answer
// is missing, a value on a bare quorum and a split one look alike, and
// Observe delivers what may be on a quorum.) Terms without recorded
// publications (a Campaign that could not publish its term) are not
// checked here.
func (s *stressRun) checkPublications(o observation) {
	s.mu.Lock()
	pubs := map[int64][]publication{}
	for _, l := range o.got {
		pubs[l.Term] = s.pubs[pubKey(o.name, l.Term)]
	}
	s.mu.Unlock()
	for i := 0; i < len(o.got); {
		term := o.got[i].Term
		j := i
		for j < len(o.got) && o.got[j].Term == term {
			j++
		}
		ps := pubs[term]
		last := j == len(o.got)
		if len(ps) > 0 {
			if why := matchTerm(ps, o.got[i:j], i == 0, last); why != "" {
				s.failf("worker %d: Observe of %s, term %d: %s (delivered: %+v; published in term %d: %+v)", o.worker, o.name, term, why, o.got, term, ps)
			}
		}
		i = j
	}
}

// matchTerm matches the values an observer delivered in one term (got)
// to that term's publications ps, in order, and returns what is wrong,
// or "". first: the observation began with this term, and may start at
// any publication; last: it ended with it, and need not reach the end.
func matchTerm(ps []publication, got []redlock.Leader, first, last bool) string {
	var why string
	try := func(start int) bool {
		k := start
		prev := ""
		for gi, g := range got {
			for ; k < len(ps); k++ {
				p := ps[k]
				if p.value == g.Value {
					break
				}
				if p.outcome == pubOK && p.value != prev && (gi > 0 || !first) {
					why = fmt.Sprintf("skipped %q, published on a quorum before %q", p.value, g.Value)
					return false
				}
			}
			if k == len(ps) {
				why = fmt.Sprintf("delivered %q out of the order published, or never published", g.Value)
				return false
			}
			if ps[k].outcome == pubMinority && first && gi == 0 {
				why = fmt.Sprintf("delivered first (the leader it read) %q, which a split Proclaim left on fewer nodes than a quorum", g.Value)
				return false
			}
			prev = g.Value
			k++
		}
		if !last {
			for ; k < len(ps); k++ {
				if ps[k].outcome == pubOK && ps[k].value != prev {
					why = fmt.Sprintf("skipped %q, published on a quorum, before the next term", ps[k].value)
					return false
				}
			}
		}
		return true
	}
	if !first {
		if try(0) {
			return ""
		}
		return why
	}
	for start := range ps {
		if ps[start].value == got[0].Value && try(start) {
			return ""
		}
	}
	if why == "" {
		why = fmt.Sprintf("delivered %q, never published in the term", got[0].Value)
	}
	return why
}

// splitHook is a go-redis hook on node i's clients that fails a
// Proclaim, before it is sent, whose value names node i in its
// "fail[...]" list: a Proclaim that reaches only the nodes it does not
// name (splitProclaim).
type splitHook int

func (h splitHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h splitHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.fail(cmd) {
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (h splitHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		rest := cmds[:0:0]
		for _, cmd := range cmds {
			if !h.fail(cmd) {
				rest = append(rest, cmd)
			}
		}
		if len(rest) == 0 {
			return nil
		}
		return next(ctx, rest)
	}
}

// fail fails cmd when it carries a split value naming this node.
func (h splitHook) fail(cmd redis.Cmder) bool {
	tag := fmt.Sprintf(",%d,", int(h))
	for _, a := range cmd.Args() {
		v, ok := a.(string)
		if !ok {
			continue
		}
		if i := strings.Index(v, "fail["); i >= 0 {
			if list, _, ok := strings.Cut(v[i+len("fail["):], "]"); ok && strings.Contains(","+list+",", tag) {
				cmd.SetErr(errSplit)
				return true
			}
		}
	}
	return false
}

var errSplit = errors.New("stress: split Proclaim: failed on this node on purpose")

// splitProclaim makes a Proclaim that a minority takes, where the
// leadership holds a quorum without every node: the leadership's key is
// deleted on one node (while every node holds it, so that a quorum
// keeps it), then a Proclaim goes out whose value the split hook fails
// on half of the others. The value's first letter is random, so that a
// tie between the nodes' values broken by their order would pick it
// half the time. Leader must go on reporting the last value on a quorum
// and Observe must not deliver it while every node runs.
func (s *stressRun) splitProclaim(ctx context.Context, rng *rand.Rand, h *stressHold, ls *leading, n int) {
	key := redlock.KeyName("election", ls.name)
	tok, _, _ := strings.Cut(h.l.Token(), "\x00") // the token, without the metadata
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for _, c := range s.inspect {
		v, err := c.Get(rctx, key).Result()
		if err != nil || (v != tok && !strings.HasPrefix(v, tok+"\x00")) {
			return // not on every node: dropping one could lose the quorum
		}
	}
	drop := rng.IntN(len(s.inspect))
	if err := s.inspect[drop].Del(rctx, key).Err(); err != nil {
		return
	}
	s.count(opProclaim + " split")
	var rest []string
	for i := range s.inspect {
		if i != drop {
			rest = append(rest, fmt.Sprint(i))
		}
	}
	rng.Shuffle(len(rest), func(a, b int) { rest[a], rest[b] = rest[b], rest[a] })
	fails := rest[:len(rest)/2]
	v := fmt.Sprintf("%c worker %d, split %d, fail[%s]", 'a'+rng.IntN(26), h.worker, n, strings.Join(fails, ","))
	err := ls.ld.Proclaim(ctx, v)
	h.note("split Proclaim(%q) after dropping the key on node %d: %v", v, drop, errText(err))
	switch {
	case err == nil && s.proclaimedOn(ctx, ls.name, v) >= stressQuorum:
		// An extension of the leadership in flight as the key was
		// dropped healed that node before the Proclaim reached it: the
		// Proclaim did take a quorum (its history entry is there, which
		// a heal does not write). Not a split.
		h.note("the dropped key on node %d was healed before the Proclaim reached it", drop)
		s.count(opProclaim + " split healed first")
		s.publish(ls.name, ls.ld.Lock().Fence(), v, pubOK)
		ls.values, ls.uncertain = append(ls.values, v), false
	case err == nil:
		s.failf("worker %d: a Proclaim that %d of %d nodes took (split) succeeded (%s)", h.worker, len(rest)-len(fails), len(s.inspect), h)
	case !unsent(err):
		s.publish(ls.name, ls.ld.Lock().Fence(), v, pubMinority)
		s.leaderAfterSplit(ctx, h, ls, v)
	}
}

// proclaimedOn counts the nodes whose history of election name has an
// entry of value v, which only a Proclaim that took the node writes. A
// node that does not answer counts as having it: the count is a bound
// on what the Proclaim could have taken.
func (s *stressRun) proclaimedOn(ctx context.Context, name, v string) int {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	n := 0
	for _, c := range s.inspect {
		ms, err := c.ZRange(rctx, redlock.KeyName("terms", name), 0, -1).Result()
		if err != nil || slices.ContainsFunc(ms, func(m string) bool { return strings.Contains(m, v) }) {
			n++
		}
	}
	return n
}

// leaderAfterSplit reads the leader after a split Proclaim: the holders'
// values tie, two against two, and Leader must still report the last
// value on a quorum, not the split one. Checked when every node answered
// an Inspect just before and just after the read, so that Leader's
// reads, between them, saw every node (with nodes down, a value on a
// bare quorum and the split one may look alike).
func (s *stressRun) leaderAfterSplit(ctx context.Context, h *stressHold, ls *leading, split string) {
	s.count(opLeader + " after a split")
	key := redlock.KeyName("election", ls.name)
	want, certain := ls.ld.Value(), !ls.uncertain
	before := s.everyNode(ctx, s.inspector, key) && ls.ld.Lock().Validity() > 0
	got, err := s.inspector.Election(ls.name).Leader(ctx)
	after := s.everyNode(ctx, s.inspector, key) && ls.ld.Lock().Validity() > 0
	h.note("Leader after the split: %q, term %d: %v", got.Value, got.Term, errText(err))
	if before && after && certain && err == nil && got.Term == ls.ld.Lock().Fence() && got.Value != want {
		// What each node holds now, value and last history entries, to
		// tell a wrong reading from a split that reached a quorum.
		var nodes []string
		for i, c := range s.inspect {
			m, _ := c.ZRange(ctx, redlock.KeyName("terms", ls.name), -3, -1).Result()
			v, _ := c.Get(ctx, key).Result()
			_, meta, _ := strings.Cut(v, "\x00")
			nodes = append(nodes, fmt.Sprintf("node %d: %q, history %q", i+1, meta, m))
		}
		s.failf("worker %d: Leader of %s after a split Proclaim (%q) while every node answered: want the value on a quorum %q, got %q (now %s) (%s)",
			h.worker, ls.name, split, want, got.Value, strings.Join(nodes, "; "), h)
	}
	s.observeAfterSplit(ctx, h, ls)
}

// everyNode reports whether every node answered an Inspect of key
// through c.
func (s *stressRun) everyNode(ctx context.Context, c *redlock.Client, key string) bool {
	hd, err := c.Inspect(ctx, key)
	if err != nil {
		return false
	}
	for _, n := range hd.Nodes {
		if n.Err != nil {
			return false
		}
	}
	return true
}

// observeAfterSplit observes the leader's own election, right after a
// split Proclaim, on the patient observer, whose reads wait for each
// node longer than a pause lasts: when every node answers it first, and
// no node is killed until the observation ends, every history read
// answers from all five, on which a split Proclaim's entry is on two,
// fewer than a quorum, so the observer must deliver none of the term's
// split values (Observe delivers only what may be on a quorum). Nothing
// else publishes in the term meanwhile: this is its leader's goroutine.
func (s *stressRun) observeAfterSplit(ctx context.Context, h *stressHold, ls *leading) {
	term := ls.ld.Lock().Fence()
	g0 := s.killGen.Load()
	if g0%2 != 0 || !s.everyNode(ctx, s.patient, redlock.KeyName("election", ls.name)) {
		return
	}
	s.count(opObserve + " after a split")
	var got []redlock.Leader
	func() {
		octx, cancel := context.WithCancel(ctx)
		defer cancel()
		ch := s.patient.Election(ls.name).Observe(octx)
		// Until observeAfterSplitFor after its first delivery, which
		// the same read's history follows at once.
		t := time.NewTimer(patientTimeout)
		defer t.Stop()
		for {
			select {
			case l, ok := <-ch:
				if !ok {
					return
				}
				if len(got) == 0 {
					t.Reset(observeAfterSplitFor)
				}
				got = append(got, l)
			case <-t.C:
				cancel()
				for range ch {
				}
				return
			}
		}
	}()
	h.note("Observe after the split delivered %+v", got)
	if s.killGen.Load() != g0 || ctx.Err() != nil || len(got) == 0 {
		return
	}
	s.count(opObserve + " after a split, checked")
	s.mu.Lock()
	ps := slices.Clone(s.pubs[pubKey(ls.name, term)])
	s.mu.Unlock()
	for _, l := range got {
		for _, p := range ps {
			if l.Term == term && p.outcome == pubMinority && p.value == l.Value {
				s.failf("worker %d: Observe of %s, term %d, started after a split Proclaim, while every node answered: delivered %q, which the split Proclaim left on fewer nodes than a quorum: want only what may be on a quorum (delivered: %+v; published in term %d: %+v) (%s)",
					h.worker, ls.name, term, l.Value, got, term, ps, h)
			}
		}
	}
}

// observeAfterSplitFor is how long observeAfterSplit goes on observing
// after the first delivery: what the same read's history shows follows
// it at once, and a shorter observation is less often cut by a kill.
const observeAfterSplitFor = 200 * time.Millisecond

// foreignHistory plants a list (a value none of our kinds writes) at an
// election's history key on every node, and campaigns: Campaign wins but
// cannot publish its term, and must return with an error matching
// ErrNotObtained and ErrUnreachable that names the server's WRONGTYPE,
// not win again and again until its ctx ends. It campaigns on a Client
// with the default per-node timeout that dials the nodes directly, on
// which a won attempt's publication meets the lists on at least three
// nodes while at most two are faulted. The election is under xprefix,
// outside the leftover check, and purged at the end.
func (s *stressRun) foreignHistory(ctx context.Context, id int) {
	var lk *stressLocker
	for _, q := range s.quorum {
		if q.nodeTimeout == 0 && !strings.Contains(q.name, "proxies") && !strings.Contains(q.name, "guard") {
			lk = q
			break
		}
	}
	if lk == nil {
		return
	}
	s.count(opCampaign + " on a foreign history")
	name := s.freshKey("fh", true)
	hk := redlock.KeyName("terms", name)
	for _, c := range s.inspect {
		_ = c.RPush(ctx, hk, "not a history").Err()
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	t0 := time.Now()
	ld, err := electionOf(lk, name).Campaign(cctx, fmt.Sprintf("worker %d", id), 10*time.Second)
	took := time.Since(t0)
	if ld != nil {
		// A node that was down when the list was planted: its history
		// took the term, and a quorum may be reached without the others.
		_ = ld.Resign(context.Background())
		return
	}
	foreign := strings.Contains(err.Error(), "WRONGTYPE")
	switch {
	case ctx.Err() != nil:
	case isCtxErr(err) && foreign:
		s.failf("worker %d: Campaign(%s) with a list at its history key on every node won, could not publish its term (WRONGTYPE), and tried again until its ctx ended after %v: want it to stop at once: %v", id, name, took, err)
	case isCtxErr(err):
		// It never won (the nodes were busy or down): nothing to check.
	case !errors.Is(err, redlock.ErrNotObtained) || !errors.Is(err, redlock.ErrUnreachable) || !foreign:
		s.failf("worker %d: Campaign(%s) with a list at its history key on every node: want an error matching ErrNotObtained and ErrUnreachable that says WRONGTYPE, got after %v: %v", id, name, took, err)
	}
}

// closeWhileObserved observes election name on a Client of its own whose
// receiver never reads, then closes the Client: the observer must end
// with it (checkGoroutines finds one left behind).
func (s *stressRun) closeWhileObserved(ctx context.Context, id int, name string) {
	s.count(opObserve + " of a closed Client")
	c, err := redlock.New(s.direct)
	if err != nil {
		s.failf("worker %d: redlock.New: %v", id, err)
		return
	}
	_ = c.Election(name).Observe(ctx) // never read
	t := time.NewTimer(50 * time.Millisecond)
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	if err := c.Close(); err != nil {
		s.failf("worker %d: Close of a Client with an observer: %v", id, err)
	}
}

// oneNodeStep runs a TryLock on the one-node Client, whose per-node
// timeout is 10s, under a ctx of tens of milliseconds: it must return at
// the ctx's end, also while the node is paused.
func (s *stressRun) oneNodeStep(ctx context.Context, id int, rng *rand.Rand) {
	s.count(opTryLock + " on one node")
	until := time.Duration(5+rng.IntN(95)) * time.Millisecond
	cctx, cancel := context.WithTimeout(ctx, until)
	defer cancel()
	k := s.freshKey("one", true)
	t0 := time.Now()
	l, err := s.oneNode.TryLock(cctx, k, 10*time.Second)
	s.checkBound(id, fmt.Sprintf("TryLock on the one-node Client, ctx ending after %v", until), time.Since(t0), until+stressSlack)
	if err == nil {
		_ = l.Unlock(context.Background())
	}
}

// failHistory is a go-redis hook that fails the election history's reads
// while armed, alone or in a pipeline: an observer whose history reads
// do not get through.
type failHistory struct{ armed atomic.Bool }

func (f *failHistory) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failHistory) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.fail(cmd) {
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (f *failHistory) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		rest := cmds[:0:0]
		for _, cmd := range cmds {
			if !f.fail(cmd) {
				rest = append(rest, cmd)
			}
		}
		if len(rest) == 0 {
			return nil
		}
		return next(ctx, rest)
	}
}

func (f *failHistory) fail(cmd redis.Cmder) bool {
	if !f.armed.Load() {
		return false
	}
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	if a, _ := args[1].(string); a == wire.ScriptHistory.SHA || a == wire.ScriptHistory.Src {
		cmd.SetErr(errors.New("stress: history read failed on purpose"))
		return true
	}
	return false
}

// observeRacing starts an Observe of the leader's own election on a
// Client of its own whose history reads fail, waits for its first
// delivery (the leader's current value, from its leader read), then
// proclaims another value and the first one again, lets the history reads
// through and proclaims a third: the observer must deliver all three,
// in order, after the first. An observer that places itself at the
// last publication with the value it delivered skips the second.
func (s *stressRun) observeRacing(ctx context.Context, h *stressHold, ls *leading, n int) {
	s.count(opObserve + " racing Proclaims")
	hook := &failHistory{}
	var cls []redis.UniversalClient
	for _, nd := range s.nodes {
		c := stressNodeClient(s.t, nd.Addr())
		c.AddHook(hook)
		cls = append(cls, c)
	}
	defer func() {
		for _, c := range cls {
			_ = c.Close()
		}
	}()
	oc, err := redlock.New(cls)
	if err != nil {
		s.failf("worker %d: redlock.New: %v", h.worker, err)
		return
	}
	defer func() { _ = oc.Close() }()
	hook.armed.Store(true)
	// Bounded by the waits below, not by a deadline of its own: one
	// that ended while the Proclaims were still running (they may take
	// seconds under the faults) cut the last delivery off.
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := oc.Election(ls.name).Observe(octx)
	var got []redlock.Leader
	recv := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case l, ok := <-ch:
			if ok {
				got = append(got, l)
			}
			return ok
		case <-t.C:
			return false
		}
	}
	term := ls.ld.Lock().Fence()
	if !recv(2*time.Second) || got[0].Term != term {
		return // no leader read in time, or not this leadership's
	}
	first := got[0].Value
	want := []string{first, fmt.Sprintf("worker %d, racing %d", h.worker, n), first, fmt.Sprintf("worker %d, racing %d, after", h.worker, n)}
	ok := s.proclaimValue(ctx, h, ls, want[1]) && s.proclaimValue(ctx, h, ls, want[2])
	hook.armed.Store(false)
	ok = ok && s.proclaimValue(ctx, h, ls, want[3])
	// What may be on a quorum may be delivered between them (a split
	// Proclaim's value while an answer was missing, a failed Proclaim's
	// that landed on enough nodes): only the values of want are waited
	// for and compared.
	vals := func() []string {
		var vs []string
		for _, l := range got {
			if l.Term == term && slices.Contains(want, l.Value) {
				vs = append(vs, l.Value)
			}
		}
		return vs
	}
	for len(vals()) < len(want) && recv(3*time.Second) {
	}
	cancel()
	for recv(time.Second) {
	}
	h.note("Observe racing Proclaims delivered %+v", got)
	vs := vals()
	if ok && ls.ld.Lock().Validity() > 0 && (len(vs) < len(want) || !slices.Equal(vs[:len(want)], want)) {
		s.failf("worker %d: Observe of %s started before Proclaims of %q: want %q delivered in order, got %q (%s)", h.worker, ls.name, want[1:], want, vs, h)
	}
}

// proclaimValue proclaims v for the leader, records it, and reports
// whether it succeeded.
func (s *stressRun) proclaimValue(ctx context.Context, h *stressHold, ls *leading, v string) bool {
	s.count(opProclaim)
	err := ls.ld.Proclaim(ctx, v)
	h.note("Proclaim(%q): %v", v, errText(err))
	switch {
	case err == nil:
		s.publish(ls.name, ls.ld.Lock().Fence(), v, pubOK)
		ls.values, ls.uncertain = append(ls.values, v), false
		return true
	case !unsent(err):
		s.publish(ls.name, ls.ld.Lock().Fence(), v, pubUnknown)
		ls.uncertain = true
	}
	return false
}
