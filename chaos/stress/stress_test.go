package stress_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/chaos"
)

// TestStress is the randomized adversarial test of house-style point 23:
// workers run random mixes of every acquisition and holding call, over
// contended keys, with contexts cancelled at random instants and faults on
// real nodes, and the whole history is checked afterwards. It must catch,
// among others, two concurrent Extends on one *Lock that leave Validity
// longer than the nodes' TTL, a panic in Do's fn that keeps the lock
// extended, and clean-up releases of lost or cancelled attempts that never
// reach the nodes.
//
// Every random choice (operations, keys, TTLs, node timeouts, cancellation
// instants, holding times, faults) comes from math/rand/v2 sources seeded
// from -stress.seed, one per worker and per fault injector, so a seed
// replays the same schedule of choices; the timing of the machine is not
// replayed. The seed is logged at the start and printed with every failure.
//
// About a third of the operations are the lock family's: TryLockPath and
// LockPath on a small tree of related paths, TryRLock and RLock mixed with
// TryLock and Lock writers on two read-write keys, TryAcquire and Acquire
// on a semaphore of limit stressSemLimit; their holds are extended,
// auto-extended and cancelled like the others.
//
// Invariants checked once the workload and faults have stopped:
//
//  1. No two holds that exclude each other overlap while both holders
//     believed their lock valid (chaos.Check: two writers of one key, a
//     writer and a reader of it, two folder locks on related paths), no
//     more than stressSemLimit permits are held at once, fenced writes
//     that the resource accepted are never stale, and a fenced hold whose
//     attempt started after another's acquisition returned has the larger
//     fence. A run of 10s or more must have held each kind of the family.
//  2. Quiescence: every worker returns (else "hang"), every lock a worker
//     got was unlocked, and within stressSettle no lock key is left on any
//     node: lock keys, readers (ReadersKey), semaphores, and the path
//     tree's holder keys and intention records (PathKey); keys a killed or
//     paused node may have missed a release for are excused (see
//     checkLeftovers); if some are, none may outlive its TTL.
//  3. Goroutines are back to the baseline taken after set-up.
//  4. No call panics, except Do with a panicking fn, which must pass the
//     panic on unchanged; every call returns within its bound (see
//     stressSlack) and with an error it documents.
//  5. Elections (stress_election_test.go): Campaign, Proclaim, Resign,
//     Inspect, Leader and Observe. No two leaderships of one election
//     are valid at once, and terms rise in election order (chaos.Check);
//     Observe delivers in term order, each term's publications in the
//     order published, skipping none on a quorum, and never first a value
//     a split Proclaim left on a minority (nor at all, when it starts
//     after the split and every node answers); Leader reports the last
//     value on a quorum after a split Proclaim; a Campaign with a foreign
//     value at its history key stops at once (WRONGTYPE); an observer
//     ends with its Client's Close; a one-node Client returns at its
//     ctx's end; Inspect never returns a holder's token, and, while no
//     node is killed or paused, agrees with the leader that calls it, as
//     Leader does.
//  6. The contracts of the operation families of stress_contracts_test.go,
//     which -stress.ops turns on one at a time (default: all): a resumed
//     AutoExtend extends; a burst of thousands of calls on healthy nodes
//     never fails a node; a lock found lost on a quorum reports it at
//     once (Validity <= 0, Done closed); the restart guard refuses the
//     votes of a node restarted within its window, also on WithTimeout
//     clones; a foreign value at a lock key fails the nodes, with
//     WRONGTYPE, and is never contention; many goroutines of several
//     Clients waiting with Lock for one key (the wait queue) hold it in
//     turn, each Lock returning within its bound.
func TestStress(t *testing.T) {
	d := *stressFor
	if testing.Short() {
		d = min(d, 5*time.Second)
	}
	seed := *stressSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	families, err := parseFamilies(*stressOps)
	if err != nil {
		t.Fatal(err)
	}
	s := newStressRun(t, seed, d, families)
	t.Logf("stress: seed %d (replay: %s)", seed, s.replay())

	if !s.run(d) {
		t.Fatalf("hang: workers had not all returned %v after the workload ended; want every call to return within its bound%s\n%s",
			stressHangAfter, s.seedNote(), allStacks())
	}
	h := s.rec.History()
	s.checkHistory(h)
	s.checkObserved(h)
	s.checkFamilyProgress(d, h)
	s.checkUnlocked()
	s.checkFamilies()
	s.purgeOutside()
	left := s.checkLeftovers()
	s.closeLockers()
	s.checkGoroutines()
	s.report(d, h, left)
	s.emitFailures()
}

