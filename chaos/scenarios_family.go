package chaos

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/seed543a70bd/redlock"
)

// Scenarios of the lock family (redlock.TryLockPath, TryRLock and
// TryAcquire): clients of their own contend for related folders, for
// keys shared by readers and writers, or for semaphore permits, while one
// node is killed (a delayed restart, memory lost) and another paused.
// The checker applies each kind's conflict rule (see Mode); each scenario
// also checks progress and that holds were shared where the kind allows.

// familyKind is the lock of the family a workload takes.
type familyKind int

const (
	familyPath      familyKind = iota // TryLockPath on a small tree
	familyReadWrite                   // TryRLock readers and fenced writers (TryLock, or Lock for half a TTL)
	familyPermit                      // TryAcquire with familyLimit
)

// familyLimit is the semaphore scenario's limit. With 5 nodes a permit
// needs floor(2*5/3)+1 = 4 grants: one node may be out at
// a time, so that scenario kills and pauses one after the other.
const familyLimit = 2

// familyNames are the names at each level of the path tree: they share
// prefixes ("a", "ab", "a-1"), so that a path checker or a lock that
// compared strings instead of components would report or refuse
// unrelated paths.
var familyNames = []string{"a", "ab", "a-1"}

// familyPathOf draws a path of the tree: depth 1 (which excludes a third
// of the tree) one time in ten, depth 2 three in ten, else depth 3; one
// time in eight written with a leading and a trailing "/", which the
// library normalizes away.
func familyPathOf() string {
	depth := 3
	switch p := rand.IntN(10); {
	case p < 1:
		depth = 1
	case p < 4:
		depth = 2
	}
	comps := make([]string, depth)
	for i := range comps {
		comps[i] = familyNames[rand.IntN(len(familyNames))]
	}
	p := strings.Join(comps, "/")
	if rand.IntN(8) == 0 {
		p = "/" + p + "/"
	}
	return p
}

// familyShortKey is the read-write key that is never held long (no
// auto-extended writer). With long writer holds on both keys, writers
// held both through most of a 500ms pause window: a CI run saw no grant
// there, and 2 of 28 loaded runs saw 1 or 2; with this key, 24 such runs
// saw at least 5. The other key keeps the long holds, and extensions
// racing the faults.
const familyShortKey = "rw1"

// familyAttempt is one acquisition a family worker makes.
type familyAttempt struct {
	mode  Mode
	key   string        // the key, or the path as given
	limit int           // ModePermit
	ttl   time.Duration // the lock's TTL; 0: the run's (Params.TTL)
}

// draw picks the next acquisition of kind.
func (k familyKind) draw() familyAttempt {
	switch k {
	case familyPath:
		return familyAttempt{mode: ModePath, key: familyPathOf()}
	case familyReadWrite:
		key := []string{"rw0", familyShortKey}[rand.IntN(2)]
		if rand.IntN(10) < 6 {
			return familyAttempt{mode: ModeRead, key: key}
		}
		return familyAttempt{mode: ModeWrite, key: key}
	}
	return familyAttempt{mode: ModePermit, key: "sem", limit: familyLimit}
}

// permitNodeTimeout is the semaphore scenario's per-node timeout.
const permitNodeTimeout = 100 * time.Millisecond

// familyClients is how many clients contend in a family scenario.
const familyClients = 6

// family runs familyClients clients of kind while killAndPause injects
// its faults, then checks progress in every fault window and that holds
// were shared where kind allows it.
func family(kind familyKind) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
		stop, err := e.startFamily(ctx, kind)
		if err != nil {
			return err
		}
		defer stop()
		clock := e.rec.Clock()
		end := clock.Now() + e.p.Duration
		wins, err := e.killAndPause(ctx, kind != familyPermit)
		if err != nil {
			return err
		}
		recovered := e.awaitProgress(ctx, max(wins[0].to, wins[1].to))
		if err := sleep(ctx, end-clock.Now()); err != nil {
			return err
		}
		stop()
		h := e.rec.History()
		for i, what := range []string{"a node was down", "a node was paused"} {
			if h.AcquiredDuring(wins[i].from, wins[i].to) == 0 {
				e.failf("no progress: no lock granted while %s (%s to %s); %s", what, ms(wins[i].from), ms(wins[i].to), h.activity(wins[i].from, wins[i].to))
			}
		}
		if !recovered {
			e.failf("no progress within %v after the faults ended", recoveryWait)
		}
		e.checkFamilyShare(kind, h.Sections)
		return ctx.Err()
	}
}

