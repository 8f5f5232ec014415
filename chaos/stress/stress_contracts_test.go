package stress_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

// The operation families that check a contract of a lock's life beyond
// mutual exclusion: each can be turned on alone with -stress.ops, so that
// a failure is shown without the others' (the default is all of them).
//
//   - resume: AutoExtend again once its ctx has ended must resume the
//     extension: the lock then stays held for several TTLs, or, lost for
//     a legitimate reason (a stall, slow nodes), its Done closes before
//     Validity runs out.
//   - burst: thousands of TryLocks at once on one client (far more than
//     one node's queue), then as many Unlocks, while every node is
//     healthy: a node that answers never counts as failed, so no call
//     may fail as unreachable, nor an Unlock find its lock not held.
//   - stolen: another owner's token written (or the key deleted) on a
//     quorum of a held lock's nodes: once an Extend or an auto-extension
//     has learned that the lock cannot be held on a quorum, Validity is
//     <= 0 and Done is closed at once, with an Err.
//   - clone: Clients over go-redis WithTimeout clones of the node clients
//     (which share their parent's pool and dials), some with the restart
//     guard, beside one guarded Client over the plain clients: a node
//     restarted less than the guard's window ago never votes for a
//     guarded Client.
//   - foreign: a value of another type (set, list, hash, sorted set,
//     stream) at a lock key: acquiring it fails as unreachable, the
//     nodes' WRONGTYPE errors in the error, never as contended, never
//     won, and the value is left as it was.
//   - contend: many goroutines of several Clients wait with Lock for one
//     key (stress_contend_test.go): every Lock returns within its bound
//     while waiters' ctxs end mid-queue, and the wait queue's keys are
//     gone at quiescence.
const (
	famResume  = "resume"
	famBurst   = "burst"
	famStolen  = "stolen"
	famClone   = "clone"
	famForeign = "foreign"
	famContend = "contend"
)

// stressFamilies is every family, in the order -stress.ops lists them.
var stressFamilies = []string{famResume, famBurst, famStolen, famClone, famForeign, famContend}

// parseFamilies reads -stress.ops: "all", "none" or a comma-separated
// list of families.
func parseFamilies(v string) (map[string]bool, error) {
	on := map[string]bool{}
	switch v = strings.TrimSpace(v); v {
	case "all", "":
		for _, f := range stressFamilies {
			on[f] = true
		}
		return on, nil
	case "none":
		return on, nil
	}
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(stressFamilies, f) {
			return nil, fmt.Errorf("-stress.ops: unknown family %q; want all, none, or some of %s", f, strings.Join(stressFamilies, ","))
		}
		on[f] = true
	}
	return on, nil
}

// Kinds of the families' operations, counted in the report.
const (
	opResume        = "AutoExtend resumed after its ctx ended"
	opBurstTry      = "burst TryLock"
	opBurstUnlock   = "burst Unlock"
	opStolenToken   = "another owner's token on a quorum"
	opStolenDeleted = "keys deleted on a quorum"
	opForeign       = "acquisition over a foreign value"
)

const (
	// stressQuorum is the quorum of stressNodes nodes.
	stressQuorum = stressNodes/2 + 1
	// stressDoneGrace is how long after Validity ran out an open Done is
	// still put down to a late timer on a stalled machine rather than
	// to a lock that nothing watches any more.
	stressDoneGrace = time.Second
	// stressGuard is the restart guard of the guarded Clients.
	stressGuard = 1500 * time.Millisecond
	// stressHealthy is the one node no fault ever touches, on any path.
	stressHealthy = stressNodes - 1
)

// familyStepShare is the share, in percent, of a worker's steps that run
// an operation of the families turned on (resume, stolen, foreign).
const familyStepShare = 8