var (
	stressFor  = flag.Duration("stress", 30*time.Second, "how long TestStress runs its workload (make soak runs it longer)")
	stressSeed = flag.Int64("stress.seed", 0, "TestStress's seed, to replay its random choices; 0 picks one from the time")
	stressOps  = flag.String("stress.ops", "all", "TestStress's operation families of stress_contracts_test.go, comma-separated (resume,burst,stolen,clone,foreign,contend), all or none")
)

const (
	stressNodes   = 5
	stressWorkers = 14
	// stressMaxTTL is the longest TTL any acquisition or Extend uses; a
	// key an Unlock or clean-up missed is gone stressMaxTTL after it was
	// last set.
	stressMaxTTL = 20 * time.Second
	// stressSettle is how long the nodes may take, after quiescence, to
	// lose every lock key: far less than the long TTLs most locks use, so
	// an orphaned key is still there to be seen.
	stressSettle = 4 * time.Second
	// stressHangAfter bounds the wait for the workers once the workload
	// has ended.
	stressHangAfter = 20 * time.Second
)

// Kinds of operations, counted in the report.
const (
	opTryLock     = "TryLock"
	opLock        = "Lock"
	opTryLockKeys = "TryLockKeys"
	opLockKeys    = "LockKeys"
	opMultiTry    = "MultiLock.TryLock"
	opMultiLock   = "MultiLock.Lock"
	opFencedTry   = "fenced TryLock"
	opFencedLock  = "fenced Lock"
	opFreshTry    = "TryLock on a fresh key"
	opStorm       = "TryLock cancelled at a random instant"
	opDo          = "Do"
	opExtend      = "Extend"
	opDualExtend  = "Extend x2 at once"
	opAutoExtend  = "AutoExtend"
	opUnlock      = "Unlock"
	opFencedSet   = "FencedSet"
	// The lock family's operations (family.go).
	opTryLockPath = "TryLockPath"
	opLockPath    = "LockPath"
	opTryRLock    = "TryRLock"
	opRLock       = "RLock"
	opRWTryLock   = "TryLock of a read-write key"
	opRWLock      = "Lock of a read-write key"
	opTryAcquire  = "TryAcquire"
	opAcquire     = "Acquire"
)

// stressSemLimit is the limit of the stress semaphore: on 5 nodes a
// permit needs floor(2*5/3)+1 = 4 grants, so one faulty node at a
// time still leaves permits to win, two (a process fault and a slowed
// node) do not.
const stressSemLimit = 2

// worker runs random operations until ctx ends. All its choices come
// from rng.
//
// The first stressStormers workers only make attempts on fresh keys
// whose ctx ends at a random instant within 1.5ms, around the decision:
// cancelled wins must release every grant, late ones included.
func (s *stressRun) worker(ctx context.Context, id int, rng *rand.Rand) {
	for s.calmRLock(ctx) {
		switch {
		case id < stressStormers:
			s.guard(id, func() { s.storm(ctx, id, rng) })
		case id < stressStormers+stressElectioneers:
			s.guard(id, func() { s.electionStep(ctx, id, rng, true) })
		default:
			s.guard(id, func() { s.step(ctx, id, rng) })
		}
		s.calm.RUnlock()
	}
}

// stressStormers is how many workers run storm.
const stressStormers = 2

// stressElectioneers is how many workers, after the stormers, run only
// election operations: Campaigns with Proclaims (split ones, and ones
// that repeat a value) racing the Observes' first reads.
const stressElectioneers = 3