// checkFamilyShare checks that every mode kind takes was granted, and
// that holds which may be held at once were: readers of one key, permits
// of one semaphore, and unrelated paths. A lock that refused too much
// (a semaphore acting as a mutex, paths compared as strings) fails here,
// not in the checker.
func (e *env) checkFamilyShare(kind familyKind, secs []Section) {
	modes := map[familyKind][]Mode{familyPath: {ModePath}, familyReadWrite: {ModeRead, ModeWrite}, familyPermit: {ModePermit}}[kind]
	for _, m := range modes {
		n := 0
		for _, s := range secs {
			if s.Mode == m {
				n++
			}
		}
		if n == 0 {
			e.failf("no progress: no %s lock was ever granted", m)
		}
	}
	shared := modes[0]
	group := func(s Section) string { return s.Key }
	if kind == familyPath {
		group = func(Section) string { return "" } // any two paths held at once are unrelated ones
	}
	if most := mostAtOnce(secs, shared, group); most < 2 {
		e.failf("no sharing: want two %s holds at once at least once, got at most %d", shared, most)
	}
}

// mostAtOnce returns the most sections of mode in one group whose safe
// windows overlapped at one instant.
func mostAtOnce(secs []Section, mode Mode, group func(Section) string) int {
	most := 0
	for i, a := range secs {
		if a.Mode != mode || a.End() <= a.Acquired {
			continue
		}
		n := 1 // the sections live at a's start
		for j, b := range secs {
			if j != i && b.Mode == mode && group(b) == group(a) && b.Acquired <= a.Acquired && b.End() > a.Acquired {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// killAndPause kills a random node mid-lock and restarts it, memory
// lost, after max(guard, Duration/3) (a delayed restart: no lock it
// granted is still valid), and pauses another one mid-lock for half that
// time. With overlap the pause falls while the first node is down (two
// of five out: a majority still answers); without it, after the restart
// (a semaphore of limit 2 on 5 nodes tolerates one node out). It returns
// the windows of the kill and of the pause.
func (e *env) killAndPause(ctx context.Context, overlap bool) ([]window, error) {
	clock := e.rec.Clock()
	victims := rand.Perm(e.cl.N())[:2]
	down := max(e.p.guard(), e.p.Duration/3)
	paused := down / 2
	if err := sleep(ctx, e.p.Duration/6); err != nil {
		return nil, err
	}
	pause := func() (window, error) {
		if err := e.rec.WaitHeld(ctx); err != nil {
			return window{}, err
		}
		if err := e.cl.Pause(victims[1]); err != nil {
			return window{}, err
		}
		w := window{from: clock.Now()}
		err := sleep(ctx, paused)
		if rerr := e.cl.Resume(victims[1]); rerr != nil {
			return window{}, rerr
		}
		w.to = clock.Now()
		return w, err
	}
	if err := e.rec.WaitHeld(ctx); err != nil {
		return nil, err
	}
	if err := e.cl.Kill(victims[0]); err != nil {
		return nil, err
	}
	killed := window{from: clock.Now()}
	var p window
	if overlap {
		if err := sleep(ctx, down/4); err != nil {
			return nil, err
		}
		var err error
		if p, err = pause(); err != nil {
			return nil, err
		}
	}
	if err := sleep(ctx, killed.from+down-clock.Now()); err != nil {
		return nil, err
	}
	if err := e.cl.Restart(victims[0]); err != nil {
		return nil, err
	}
	killed.to = clock.Now()
	if !overlap {
		if err := sleep(ctx, e.p.TTL/2); err != nil {
			return nil, err
		}
		var err error
		if p, err = pause(); err != nil {
			return nil, err
		}
	}
	return []window{killed, p}, nil
}

// startFamily runs familyClients clients of kind until stop is called;
// stop waits for every client to release what it holds and return.
func (e *env) startFamily(ctx context.Context, kind familyKind) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range familyClients {
		// No WithFencing on the client: the family refuses it. Writers
		// ask for it per call.
		var opts []redlock.Option
		if kind == familyPermit {
			// A permit needs 4 of 5 nodes, so while one is out every
			// healthy node must answer in time: the default per-node
			// timeout for a 500ms TTL (25ms) fails rounds on a loaded
			// machine, and the scenario would show no progress.
			opts = append(opts, redlock.WithNodeTimeout(permitNodeTimeout))
		}
		rl, err := redlock.New(e.cl.Clients(), opts...)
		if err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
		id := e.newClientID()
		wg.Go(func() {
			defer rl.Close()
			e.familyLoop(ctx, id, rl, kind)
		})
	}
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }, nil
}

// familyLoop is one family client: acquire, write to the resource when
// it is a fenced writer, hold 30ms to 60ms (one time in three extending
// once midway, one in six auto-extending and holding up to two TTLs,
// except permits, readers and familyShortKey), release, pause; on a lost
// attempt, pause and try again.
func (e *env) familyLoop(ctx context.Context, id int, rl *redlock.Client, kind familyKind) {
	const hold, pause = 60 * time.Millisecond, 10 * time.Millisecond
	for ctx.Err() == nil {
		a := kind.draw()
		l, err := e.tryFamily(ctx, id, rl, a)
		if err != nil {
			_ = sleep(ctx, jitter(pause))
			continue
		}
		if l.Fence() > 0 {
			_ = e.write(ctx, id, l)
		}
		d := hold/2 + rand.N(hold/2+1)
		var done <-chan struct{}
		actx, stopExtending := context.WithCancel(ctx)
		switch p := rand.IntN(6); {
		case p == 0 && kind != familyPermit && a.mode != ModeRead && a.key != familyShortKey:
			// Not for permits: two long holds of a limit-2 semaphore
			// would leave no grant to see in a fault window. Nor for
			// readers: readers are preferred (a writer is refused while
			// any reader holds the key; see TryRLock), and readers held
			// for up to two TTLs, overlapping, kept every writer out of
			// a short run once (a fresh-clone CI run: 100 grants, all
			// reads). Nor on familyShortKey, so that a fault window
			// always has a key to grant.
			if l.AutoExtend(actx) == nil {
				done = l.Done()
				d = rand.N(2 * e.p.TTL)
			}
		case p < 3:
			holdValid(ctx, l, d/2, nil)
			_ = l.Extend(ctx, e.p.TTL) // may fail (ErrNotHeld): Deadline then tells
			d -= d / 2
		}
		holdValid(ctx, l, d, done)
		e.releaseFamily(l)
		stopExtending()
		_ = sleep(ctx, jitter(pause))
	}
}

// holdValid waits d, or less: until ctx ends, done closes, or l's
// Validity runs out, whichever comes first.
func holdValid(ctx context.Context, l *redlock.Lock, d time.Duration, done <-chan struct{}) {
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
			continue // an extension may have moved the deadline
		}
		t.Stop()
		return
	}
}