// extraStep runs one operation of the per-step families turned on, drawn
// from rng, and reports whether it did. The draw is made whatever is on,
// so that turning families on or off does not shift the other choices
// more than it must.
func (s *stressRun) extraStep(ctx context.Context, id int, rng *rand.Rand) bool {
	p := rng.IntN(100)
	var on []string
	for _, f := range []string{famResume, famStolen, famForeign} {
		if s.families[f] {
			on = append(on, f)
		}
	}
	if p >= familyStepShare || len(on) == 0 {
		return false
	}
	lk := pick(rng, s.quorum[rng.IntN(len(s.quorum))], s.multi[rng.IntN(len(s.multi))])
	switch on[rng.IntN(len(on))] {
	case famResume:
		s.resume(ctx, id, rng, lk)
	case famStolen:
		s.stolen(ctx, id, rng, lk)
	case famForeign:
		s.foreign(ctx, id, rng, lk)
	}
	return true
}

// freshKey returns a key nobody else uses: under the run's prefix (lock
// keys, checked for leftovers) or, when outside, under xprefix (keys the
// families write by hand, purged at the end).
func (s *stressRun) freshKey(tag string, outside bool) string {
	s.mu.Lock()
	s.fresh++
	n := s.fresh
	s.mu.Unlock()
	if outside {
		return fmt.Sprintf("%s%s%d", s.xprefix, tag, n)
	}
	return fmt.Sprintf("%s%s%d", s.prefix, tag, n)
}

// tryFresh takes key on lk with a TryLock under ctx and returns the hold,
// or nil when it was not won.
func (s *stressRun) tryFresh(ctx context.Context, id int, lk *stressLocker, op, key string, ttl time.Duration) *stressHold {
	at := s.clock.Now()
	t0 := time.Now()
	l, err := lk.acq.TryLock(ctx, key, ttl)
	what := fmt.Sprintf("%s: TryLock(%s, ttl %v) on %s", op, key, ttl, lk.name)
	s.checkBound(id, what, time.Since(t0), 4*lk.roundWait(ttl)+stressSlack)
	if err != nil {
		if !errors.Is(err, redlock.ErrNotObtained) {
			s.failf("worker %d: %s: want an error matching ErrNotObtained, got %v", id, what, err)
		}
		return nil
	}
	h := &stressHold{worker: id, lk: lk, l: l, attempt: at, acquired: s.clock.Now()}
	h.note("%s won after %v", what, time.Since(t0).Round(time.Microsecond))
	s.holdStarted(h)
	return h
}