// storm makes one TryLock on a fresh key, with the longest TTL, and
// cancels it at a random instant within 1.5ms; a win that stands is
// unlocked at once. A grant it leaves behind stays for the TTL, which
// the quiescence check sees.
func (s *stressRun) storm(ctx context.Context, id int, rng *rand.Rand) {
	q := s.quorum[rng.IntN(len(s.quorum))]
	s.mu.Lock()
	s.fresh++
	k := fmt.Sprintf("%su%d", s.prefix, s.fresh)
	s.mu.Unlock()
	actx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(time.Duration(rng.Int64N(int64(1500*time.Microsecond))), cancel)
	start := time.Now()
	l, err := q.acq.TryLock(actx, k, stressMaxTTL)
	timer.Stop()
	cancel()
	s.checkBound(id, opStorm, time.Since(start), q.roundWait(stressMaxTTL)*4+stressSlack)
	s.count(opStorm)
	if err != nil {
		return
	}
	s.count(opStorm + " won")
	if err := l.Unlock(context.Background()); err != nil && !errors.Is(err, redlock.ErrNotHeld) {
		s.failf("worker %d: %s: Unlock: want nil or ErrNotHeld, got %v", id, opStorm, err)
	}
}

// guard runs f and records any panic in it as a failure: only Do's
// deliberate panics are expected, and step recovers those itself.
func (s *stressRun) guard(id int, f func()) {
	defer func() {
		if r := recover(); r != nil {
			s.failf("worker %d: unexpected panic: %v\n%s", id, r, debug.Stack())
		}
	}()
	f()
}

// step draws one operation and runs it, with the hold that follows a win.
func (s *stressRun) step(ctx context.Context, id int, rng *rand.Rand) {
	if s.extraStep(ctx, id, rng) || s.electionStep(ctx, id, rng, false) {
		return
	}
	q := s.quorum[rng.IntN(len(s.quorum))]
	m := s.multi[rng.IntN(len(s.multi))]
	plain := s.plain[rng.IntN(len(s.plain))]
	group := s.groups[rng.IntN(len(s.groups))]
	fenced := s.fenced[rng.IntN(len(s.fenced))]
	a := attempt{worker: id, ttl: lockTTL(rng)}
	if rng.IntN(100) < 35 {
		s.familyStep(ctx, rng, a, q, m)
		return
	}
	switch p := rng.IntN(100); {
	case p < 18:
		a.op, a.lk, a.keys = opTryLock, q, []string{plain}
	case p < 36:
		a.op, a.lk, a.keys, a.wait = opLock, q, []string{plain}, true
	case p < 42:
		a.op, a.lk, a.keys = opTryLockKeys, pick(rng, q, m), group
	case p < 48:
		a.op, a.lk, a.keys, a.wait = opLockKeys, pick(rng, q, m), group, true
	case p < 53:
		a.op, a.lk, a.keys = opMultiTry, m, []string{plain}
	case p < 58:
		a.op, a.lk, a.keys, a.wait = opMultiLock, m, []string{plain}, true
	case p < 66:
		a.op, a.lk, a.keys = opFencedTry, pick(rng, q, m), []string{fenced}
		a.opts = []redlock.LockOption{redlock.WithFencing()}
	case p < 76:
		a.op, a.lk, a.keys, a.wait = opFencedLock, pick(rng, q, m), []string{fenced}, true
		a.opts = []redlock.LockOption{redlock.WithFencing()}
	case p < 86:
		// A key nobody else uses: every node grants, so a round lost
		// to a tiny node timeout or cut short by ctx has grants to
		// clean up, late ones included.
		s.mu.Lock()
		s.fresh++
		k := fmt.Sprintf("%su%d", s.prefix, s.fresh)
		s.mu.Unlock()
		a.op, a.lk, a.keys = opFreshTry, q, []string{k}
	default:
		s.do(ctx, id, rng, pick(rng, q, m), plain)
		return
	}
	s.acquireAndHold(ctx, rng, a)
}

// acquireAndHold makes the attempt and holds what it won; a client that
// lost a TryLock paces itself a little.
func (s *stressRun) acquireAndHold(ctx context.Context, rng *rand.Rand, a attempt) {
	if h := s.acquire(ctx, rng, a); h != nil {
		s.hold(ctx, rng, h)
		return
	}
	if !a.wait {
		sleepCtx(ctx, time.Duration(rng.IntN(20))*time.Millisecond)
	}
}

