package stress_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/chaos"
)

// The contend family: many goroutines of several Clients wait with Lock
// for one key and hold it briefly, under the run's faults, so that the
// wait queue (a line per Client, a queue on the key's queue node,
// releases that name the next waiter) carries the hand-offs while nodes
// die, stall and slow down, and while waiters' ctxs end mid-queue (callCtx
// ends a third of them within 5ms). Their holds join the History, so
// chaos.Check judges them with every other hold; each Lock must return
// within its ctx's time plus the acquisition bound (acquire), and the
// queue's keys (<key>:queue, <key>:queue:named, under the run's prefix)
// must be gone with the lock keys at quiescence (checkLeftovers).

// opContendLock counts the contenders' Lock calls.
const opContendLock = "Lock of the contended key"

const (
	// stressContenders is how many Clients contend, each over the
	// hand-off's directly dialled node clients with the default options
	// (the queue needs the hand-off, and a plain lock: Lock with fencing
	// does not queue).
	stressContenders = 4
	// stressContendWorkers is how many goroutines of each Client wait.
	stressContendWorkers = 2
	// stressContendID is the first contend goroutine's worker id, apart
	// from the step workers'.
	stressContendID = 100
)

// contendKey is the one key the contenders wait for.
func (s *stressRun) contendKey() string { return s.prefix + "hot" }

// contend is one contend goroutine: until ctx ends, Lock the hot key
// under a ctx that ends at a random instant (callCtx), hold it 5ms to
// 15ms (while it is valid), record the hold and Unlock it.
func (s *stressRun) contend(ctx context.Context, id int, lk *stressLocker, rng *rand.Rand) {
	for s.calmRLock(ctx) {
		s.guard(id, func() {
			a := attempt{worker: id, op: opContendLock, lk: lk, keys: []string{s.contendKey()}, wait: true,
				ttl: time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))}
			h := s.acquire(ctx, rng, a)
			if h == nil {
				return
			}
			l := h.l
			s.act(ctx, l, 5*time.Millisecond+time.Duration(rng.Int64N(int64(10*time.Millisecond))), nil)
			s.rec.Section(chaos.Section{
				Client: id, Key: l.Key(), Token: l.Token(),
				Attempt: h.attempt, Acquired: h.acquired, Released: s.clock.Now(), Deadline: s.clock.Of(time.Now().Add(l.Validity())),
			})
			s.unlock(rng, h)
		})
		s.calm.RUnlock()
	}
}

// newContenders makes the contend family's Clients, with the default
// node timeout.
func (s *stressRun) newContenders(clients func(handoff bool) []redis.UniversalClient) error {
	spec := stressSpec{handoff: true}
	for i := range stressContenders {
		c, err := redlock.New(clients(true), spec.opts()...)
		if err != nil {
			return fmt.Errorf("redlock.New for the %s family's Client %d: %w", famContend, i, err)
		}
		s.contenders = append(s.contenders, &stressLocker{name: spec.name("contender", i), acq: c, client: c})
		s.addCloser(c)
	}
	return nil
}