// tryFamily makes one attempt of a and records it, as try does for
// TryLock; a lock obtained is counted as held until releaseFamily.
func (e *env) tryFamily(ctx context.Context, id int, rl *redlock.Client, a familyAttempt) (*redlock.Lock, error) {
	clock := e.rec.Clock()
	t0 := clock.Now()
	var l *redlock.Lock
	var err error
	ttl := e.p.TTL
	if a.ttl > 0 {
		ttl = a.ttl
	}
	switch a.mode {
	case ModePath:
		l, err = rl.TryLockPath(ctx, a.key, ttl)
	case ModeRead:
		l, err = rl.TryRLock(ctx, a.key, ttl)
	case ModePermit:
		l, err = rl.TryAcquire(ctx, a.key, a.limit, ttl)
	default:
		if rand.IntN(2) == 0 {
			// A writer that waits (Lock, for up to half a TTL): it marks
			// a key that readers hold, and new readers wait for it.
			wctx, cancel := context.WithTimeout(ctx, ttl/2)
			l, err = rl.Lock(wctx, a.key, ttl, redlock.WithFencing())
			cancel()
		} else {
			l, err = rl.TryLock(ctx, a.key, ttl, redlock.WithFencing())
		}
	}
	t1 := clock.Now()
	if err != nil && ctx.Err() != nil {
		return nil, err // the run is over: not an attempt that says anything
	}
	key := a.key
	if a.mode == ModePath {
		key = strings.Join(pathComponents(a.key), "/") // the lane of its path
	}
	e.rec.Attempt(Attempt{Client: id, Key: key, Start: t0, Latency: t1 - t0, OK: err == nil, Reason: reasonOf(err)})
	if err != nil {
		return nil, err
	}
	if l.Key() != key {
		e.failf("client %d: %s lock of %q: want Key %q, got %q", id, a.mode, a.key, key, l.Key())
	}
	e.rec.Open()
	e.open.Store(l, Section{
		Client: id, Key: l.Key(), Token: l.Token(), Fence: l.Fence(), Mode: a.mode, Limit: a.limit,
		Attempt: t0, Acquired: t1, Released: Never, Deadline: clock.Of(time.Now().Add(l.Validity())),
	})
	return l, nil
}

// releaseFamily ends l's section now, with the deadline its extensions
// left it, and unlocks it.
func (e *env) releaseFamily(l *redlock.Lock) {
	v, ok := e.open.LoadAndDelete(l)
	if !ok {
		return
	}
	s := v.(Section)
	clock := e.rec.Clock()
	s.Released, s.Deadline = clock.Now(), clock.Of(time.Now().Add(l.Validity()))
	e.rec.Section(s)
	e.rec.Close()
	if err := l.Unlock(context.Background()); err != nil && !errors.Is(err, redlock.ErrNotHeld) {
		e.failf("Unlock of %s %q: want nil or ErrNotHeld, got %v", s.Mode, s.Key, err)
	}
}