// familyStep draws one operation of the lock family and runs it, with
// the hold that follows a win: a folder lock on the path tree, a reader
// or a writer of a read-write key, or a permit of the semaphore. Writers
// are ordinary TryLock and Lock calls (a MultiLock's one time in four,
// fenced one time in three), which readers must exclude.
func (s *stressRun) familyStep(ctx context.Context, rng *rand.Rand, a attempt, q, m *stressLocker) {
	rw := s.rw[rng.IntN(len(s.rw))]
	a.lk = q
	switch p := rng.IntN(100); {
	case p < 13:
		a.op, a.mode, a.keys = opTryLockPath, chaos.ModePath, []string{s.stressPath(rng)}
	case p < 26:
		a.op, a.mode, a.keys, a.wait = opLockPath, chaos.ModePath, []string{s.stressPath(rng)}, true
	case p < 36:
		a.op, a.mode, a.keys = opTryRLock, chaos.ModeRead, []string{rw}
	case p < 46:
		a.op, a.mode, a.keys, a.wait = opRLock, chaos.ModeRead, []string{rw}, true
	case p < 52:
		a.op, a.lk, a.keys = opRWTryLock, pick(rng, q, m), []string{rw}
	case p < 58:
		a.op, a.lk, a.keys, a.wait = opRWLock, pick(rng, q, m), []string{rw}, true
	case p < 80:
		a.op, a.mode, a.keys, a.limit = opTryAcquire, chaos.ModePermit, []string{s.sem}, stressSemLimit
	default:
		a.op, a.mode, a.keys, a.limit, a.wait = opAcquire, chaos.ModePermit, []string{s.sem}, stressSemLimit, true
	}
	if a.mode == "" && rng.IntN(3) == 0 {
		a.opts = []redlock.LockOption{redlock.WithFencing()}
	}
	s.acquireAndHold(ctx, rng, a)
}

// stressPath draws a folder of the path tree: the root (which excludes
// every other) one time in twenty, else 1 to 3 levels below it of names
// that share prefixes ("a", "ab", "a-1"); one time in eight written with
// a leading and a trailing "/".
func (s *stressRun) stressPath(rng *rand.Rand) string {
	depth := 3
	switch p := rng.IntN(20); {
	case p < 1:
		depth = 0
	case p < 5:
		depth = 1
	case p < 12:
		depth = 2
	}
	p := s.pathRoot
	for range depth {
		p += "/" + []string{"a", "ab", "a-1"}[rng.IntN(3)]
	}
	if rng.IntN(8) == 0 {
		p = "/" + p + "/"
	}
	return p
}

// attempt is one acquisition call to make.
type attempt struct {
	worker int
	op     string
	lk     *stressLocker
	keys   []string
	ttl    time.Duration
	wait   bool // Lock or LockKeys: retry until ctx ends
	opts   []redlock.LockOption
	mode   chaos.Mode // a lock of the family (ModePath, ModeRead, ModePermit), else ""
	limit  int        // ModePermit: the semaphore's limit
}

// stressHold is a lock a worker holds, and what it did with it, for the
// messages about it.
type stressHold struct {
	worker   int
	lk       *stressLocker // the locker that won it
	l        *redlock.Lock
	ttl      atomic.Int64 // the longest TTL (ns) the lock was taken or extended with: extensions race (dualExtend)
	attempt  time.Duration
	acquired time.Duration
	mode     chaos.Mode // what it holds: "" for an exclusive lock
	limit    int        // ModePermit: the semaphore's limit
	log      []string   // what the holder did, in order
}

