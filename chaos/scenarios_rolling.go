package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

// rollingHolds are the locks that rolling-restart keeps held, one of
// each kind: two fenced key locks, a read lock, a folder lock and a
// permit of a semaphore of limit 1.
var rollingHolds = []familyAttempt{
	{key: "rr-k0"}, {key: "rr-k1"},
	{mode: ModeRead, key: "rr-r"},
	{mode: ModePath, key: "rr/p"},
	{mode: ModePermit, key: "rr-s", limit: 1},
}

// rollingKey is the key of h on a node (what a node that holds h has).
func rollingKey(h familyAttempt) string {
	if h.mode == ModePath {
		return redlock.KeyName("path", h.key)
	}
	return h.key
}

// rollingContenders is how many clients contend for the held locks.
const rollingContenders = 2

// rollingRestart restarts every node empty (no persistence), one at a
// time with every other node up, while each of rollingHolds is held and
// auto-extended and contenders try to take them. Before each restart it
// waits, for at most recoveryWait, until every node holds every lock's
// key again (a held lock heals its key on a node that lost it); it
// restarts the next node either way. The holders count their locks lost
// (Done closed before the run ended); it must be 0. Without the heal, a
// lock is lost once ⌈N/2⌉ nodes have restarted.
func rollingRestart(ctx context.Context, e *env) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var lost, holding atomic.Int32
	cur := make([]atomic.Pointer[redlock.Lock], len(rollingHolds)) // each hold's lock, while held
	// Four times the run's TTL, and a larger per-node timeout than its
	// default: a holder must lose its lock to the restarts alone, not to
	// a loaded machine that stalls every node for a few hundred ms.
	holds := slices.Clone(rollingHolds)
	for k := range holds {
		holds[k].ttl = 4 * e.p.TTL
	}
	opts := []redlock.Option{redlock.WithNodeTimeout(2 * permitNodeTimeout)}
	for k, h := range holds {
		rl, err := redlock.New(e.cl.Clients(), opts...)
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		id := e.newClientID()
		wg.Go(func() {
			defer rl.Close()
			e.rollingHolder(ctx, id, rl, h, &lost, &holding, &cur[k])
		})
	}
	for range rollingContenders {
		rl, err := redlock.New(e.cl.Clients(), opts...)
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		id := e.newClientID()
		wg.Go(func() {
			defer rl.Close()
			e.rollingContender(ctx, id, rl, holds)
		})
	}
	stop := func() { cancel(); wg.Wait() }
	defer stop()

	n := e.cl.N()
	admins := make([]*redis.Client, n)
	for i := range admins {
		admins[i] = e.cl.Admin(i)
	}
	healed := func() bool {
		if int(holding.Load()) < len(rollingHolds) {
			return false
		}
		for i := range n {
			if !holdsAll(ctx, admins[i], holds, cur) {
				return false
			}
		}
		return true
	}
	waitHealed := func() bool {
		deadline := time.Now().Add(recoveryWait)
		for !healed() {
			if time.Now().After(deadline) || sleep(ctx, 20*time.Millisecond) != nil {
				return false
			}
		}
		return true
	}
	if !waitHealed() {
		e.note("not every lock held on every node before the restarts")
	}
	unhealed := 0
	for i := range n {
		if err := e.cl.Restart(i); err != nil {
			return err
		}
		if !waitHealed() {
			unhealed++
			e.note("node %d: not every held lock's key back within %v", i+1, recoveryWait)
		}
	}
	// One more extension after the last restart.
	if err := sleep(ctx, 2*e.p.TTL); err != nil {
		return err
	}
	stop()
	if k := lost.Load(); k > 0 {
		e.failf("%d held auto-extended lock(s) lost during the rolling restart (want 0); restarts after which the keys did not come back: %d of %d", k, unhealed, n)
	}
	return nil
}

// holdsAll reports whether the node of rc holds every rolling hold for
// its current holder (cur): the key with the holder's token, or its
// lease or permit. A contender's key, put there for an instant, is not.
func holdsAll(ctx context.Context, rc *redis.Client, holds []familyAttempt, cur []atomic.Pointer[redlock.Lock]) bool {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for k, h := range holds {
		l := cur[k].Load()
		if l == nil {
			return false
		}
		var ok bool
		switch h.mode {
		case ModeRead:
			ok = rc.ZScore(qctx, redlock.KeyName("readers", h.key), l.Token()).Err() == nil
		case ModePermit:
			ok = rc.ZScore(qctx, h.key, l.Token()).Err() == nil
		default:
			ok = rc.Get(qctx, rollingKey(h)).Val() == l.Token()
		}
		if !ok {
			return false
		}
	}
	return true
}

// rollingHolder holds h, auto-extended, until ctx ends; when the lock is
// lost it counts the loss and takes h again.
func (e *env) rollingHolder(ctx context.Context, id int, rl *redlock.Client, h familyAttempt, lost, holding *atomic.Int32, cur *atomic.Pointer[redlock.Lock]) {
	for ctx.Err() == nil {
		l, err := e.tryFamily(ctx, id, rl, h)
		if err != nil {
			_ = sleep(ctx, jitter(10*time.Millisecond))
			continue
		}
		if l.Fence() > 0 {
			_ = e.write(ctx, id, l)
		}
		if err := l.AutoExtend(ctx); err != nil {
			e.releaseFamily(l)
			continue
		}
		cur.Store(l)
		holding.Add(1)
		select {
		case <-ctx.Done():
		case <-l.Done():
		}
		holding.Add(-1)
		cur.Store(nil)
		if ctx.Err() == nil {
			lost.Add(1)
			e.note("client %d: held %s %q lost: %v", id, modeName(h.mode), h.key, l.Err())
		}
		e.releaseFamily(l)
	}
}

// rollingContender tries to take the held locks, each attempt on one of
// them at random; a win (the holder lost it) is held 20ms.
func (e *env) rollingContender(ctx context.Context, id int, rl *redlock.Client, holds []familyAttempt) {
	for ctx.Err() == nil {
		h := holds[rand.IntN(len(holds))]
		l, err := e.tryFamily(ctx, id, rl, h)
		if err == nil {
			if l.Fence() > 0 {
				_ = e.write(ctx, id, l)
			}
			_ = sleep(ctx, 20*time.Millisecond)
			e.releaseFamily(l)
		} else if !errors.Is(err, redlock.ErrNotObtained) && ctx.Err() == nil {
			e.failf("client %d: attempt on %q: want nil or ErrNotObtained, got %v", id, h.key, err)
		}
		_ = sleep(ctx, jitter(10*time.Millisecond))
	}
}

// modeName names a hold's mode for notes.
func modeName(m Mode) string {
	if m == "" {
		return fmt.Sprint(ModeWrite)
	}
	return string(m)
}