// followLock follows h's lock until its Done closes (true), ctx ends or
// until passes (false), and fails when Done is still open
// stressDoneGrace after Validity ran out: nothing would then tell the
// holder its lock is gone.
func (s *stressRun) followLock(ctx context.Context, op string, h *stressHold, until time.Time) bool {
	done := h.l.Done()
	for {
		select {
		case <-done:
			return true
		default:
		}
		v := h.l.Validity()
		if v < -stressDoneGrace {
			select {
			case <-done:
				return true
			default:
			}
			s.failf("worker %d: %s: want Done closed before Validity runs out, got Done still open %v after it ran out (%s)",
				h.worker, op, (-v).Round(time.Millisecond), h)
			return false
		}
		left := time.Until(until)
		if left <= 0 || ctx.Err() != nil {
			return false
		}
		t := time.NewTimer(max(min(left, v+stressDoneGrace), time.Millisecond))
		select {
		case <-done:
			t.Stop()
			return true
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// resume takes a short-lived fresh key, auto-extends it under a ctx that
// ends after a random while, then calls AutoExtend again: it must resume
// the extension (or return Err() when the lock already ended), and the
// lock must then stay held for three TTLs or report its loss through
// Done in time.
func (s *stressRun) resume(ctx context.Context, id int, rng *rand.Rand, lk *stressLocker) {
	s.count(opResume)
	ttl := 300*time.Millisecond + time.Duration(rng.Int64N(int64(900*time.Millisecond)))
	h := s.tryFresh(ctx, id, lk, opResume, s.freshKey("r", false), ttl)
	if h == nil {
		return
	}
	l := h.l
	first, cancelFirst := context.WithCancel(ctx)
	if err := l.AutoExtend(first); err != nil && !errors.Is(err, redlock.ErrLockLost) {
		s.failf("worker %d: %s: first AutoExtend: want nil or ErrLockLost, got %v (%s)", id, opResume, err, h)
	}
	// Ended at once, or after up to one and a half TTLs (an extension or
	// two in between); the second call comes at once, or a little later.
	run := time.Duration(0)
	if rng.IntN(3) > 0 {
		run = time.Duration(rng.Int64N(int64(3 * ttl / 2)))
	}
	sleepCtx(ctx, run)
	cancelFirst()
	gap := time.Duration(0)
	if rng.IntN(2) == 0 {
		gap = time.Duration(rng.Int64N(int64(ttl / 4)))
		sleepCtx(ctx, gap)
	}
	second, cancelSecond := context.WithCancel(ctx)
	defer cancelSecond()
	n0 := l.Extensions()
	err := l.AutoExtend(second)
	h.note("AutoExtend; its ctx ended after %v; AutoExtend again %v later: %v", run, gap, errText(err))
	switch {
	case err == nil:
		s.mu.Lock()
		s.resumed++
		s.mu.Unlock()
		s.count(opResume + ": resumed")
		closed := s.followLock(ctx, opResume, h, time.Now().Add(3*ttl))
		if closed && !errors.Is(l.Err(), redlock.ErrLockLost) {
			s.failf("worker %d: %s: Done closed: want Err matching ErrLockLost, got %v (%s)", id, opResume, l.Err(), h)
		}
		if l.Extensions() > n0 {
			s.mu.Lock()
			s.resumedExtended++
			s.mu.Unlock()
		}
		h.note("then %d extensions; Done closed: %v (%v)", l.Extensions()-n0, closed, errText(l.Err()))
	case errors.Is(err, redlock.ErrLockLost) && isClosed(l.Done()):
		s.count(opResume + ": lost before resuming")
	default:
		s.failf("worker %d: %s: want AutoExtend, once its previous ctx ended, to resume the extension (nil), or to return Err() when the lock already ended, got %v (Done closed: %v, Validity %v) (%s)",
			id, opResume, err, isClosed(l.Done()), l.Validity().Round(time.Millisecond), h)
	}
	s.unlock(rng, h)
}

// stolen takes a fresh key, then writes another owner's token on a random
// quorum or more of its nodes, or deletes the key there, by hand; then
// either Extend is called, or the lock is auto-extended. Once either has
// seen that the lock cannot be held on a quorum, Validity must be <= 0
// and Done closed, with an Err. Extend must not win over another
// owner's token on a quorum, and Unlock must leave that token alone.
func (s *stressRun) stolen(ctx context.Context, id int, rng *rand.Rand, lk *stressLocker) {
	op := opStolenToken
	deleted := rng.IntN(3) == 0
	if deleted {
		op = opStolenDeleted
	}
	s.count(op)
	auto := rng.IntN(2) == 0
	ttl := 2*time.Second + time.Duration(rng.Int64N(int64(8*time.Second)))
	if auto {
		// Short, so that the auto-extension, at half the TTL, comes soon.
		ttl = 400*time.Millisecond + time.Duration(rng.Int64N(int64(1100*time.Millisecond)))
	}
	k := s.freshKey("s", true)
	h := s.tryFresh(ctx, id, lk, op, k, ttl)
	if h == nil {
		return
	}
	l := h.l
	actx, stopExtending := context.WithCancel(ctx)
	defer stopExtending()
	if auto {
		if err := l.AutoExtend(actx); err != nil && !errors.Is(err, redlock.ErrLockLost) {
			s.failf("worker %d: %s: AutoExtend: want nil or ErrLockLost, got %v (%s)", id, op, err, h)
		}
		sleepCtx(ctx, time.Duration(rng.Int64N(int64(ttl/2))))
	}
	nodes := rng.Perm(stressNodes)[:stressQuorum+rng.IntN(stressNodes-stressQuorum+1)]
	other := fmt.Sprintf("stress-other-owner-%d", id)
	written := s.overwrite(k, other, deleted, nodes)
	h.note("%s: on nodes %v of %v", op, written, nodes)
	if len(written) >= stressQuorum {
		s.count(op + ": written on a quorum")
	}
	if auto {
		if s.followLock(ctx, op, h, time.Now().Add(3*ttl)) {
			s.checkLearned(h, op, "auto-extension", l.Err())
		}
	} else {
		err := s.timedExtend(ctx, h, extendTTL(rng))
		h.note("Extend: %v", errText(err))
		// Only another owner's token is sure to stay: a grant of the
		// acquisition still in flight to a slow node may land after
		// the key was deleted there, and hold it again.
		if err == nil && !deleted && len(written) >= stressQuorum {
			s.failf("worker %d: %s: Extend won a quorum with another owner's token on nodes %v of %d: want ErrNotHeld (%s)",
				id, op, written, stressNodes, h)
		}
		s.checkLearned(h, op, "Extend", err)
	}
	stopExtending()
	s.unlock(rng, h)
	if !deleted {
		s.checkOtherToken(h, op, k, other, written)
	}
	s.dropKeys(k)
}

// checkLearned checks, when err (an Extend's, or Err() after an
// auto-extension) shows that the lock cannot be held on a quorum (other
// owners' tokens, or the keys gone, on more nodes than a quorum allows),
// that the lock says so at once: Validity <= 0, Done closed, Err set.
func (s *stressRun) checkLearned(h *stressHold, op, by string, err error) {
	qe, lost := lostOnQuorum(err)
	if !lost {
		return
	}
	s.count(op + ": lock learned lost")
	l := h.l
	v, closed, lerr := l.Validity(), isClosed(l.Done()), l.Err()
	if v > 0 || !closed || lerr == nil {
		s.failf("worker %d: %s: once %s learned that the lock cannot be held on a quorum (key gone or another owner's on %d of %d nodes, %d needed), want at once Validity <= 0, Done closed and Err set, got Validity %v, Done closed %v, Err %v (%s)",
			h.worker, op, by, taken(qe), len(qe.Nodes), qe.Quorum, v.Round(time.Millisecond), closed, lerr, h)
	}
}

// lostOnQuorum reports whether err carries a round's outcome in which the
// nodes' answers, keys gone or held by other tokens, leave fewer than a
// quorum able to hold the lock.
func lostOnQuorum(err error) (*redlock.QuorumError, bool) {
	var qe *redlock.QuorumError
	if err == nil || !errors.As(err, &qe) {
		return nil, false
	}
	return qe, taken(qe) > len(qe.Nodes)-qe.Quorum
}

// taken counts the nodes that answered that the key is not ours.
func taken(qe *redlock.QuorumError) int {
	n := 0
	for _, r := range qe.Nodes {
		if r.Status == "taken" || r.Status == "absent" {
			n++
		}
	}
	return n
}

// overwrite sets k to another owner's token (or deletes it) on nodes,
// straight on the nodes, and returns those where it was done (a killed or
// paused node is skipped).
func (s *stressRun) overwrite(k, token string, del bool, nodes []int) []int {
	var done []int
	for _, i := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		var err error
		if del {
			err = s.inspect[i].Del(ctx, k).Err()
		} else {
			err = s.inspect[i].Set(ctx, k, token, stressMaxTTL).Err()
		}
		cancel()
		if err == nil {
			done = append(done, i)
		}
	}
	sort.Ints(done)
	return done
}

// checkOtherToken checks that k still holds the other owner's token on
// the nodes where it was written: no Unlock or extension may touch a key
// that is not its own.
func (s *stressRun) checkOtherToken(h *stressHold, op, k, token string, nodes []int) {
	for _, i := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		v, err := s.inspect[i].Get(ctx, k).Result()
		cancel()
		if err != nil && !errors.Is(err, redis.Nil) {
			continue // the node is down: nothing to see
		}
		if v != token {
			s.failf("worker %d: %s: want another owner's token left on node %d after Unlock, got %q (%s)", h.worker, op, i, v, h)
		}
	}
}

// dropKeys deletes keys on every node it can reach; purgeOutside deletes
// what a node that was down kept.
func (s *stressRun) dropKeys(keys ...string) {
	for _, c := range s.inspect {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_ = c.Del(ctx, keys...).Err()
		cancel()
	}
}

// foreignTypes are the kinds of value that no lock kind writes. Strings
// and sorted sets are excluded: the library writes both (tokens; readers
// and semaphore permits), so at a lock key they read as contention.
var foreignTypes = []string{"set", "list", "hash", "stream"}

// foreign writes a value of another type at a fresh key on every node it
// can reach and tries to acquire it: a TryLock, a TryLockKeys with a
// fresh key beside it, or a fenced TryLock. The nodes answer WRONGTYPE,
// which is a failure of theirs, not contention: the attempt must fail
// with ErrUnreachable and the WRONGTYPE errors, never ErrContended, never
// win, and no node may count as taken; the value must be left as it was.
func (s *stressRun) foreign(ctx context.Context, id int, rng *rand.Rand, lk *stressLocker) {
	s.count(opForeign)
	typ := foreignTypes[rng.IntN(len(foreignTypes))]
	k := s.freshKey("w", true)
	written := s.writeForeign(k, typ)
	ttl := lockTTL(rng)
	keys := []string{k}
	var opts []redlock.LockOption
	var l *redlock.Lock
	var err error
	t0 := time.Now()
	switch rng.IntN(3) {
	case 0:
		l, err = lk.acq.TryLock(ctx, k, ttl)
	case 1:
		keys = append(keys, s.freshKey("w", true))
		if rng.IntN(2) == 0 {
			keys[0], keys[1] = keys[1], keys[0]
		}
		l, err = lk.acq.TryLockKeys(ctx, keys, ttl)
	default:
		opts = []redlock.LockOption{redlock.WithFencing()}
		l, err = lk.acq.TryLock(ctx, k, ttl, opts...)
	}
	what := fmt.Sprintf("%s: TryLock(%s, %d options) on %s, a %s at %s on nodes %v", opForeign, strings.Join(keys, ","), len(opts), lk.name, typ, k, written)
	s.checkBound(id, what, time.Since(t0), 4*lk.roundWait(ttl)+stressSlack)
	if err == nil {
		s.failf("worker %d: %s: want ErrUnreachable (WRONGTYPE), got the lock", id, what)
		_ = l.Unlock(context.Background())
	} else if ctx.Err() == nil {
		if p := foreignProblems(err, written); len(p) > 0 {
			s.failf("worker %d: %s: want a failure of the nodes (ErrUnreachable, their WRONGTYPE errors in it), got %s: %v",
				id, what, strings.Join(p, "; "), err)
		}
	}
	for _, i := range written {
		c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		got, terr := s.inspect[i].Type(c, k).Result()
		cancel()
		if terr == nil && got != typ {
			s.failf("worker %d: %s: want the %s left as it was on node %d, got a %s", id, what, typ, i, got)
		}
	}
	s.dropKeys(keys...)
}

// writeForeign sets k to a value of type typ on every node it can reach,
// with a TTL in case it is never deleted, and returns those nodes.
func (s *stressRun) writeForeign(k, typ string) []int {
	var done []int
	for i, c := range s.inspect {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, k)
			switch typ {
			case "set":
				p.SAdd(ctx, k, "a", "b")
			case "list":
				p.RPush(ctx, k, "a", "b")
			case "hash":
				p.HSet(ctx, k, "a", "1")
			case "zset":
				p.ZAdd(ctx, k, redis.Z{Score: 1, Member: "a"})
			case "stream":
				p.XAdd(ctx, &redis.XAddArgs{Stream: k, Values: []any{"a", "1"}})
			}
			p.PExpire(ctx, k, time.Minute)
			return nil
		})
		cancel()
		if err == nil {
			done = append(done, i)
		}
	}
	return done
}