// acquire makes the attempt under a context that ends at a random instant
// and returns the hold it won, or nil.
func (s *stressRun) acquire(ctx context.Context, rng *rand.Rand, a attempt) *stressHold {
	s.count(a.op)
	cctx, stop, until := callCtx(ctx, rng, a.wait)
	defer stop()
	at := s.clock.Now()
	t0 := time.Now()
	var l *redlock.Lock
	var err error
	fam := a.lk.client // the family's calls are the Client's
	switch {
	case a.mode == chaos.ModePath && a.wait:
		l, err = fam.LockPath(cctx, a.keys[0], a.ttl, a.opts...)
	case a.mode == chaos.ModePath:
		l, err = fam.TryLockPath(cctx, a.keys[0], a.ttl, a.opts...)
	case a.mode == chaos.ModeRead && a.wait:
		l, err = fam.RLock(cctx, a.keys[0], a.ttl, a.opts...)
	case a.mode == chaos.ModeRead:
		l, err = fam.TryRLock(cctx, a.keys[0], a.ttl, a.opts...)
	case a.mode == chaos.ModePermit && a.wait:
		l, err = fam.Acquire(cctx, a.keys[0], a.limit, a.ttl, a.opts...)
	case a.mode == chaos.ModePermit:
		l, err = fam.TryAcquire(cctx, a.keys[0], a.limit, a.ttl, a.opts...)
	case len(a.keys) > 1 && a.wait:
		l, err = a.lk.acq.LockKeys(cctx, a.keys, a.ttl, a.opts...)
	case len(a.keys) > 1:
		l, err = a.lk.acq.TryLockKeys(cctx, a.keys, a.ttl, a.opts...)
	case a.wait:
		l, err = a.lk.acq.Lock(cctx, a.keys[0], a.ttl, a.opts...)
	default:
		l, err = a.lk.acq.TryLock(cctx, a.keys[0], a.ttl, a.opts...)
	}
	took := time.Since(t0)
	what := fmt.Sprintf("%s(%s, ttl %v) on %s, ctx ending after %v", a.op, strings.Join(a.keys, ","), a.ttl, a.lk.name, until)
	bound := 4*a.lk.roundWait(a.ttl) + stressSlack
	if a.wait {
		bound += until
	}
	s.checkBound(a.worker, what, took, bound)
	if err != nil {
		if !errors.Is(err, redlock.ErrNotObtained) {
			s.failf("worker %d: %s: want an error matching ErrNotObtained, got %v", a.worker, what, err)
		}
		return nil
	}
	s.count(a.op + " won")
	h := &stressHold{worker: a.worker, lk: a.lk, l: l, attempt: at, acquired: s.clock.Now(), mode: a.mode, limit: a.limit}
	h.ttl.Store(int64(a.ttl))
	h.note("%s won after %v (fence %d)", what, took.Round(time.Microsecond), l.Fence())
	s.holdStarted(h)
	return h
}

// hold keeps h's lock for a random while, doing random things with it
// (Extend, two Extends at once, AutoExtend, a fenced write), acting only
// while its Validity lasts; then it records one section per key and
// unlocks.
func (s *stressRun) hold(ctx context.Context, rng *rand.Rand, h *stressHold) {
	l := h.l
	if l.Fence() > 0 {
		s.fencedWrite(ctx, h)
	}
	var done <-chan struct{} // closed when the lock can no longer be proven held
	actx, stopExtending := context.WithCancel(ctx)
	defer stopExtending()
	d := time.Duration(rng.Int64N(int64(400 * time.Millisecond)))
	switch p := rng.IntN(100); {
	case p < 25:
		short := s.dualExtend(ctx, rng, h)
		// Often longer than the short TTL: a holder that believed the
		// long one after the nodes applied the short one overlaps the
		// next holder.
		d = time.Duration(rng.Int64N(int64(3 * short)))
	case p < 50:
		for range 1 + rng.IntN(2) {
			s.extend(ctx, rng, h)
		}
	case p < 65:
		s.count(opAutoExtend)
		if err := l.AutoExtend(actx); err != nil && !errors.Is(err, redlock.ErrLockLost) {
			s.failf("worker %d: AutoExtend: want nil or ErrLockLost, got %v (%s)", h.worker, err, h)
		}
		h.note("AutoExtend")
		done = l.Done()
		d = time.Duration(rng.Int64N(int64(min(2*h.maxTTL(), 1500*time.Millisecond))))
	}
	s.act(ctx, l, d, done)
	released := s.clock.Now()
	deadline := s.clock.Of(time.Now().Add(l.Validity()))
	h.note("stopped acting after %v with Validity %v", (released - h.acquired).Round(time.Microsecond), (deadline - released).Round(time.Microsecond))
	for _, k := range strings.Split(l.Key(), ",") {
		s.rec.Section(chaos.Section{
			Client: h.worker, Key: k, Token: l.Token(), Fence: l.Fence(), Mode: h.mode, Limit: h.limit,
			Attempt: h.attempt, Acquired: h.acquired, Released: released, Deadline: deadline,
		})
	}
	if rng.IntN(4) == 0 {
		stopExtending() // the extension stops first; Unlock must not care
	}
	s.unlock(rng, h)
}

// act holds l for d, or until ctx ends or done closes, acting only while
// l's Validity is positive.
func (s *stressRun) act(ctx context.Context, l *redlock.Lock, d time.Duration, done <-chan struct{}) {
	end := time.Now().Add(d)
	for {
		left, valid := time.Until(end), l.Validity()
		if left <= 0 || valid <= 0 {
			return
		}
		t := time.NewTimer(min(left, valid))
		select {
		case <-ctx.Done():
		case <-done:
		case <-t.C:
			continue // the deadline may have moved: check again
		}
		t.Stop()
		return
	}
}

// extend calls Extend once with a random TTL under a context that ends at
// a random instant.
func (s *stressRun) extend(ctx context.Context, rng *rand.Rand, h *stressHold) {
	s.count(opExtend)
	ttl := extendTTL(rng)
	cctx, stop, until := callCtx(ctx, rng, false)
	defer stop()
	err := s.timedExtend(cctx, h, ttl)
	h.note("Extend(%v), ctx ending after %v: %v", ttl, until, errText(err))
}

// dualExtend calls Extend on h's lock from two goroutines at once, one
// with a long TTL and one with a short one, and returns the short one.
func (s *stressRun) dualExtend(ctx context.Context, rng *rand.Rand, h *stressHold) (short time.Duration) {
	s.count(opDualExtend)
	short = 150*time.Millisecond + time.Duration(rng.Int64N(int64(250*time.Millisecond)))
	long := 5*time.Second + time.Duration(rng.Int64N(int64(10*time.Second)))
	first, second := long, short
	if rng.IntN(2) == 0 {
		first, second = short, long
	}
	errs := make(chan error, 1)
	go func() { errs <- s.timedExtend(ctx, h, first) }()
	err2 := s.timedExtend(ctx, h, second)
	err1 := <-errs
	h.note("Extend(%v) and Extend(%v) at once: %v; %v", first, second, errText(err1), errText(err2))
	return short
}

// timedExtend calls Extend and checks its bound and error.
func (s *stressRun) timedExtend(ctx context.Context, h *stressHold, ttl time.Duration) error {
	t0 := time.Now()
	h.raiseTTL(ttl) // sent: it may land whatever the round decides
	err := h.l.Extend(ctx, ttl)
	s.checkBound(h.worker, fmt.Sprintf("Extend(%v) of %s", ttl, h.l.Key()), time.Since(t0), h.lk.roundWait(ttl)+stressSlack)
	if err != nil && !errors.Is(err, redlock.ErrNotHeld) && !isCtxErr(err) {
		s.failf("worker %d: Extend(%v): want nil, ErrNotHeld or a context error, got %v (%s)", h.worker, ttl, err, h)
	}
	return err
}

// unlock releases h's lock, sometimes under an already cancelled context,
// which must not cut the release short.
func (s *stressRun) unlock(rng *rand.Rand, h *stressHold) {
	s.count(opUnlock)
	ctx := context.Background()
	if rng.IntN(3) == 0 {
		c, cancel := context.WithCancel(ctx)
		cancel()
		ctx = c
	}
	ttl := h.maxTTL()
	t0 := time.Now()
	err := h.l.Unlock(ctx)
	// Twice: an Unlock that hands the key to a waiting Lock of its Client
	// and loses that round releases it then (Lock.Unlock).
	s.checkBound(h.worker, fmt.Sprintf("Unlock of %s", h.l.Key()), time.Since(t0), 2*h.lk.roundWait(ttl)+stressSlack)
	if err != nil && !errors.Is(err, redlock.ErrNotHeld) {
		s.failf("worker %d: Unlock: want nil or ErrNotHeld, got %v (%s)", h.worker, err, h)
	}
	h.note("Unlock: %v", errText(err))
	s.holdEnded(h)
}