// foreignProblems lists what is wrong with err, the error of an attempt
// on a key that holds a foreign value on the nodes written (and is absent
// elsewhere): it must match ErrUnreachable and not ErrContended, no node
// may count as taken (nobody holds the key) or as granted where the
// value is, and a server error of the node no fault touches must be its
// WRONGTYPE.
func foreignProblems(err error, written []int) []string {
	var out []string
	if errors.Is(err, redlock.ErrContended) {
		out = append(out, "ErrContended")
	}
	if !errors.Is(err, redlock.ErrUnreachable) {
		out = append(out, "no ErrUnreachable")
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return append(out, "no *QuorumError")
	}
	for _, r := range qe.Nodes {
		switch {
		case r.Status == "taken":
			out = append(out, fmt.Sprintf("node %d taken", r.Node))
		case r.Status == "ok" && slices.Contains(written, r.Node):
			out = append(out, fmt.Sprintf("node %d granted over its foreign value", r.Node))
		case r.Node == stressHealthy && r.Status == "failed" && slices.Contains(written, r.Node):
			var re redis.Error
			if errors.As(r.Err, &re) && !strings.Contains(re.Error(), "WRONGTYPE") {
				out = append(out, fmt.Sprintf("node %d failed with %q, not WRONGTYPE", r.Node, re.Error()))
			}
		}
	}
	return out
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// bursts runs a burst now and then until ctx ends: the first at a random
// instant in the second fifth to the half of the run, then every 30s to
// 60s. Each waits, through calm, for every worker to end its step and
// every fault to heal, and holds the others off while it runs, so that
// the nodes are healthy and the machine is the burst's.
func (s *stressRun) bursts(ctx context.Context, rng *rand.Rand) {
	wait := s.dur/5 + time.Duration(rng.Int64N(int64(s.dur*3/10)+1))
	for n := 0; sleepCtx(ctx, wait); n++ {
		size := 6000 + rng.IntN(4001)
		s.calm.Lock()
		if ctx.Err() == nil {
			s.burst(n, size)
		}
		s.calm.Unlock()
		wait = 30*time.Second + time.Duration(rng.Int64N(int64(30*time.Second)))
	}
}

// burst makes size TryLocks at once, on distinct fresh keys, on the burst
// Client (node timeout 20s, nodes dialled directly), then Unlocks every
// lock won at once. The nodes are healthy: every TryLock must win (or,
// after a stall longer than the TTL, fail with ErrExpired), every Unlock
// of a lock still valid must succeed.
func (s *stressRun) burst(n, size int) {
	s.count("burst")
	locks := make([]*redlock.Lock, size)
	errs := make([]error, size)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range size {
		k := fmt.Sprintf("%sb%d-%d", s.prefix, n, i)
		wg.Go(func() {
			<-start
			locks[i], errs[i] = s.burstLk.TryLock(context.Background(), k, stressMaxTTL)
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(t0)
	s.mu.Lock()
	s.ops[opBurstTry] += size
	s.mu.Unlock()
	var bad []error
	for _, err := range errs {
		if err != nil && !errors.Is(err, redlock.ErrExpired) {
			bad = append(bad, err)
		}
	}
	if len(bad) > 0 {
		s.failf("burst %d: %d TryLocks at once on distinct keys, nodes healthy, node timeout %v: want every one won (or ErrExpired after a stall), got %d failed in %v, e.g. %v",
			n, size, stressBurstTimeout, len(bad), took.Round(time.Millisecond), bad[0])
	}
	// The keys not won are taken again in waves of a few thousand, so
	// that the Unlocks are a burst of size whatever the TryLocks did.
	for lo := 0; lo < size; lo += 2000 {
		for i := lo; i < min(lo+2000, size); i++ {
			if locks[i] == nil {
				k := fmt.Sprintf("%sb%d-%d", s.prefix, n, i)
				wg.Go(func() { locks[i], _ = s.burstLk.TryLock(context.Background(), k, stressMaxTTL) })
			}
		}
		wg.Wait()
	}

	start = make(chan struct{})
	bad = bad[:0]
	var mu sync.Mutex
	for _, l := range locks {
		if l == nil {
			continue
		}
		wg.Go(func() {
			<-start
			valid := l.Validity() > 0
			err := l.Unlock(context.Background())
			if err != nil && (valid || !errors.Is(err, redlock.ErrNotHeld)) {
				mu.Lock()
				bad = append(bad, err)
				mu.Unlock()
			}
		})
	}
	t0 = time.Now()
	close(start)
	wg.Wait()
	s.mu.Lock()
	s.ops[opBurstUnlock] += size - countNil(locks)
	s.mu.Unlock()
	if len(bad) > 0 {
		s.failf("burst %d: %d Unlocks at once of valid locks, nodes healthy: want every one nil, got %d failed in %v, e.g. %v",
			n, size-countNil(locks), len(bad), time.Since(t0).Round(time.Millisecond), bad[0])
	}
}

// stressBurstTimeout is the burst Client's per-node timeout: far longer
// than any burst takes on healthy nodes, so a node counted as failed did
// not time out but was refused by the client.
const stressBurstTimeout = 20 * time.Second

func countNil(locks []*redlock.Lock) int {
	n := 0
	for _, l := range locks {
		if l == nil {
			n++
		}
	}
	return n
}

// restart is one kill and restart of a node, on the run's clock.
type restart struct {
	killed     time.Duration // Kill returned: the old process is gone
	restarting time.Duration // Restart was called: the new one starts after this; -1 before
}

// guardObserver checks, for a Client with the restart guard, every vote
// (a NodeOK of an acquisition, extension or fence round) against the
// restarts: a node whose new process started less than stressGuard
// before the vote's reply arrived, for a request sent after the old
// process was gone, must not have voted. Both ends are taken on the safe
// side: the reply's arrival is after the request was sent, and the
// sending is dated from the round's start, which is before it, less
// stressStallMargin for a stall between the reply and its observation.
// So a vote found is one the guard should have refused.
type guardObserver struct {
	s    *stressRun
	name string
}

// stressStallMargin is taken off a vote's sending time as the observer
// dates it (its arrival less its latency), in case the goroutine stalled
// between the reply and the observer.
const stressStallMargin = 500 * time.Millisecond

// observe looks at the votes: the node events.
func (g guardObserver) observe(e redlock.Event) {
	if e.Kind != "node" || e.Status != "ok" || e.Op == "unlock" {
		return
	}
	s := g.s
	at := s.clock.Now()
	sent := at - e.Latency - stressStallMargin
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.restarts[e.Node]
	for j := len(rs) - 1; j >= 0; j-- {
		r := rs[j]
		if r.restarting < 0 {
			continue // still down: it answers nothing
		}
		if at >= r.restarting+stressGuard {
			break // out of this window, and of the earlier ones
		}
		if sent > r.killed {
			s.guardVotes[g.name]++
			if s.guardVotes[g.name] == 1 {
				s.guardFirst[g.name] = fmt.Sprintf("node %d, killed at %s and restarting from %s, voted (%s) at %s for a request sent after %s",
					e.Node, ms(r.killed), ms(r.restarting), e.Op, ms(at), ms(sent))
			}
			return
		}
	}
}

// checkFamilies checks what the families found over the whole run: votes
// the restart guard should have refused, and resumed auto-extensions
// that never extended.
func (s *stressRun) checkFamilies() {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.guardVotes))
	for name := range s.guardVotes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s.failures = append(s.failures, fmt.Sprintf("%s: want no vote from a node restarted less than the restart guard's %v before it, got %d, first: %s",
			name, stressGuard, s.guardVotes[name], s.guardFirst[name]))
	}
	// A resumed lock on a healthy path is extended within half its TTL;
	// a run with several resumed and not one extended after resuming
	// does not extend them at all.
	if s.resumed >= 5 && s.resumedExtended == 0 {
		s.failures = append(s.failures, fmt.Sprintf("want some of the %d locks whose AutoExtend resumed extended after it, got none", s.resumed))
	}
}

// purgeOutside deletes every key the families wrote by hand, under
// xprefix, from every node, once the nodes are healed. A node restarted
// by the last fault may still be refused by its client's pool for up to
// dialBreakerGrace (see there): each node is polled for that long.
func (s *stressRun) purgeOutside() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, c := range s.inspect {
		var err error
		pollFor(dialBreakerGrace, 50*time.Millisecond, func() bool {
			err = purgeNode(ctx, c, s.xprefix+"*")
			if err == nil {
				// The elections of foreignHistory, whose keys begin with
				// the election prefix.
				err = purgeNode(ctx, c, redlock.KeyName("election", s.xprefix)+"*")
			}
			return err == nil
		})
		if err != nil {
			s.failf("purging the families' keys on node %d: %v", i, err)
		}
	}
}

// purgeNode deletes the keys that match pattern on c's node.
func purgeNode(ctx context.Context, c redis.UniversalClient, pattern string) error {
	it := c.Scan(ctx, 0, pattern, 1000).Iterator()
	var keys []string
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("scanning: %w", err)
	}
	if len(keys) == 0 {
		return nil
	}
	if err := c.Del(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("deleting %d keys: %w", len(keys), err)
	}
	return nil
}