// fencedWrite writes to the resource node under h's fencing token while
// Validity lasts, and records the write.
func (s *stressRun) fencedWrite(ctx context.Context, h *stressHold) {
	l := h.l
	if l.Validity() <= 0 {
		return
	}
	s.count(opFencedSet)
	res := "res:" + l.Key()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	t0 := s.clock.Now()
	err := redlock.FencedSet(wctx, s.resource, res, l.Fence(), fmt.Sprintf("worker %d", h.worker))
	t1 := s.clock.Now()
	s.rec.Write(chaos.Write{
		Client: h.worker, Key: res, Fence: l.Fence(), Start: t0, End: t1,
		Accepted: err == nil, Late: t0 > s.clock.Of(time.Now().Add(l.Validity())),
	})
	switch {
	case errors.Is(err, redlock.ErrStaleFence):
		s.count(opFencedSet + " refused")
	case err != nil:
		s.failf("worker %d: FencedSet on the resource node, which no fault touches: want nil or ErrStaleFence, got %v", h.worker, err)
	}
	h.note("FencedSet(%d): %v", l.Fence(), errText(err))
}

// stressPanic is the value Do's fn panics with; the worker must recover
// this very pointer.
type stressPanic struct{ worker int }

// do calls Do on key with an fn that returns nil, returns an error or
// panics after a random hold, and checks that Do passes on fn's outcome.
// Do's lock is invisible to fn, so its section ends when fn stops acting
// (its ctx is the lock's proof of possession).
func (s *stressRun) do(ctx context.Context, id int, rng *rand.Rand, lk *stressLocker, key string) {
	s.count(opDo)
	ttl := 3*time.Second + time.Duration(rng.Int64N(int64(stressMaxTTL-3*time.Second)))
	cctx, stop, until := callCtx(ctx, rng, true)
	defer stop()
	var opts []redlock.LockOption
	if rng.IntN(3) == 0 {
		// A ctx that never ends, as a service's background job might
		// pass: only the lock's loss or fn's return may stop the
		// auto-extension, and the retry budget bounds the wait.
		cctx, until = context.Background(), 3*(4*lk.roundWait(ttl)+2*50*time.Millisecond) // 50ms: Lock's default retry delay
		opts = []redlock.LockOption{redlock.WithMaxTries(3)}
	}
	d := time.Duration(rng.Int64N(int64(1500 * time.Millisecond)))
	mode := rng.IntN(3) // 0: return nil, 1: return an error, 2: panic
	fnErr := errors.New("stress: fn failed")
	boom := &stressPanic{worker: id}
	at := s.clock.Now()
	ran := false
	fn := func(fctx context.Context) error {
		ran = true
		acquired := s.clock.Now()
		sleepCtx(fctx, d)
		s.rec.Section(chaos.Section{
			Client: id, Key: key, Attempt: at, Acquired: acquired,
			Released: s.clock.Now(), Deadline: chaos.Never,
		})
		switch mode {
		case 1:
			return fnErr
		case 2:
			panic(boom)
		}
		return nil
	}
	what := fmt.Sprintf("Do(%s, ttl %v) on %s, fn mode %d holding %v, ctx ending after %v (%d options)", key, ttl, lk.name, mode, d, until, len(opts))
	t0 := time.Now()
	recovered, err := callDo(cctx, lk, key, ttl, fn, opts...)
	s.checkBound(id, what, time.Since(t0), until+d+4*lk.roundWait(ttl)+stressSlack)
	switch {
	case recovered != nil && (!ran || mode != 2 || recovered != any(boom)):
		s.failf("worker %d: %s: want no panic but fn's own, got panic %v", id, what, recovered)
	case ran && mode == 2 && recovered == nil:
		s.failf("worker %d: %s: want fn's panic passed on, got return %v", id, what, err)
	case ran && mode == 1 && !errors.Is(err, fnErr):
		s.failf("worker %d: %s: want fn's error, got %v", id, what, err)
	case ran && mode == 0 && err != nil && !errors.Is(err, redlock.ErrLockLost):
		s.failf("worker %d: %s: want nil or ErrLockLost, got %v", id, what, err)
	case !ran && !errors.Is(err, redlock.ErrNotObtained):
		s.failf("worker %d: %s: want an error matching ErrNotObtained when fn did not run, got %v", id, what, err)
	}
	if ran {
		s.count(opDo + " ran fn")
	}
}

// callDo calls Do and returns the panic it passed on, or its error.
func callDo(ctx context.Context, lk *stressLocker, key string, ttl time.Duration, fn func(context.Context) error, opts ...redlock.LockOption) (recovered any, err error) {
	defer func() { recovered = recover() }()
	return nil, lk.acq.Do(ctx, key, ttl, fn, opts...)
}

// callCtx returns a context for one call that ends at a random instant:
// often within a millisecond (cancelled, or its deadline passed), else
// after tens of milliseconds, or, for a call that waits (wait: Lock), a
// deadline up to 1.5s, or for one that does not, only when parent ends.
// until is how long the call may wait for it to end (an hour: never).
func callCtx(parent context.Context, rng *rand.Rand, wait bool) (ctx context.Context, stop func(), until time.Duration) {
	instants := []time.Duration{0, 50 * time.Microsecond, 200 * time.Microsecond, time.Millisecond, 5 * time.Millisecond}
	switch p := rng.IntN(100); {
	case p < 35:
		until = instants[rng.IntN(len(instants))]
	case p < 55:
		until = []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond}[rng.IntN(3)]
	case wait:
		until = 200*time.Millisecond + time.Duration(rng.Int64N(int64(1300*time.Millisecond)))
	default:
		return parent, func() {}, time.Hour
	}
	if rng.IntN(2) == 0 {
		ctx, cancel := context.WithTimeout(parent, until)
		return ctx, cancel, until
	}
	ctx, cancel := context.WithCancel(parent)
	t := time.AfterFunc(until, cancel)
	return ctx, func() { t.Stop(); cancel() }, until
}

// lockTTL draws an acquisition's TTL: mostly long (5s to stressMaxTTL), so
// that a key nobody released is still on the nodes when checked, and
// sometimes short (100ms to 2s), so that locks expire and are extended.
func lockTTL(rng *rand.Rand) time.Duration {
	if rng.IntN(10) < 7 {
		return 5*time.Second + time.Duration(rng.Int64N(int64(stressMaxTTL-5*time.Second)))
	}
	return 100*time.Millisecond + time.Duration(rng.Int64N(int64(1900*time.Millisecond)))
}

// extendTTL draws an Extend's TTL, from 100ms to 15s.
func extendTTL(rng *rand.Rand) time.Duration {
	if rng.IntN(2) == 0 {
		return 100*time.Millisecond + time.Duration(rng.Int64N(int64(900*time.Millisecond)))
	}
	return time.Second + time.Duration(rng.Int64N(int64(14*time.Second)))
}

// pick returns a or, one time in four, b.
func pick[T any](rng *rand.Rand, a, b T) T {
	if rng.IntN(4) == 0 {
		return b
	}
	return a
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// note appends to what the holder did.
func (h *stressHold) note(format string, args ...any) {
	h.log = append(h.log, fmt.Sprintf(format, args...))
}

// String describes the hold: who, which lock, and what it did.
func (h *stressHold) String() string {
	return fmt.Sprintf("worker %d, token %s: %s", h.worker, h.l.Token(), strings.Join(h.log, "; "))
}

// maxTTL returns the longest TTL h's lock was taken or extended with.
func (h *stressHold) maxTTL() time.Duration { return time.Duration(h.ttl.Load()) }

// raiseTTL records an extension of h's lock to ttl.
func (h *stressHold) raiseTTL(ttl time.Duration) {
	for {
		old := h.ttl.Load()
		if int64(ttl) <= old || h.ttl.CompareAndSwap(old, int64(ttl)) {
			return
		}
	}
}
