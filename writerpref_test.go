package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
)

// A writer that waits (Lock) marks a key that readers hold, and new
// readers wait for it (acquire.lua, read_acquire.lua).

// overlappingReaders runs n readers on k, each taking RLock, holding it
// for hold and releasing it, again and again, until the test ends (a
// cleanup stops them and waits for them); started staggered over hold,
// so that some reader always holds k. It returns how many read locks
// they took.
func overlappingReaders(t *testing.T, rl *redlock.Client, k string, n int, hold time.Duration) *atomic.Int64 {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
	var took atomic.Int64
	started := make(chan struct{}, n)
	for i := range n {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * hold / time.Duration(n)) // staggered starts, not synchronization
			for first := true; ; first = false {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				r, err := rl.RLock(ctx, k, 5*time.Second)
				cancel()
				if err != nil {
					t.Errorf("reader %d: %v", i, err)
					return
				}
				took.Add(1)
				if first {
					started <- struct{}{}
				}
				time.Sleep(hold) // the reader's work
				if err := r.Unlock(context.Background()); err != nil {
					t.Errorf("reader %d: unlock: %v", i, err)
					return
				}
			}
		})
	}
	for range n {
		select {
		case <-started:
		case <-time.After(20 * time.Second):
			t.Fatal("readers did not start within 20s")
		}
	}
	return &took
}

// TestWriterNotStarvedByReaders: 8 readers that overlap without a gap
// (each holds 40ms and takes the key again at once) keep a TryLock
// writer out, but a Lock writer gets in once the readers that hold the
// key leave: new readers wait for it. While it holds the key no reader
// does. Before the writer's mark, the Lock writer waited for a chance
// gap between the readers.
func TestWriterNotStarvedByReaders(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	k := key(t)
	took := overlappingReaders(t, rl, k, 8, 40*time.Millisecond)

	for range 5 {
		_, err := rl.TryLock(ctx, k, 5*time.Second)
		require.ErrorIs(t, err, redlock.ErrContended, "want a TryLock writer refused while readers overlap")
	}
	before := took.Load()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	w, err := rl.Lock(wctx, k, 5*time.Second)
	require.NoError(t, err, "want the waiting writer in while readers keep coming (after %d read locks)", took.Load()-before)
	meanwhile := took.Load() - before
	t.Logf("writer in after %v (%d read locks meanwhile)", time.Since(start).Round(time.Millisecond), meanwhile)
	// Readers whose RLock was in flight at the writer's first attempt
	// may still get in; after that, none until the writer has been in.
	// Without the mark the writer got in only through a chance gap:
	// after 333 to 1617 read locks (1.8s to 8.6s, 3 runs).
	require.LessOrEqual(t, meanwhile, int64(24), "want new readers held off once the writer waits")
	// While the writer holds the key, no reader gets it.
	during := took.Load()
	_, err = rl.TryRLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrContended, "want a reader refused while the writer holds the key")
	time.Sleep(100 * time.Millisecond) // the readers keep trying meanwhile
	require.Equal(t, during, took.Load(), "a reader took the key while the writer held it")
	require.NoError(t, w.Unlock(ctx))
	eventually(t, 10*time.Second, func() bool { return took.Load() > during+8 },
		"want the readers back after the writer's Unlock")
}

// TestWriterMarkEnds: a writer that gives up (its ctx, which has no
// deadline, is cancelled) keeps new readers out only for the rest of its
// mark (three retry delays and the per-node timeout); a reader that
// holds a lease may still extend and release it meanwhile; and TryLock
// never marks. (A writer whose ctx has a deadline marks no longer than
// that: TestAttackMarkAfterGiveUpDesign.)
func TestWriterMarkEnds(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	k := key(t)
	r, err := rl.TryRLock(ctx, k, 10*time.Second)
	require.NoError(t, err)

	// TryLock: refused, no mark.
	_, err = rl.TryLock(ctx, k, 5*time.Second)
	require.ErrorIs(t, err, redlock.ErrContended)
	r2, err := rl.TryRLock(ctx, k, 10*time.Second)
	require.NoError(t, err, "want a new reader in after a TryLock writer: TryLock does not mark")
	require.NoError(t, r2.Unlock(ctx))

	// Lock with a 1s retry delay: a 3.25s mark from its first attempt;
	// it gives up after 200ms.
	wctx := cancelledAfter(t, 200*time.Millisecond)
	_, err = rl.Lock(wctx, k, 5*time.Second, redlock.WithRetryDelay(time.Second))
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	marked := time.Now()
	_, err = rl.TryRLock(ctx, k, 10*time.Second)
	if time.Since(marked) < 2*time.Second { // else too late to tell (a stalled machine)
		require.ErrorIs(t, err, redlock.ErrContended, "want a new reader refused under the writer's mark")
	}
	require.NoError(t, r.Extend(ctx, 10*time.Second), "want a held reader's Extend under the mark")
	eventually(t, 10*time.Second, func() bool {
		r3, err := rl.TryRLock(ctx, k, 10*time.Second)
		if err != nil {
			return false
		}
		require.NoError(t, r3.Unlock(ctx))
		return true
	}, "want new readers in once the mark ended")
	require.GreaterOrEqual(t, time.Since(marked), 2*time.Second, "want the mark to last three retry delays, less the attempt")

	// The last reader's release under a live mark: the mark goes with
	// the key, so neither the writer's SET NX nor a new reader is held
	// off by it.
	wctx = cancelledAfter(t, 200*time.Millisecond)
	_, err = rl.Lock(wctx, k, 5*time.Second, redlock.WithRetryDelay(time.Second))
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.NoError(t, r.Unlock(ctx))
	w, err := rl.TryLock(ctx, k, 5*time.Second)
	require.NoError(t, err, "want the writer in once the last reader left")
	require.NoError(t, w.Unlock(ctx))
	r4, err := rl.TryRLock(ctx, k, 5*time.Second)
	require.NoError(t, err, "want a reader in at once after the writer: no mark left")
	require.NoError(t, r4.Unlock(ctx))
	requireRWGone(t, clients, k, 10*time.Second)
}

// TestWriterMarkKeysAndFencing: LockKeys marks each of its keys that
// readers hold, and a fenced Lock marks as an unfenced one does.
func TestWriterMarkKeysAndFencing(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	a, b := key(t)+"-a", key(t)+"-b"
	r, err := rl.TryRLock(ctx, b, 10*time.Second)
	require.NoError(t, err)
	for _, lock := range []func(context.Context) error{
		func(c context.Context) error {
			_, err := rl.LockKeys(c, []string{a, b}, 5*time.Second, redlock.WithRetryDelay(5*time.Second))
			return err
		},
		func(c context.Context) error {
			_, err := rl.Lock(c, b, 5*time.Second, redlock.WithFencing(), redlock.WithRetryDelay(5*time.Second))
			return err
		},
	} {
		// The mark lasts three retry delays (15s): checked at once.
		err := lock(cancelledAfter(t, 100*time.Millisecond))
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		_, err = rl.TryRLock(ctx, b, 5*time.Second)
		require.ErrorIs(t, err, redlock.ErrContended, "want a new reader of %s held off by the mark", b)
		r2, err := rl.TryRLock(ctx, a, 5*time.Second)
		require.NoError(t, err, "want readers of %s, which no reader held, not marked", a)
		require.NoError(t, r2.Unlock(ctx))
	}
	require.NoError(t, r.Unlock(ctx)) // the last reader: the key and its mark go
	r3, err := rl.TryRLock(ctx, b, 5*time.Second)
	require.NoError(t, err, "want a reader in once the marked key went with its last reader")
	require.NoError(t, r3.Unlock(ctx))
}

// TestReadWriteRandomized: 6 clients on 2 keys mix RLock, TryRLock,
// Lock, TryLock and LockKeys over both keys, with contexts of 1ms to
// 300ms that end at random instants of the waits, for 3 seconds.
// Checked over the whole run: a writer never shares a key with a live
// reader or writer, a reader never with a live writer; both kinds are
// granted; and every key (marks included) is gone from every node once
// the clients stop. The choices come from a seed it logs; replay with
// -seed N.
func TestReadWriteRandomized(t *testing.T) {
	seed := testSeed(t)
	_, clients := cluster(t, 3)
	ctx := context.Background()
	base := key(t)
	keys := []string{base + "-0", base + "-1"}

	type holder struct {
		write bool
		end   time.Time // its deadline
	}
	var mu sync.Mutex
	held := map[string]map[*redlock.Lock]holder{keys[0]: {}, keys[1]: {}}
	var reads, writes atomic.Int64
	acquired := func(l *redlock.Lock, ks []string, write bool, from time.Time) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range ks {
			for other, h := range held[k] {
				if !h.end.After(from) {
					continue // its validity ran out before our attempt began
				}
				if write || h.write {
					t.Errorf("seed %d: %s: %s (write %v) granted while %s (write %v) held it until %v", seed, k, l.Token(), write, other.Token(), h.write, h.end)
				}
			}
			held[k][l] = holder{write: write, end: l.Deadline()}
		}
	}
	released := func(l *redlock.Lock, ks []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range ks {
			delete(held[k], l)
		}
	}

	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for g := range 6 {
		rl := newClient(t, clients)
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(g)))
		wg.Go(func() {
			for time.Now().Before(stop) {
				wait := time.Duration(1+rng.IntN(300)) * time.Millisecond
				cctx, cancel := context.WithTimeout(ctx, wait)
				k := keys[rng.IntN(2)]
				ks := []string{k}
				write := true
				from := time.Now()
				var l *redlock.Lock
				var err error
				switch op := rng.IntN(5); op {
				case 0:
					write = false
					l, err = rl.RLock(cctx, k, 2*time.Second)
				case 1:
					write = false
					l, err = rl.TryRLock(cctx, k, 2*time.Second)
				case 2:
					l, err = rl.Lock(cctx, k, 2*time.Second)
				case 3:
					l, err = rl.TryLock(cctx, k, 2*time.Second)
				case 4:
					ks = keys
					l, err = rl.LockKeys(cctx, keys, 2*time.Second)
				}
				cancel()
				if err != nil {
					if !errors.Is(err, redlock.ErrNotObtained) {
						t.Errorf("seed %d: client %d: %v", seed, g, err)
						return
					}
					continue
				}
				if write {
					writes.Add(1)
				} else {
					reads.Add(1)
				}
				acquired(l, ks, write, from)
				time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond) // the holder's work
				released(l, ks)                                            // before Unlock: its keys may be free once it starts
				_ = l.Unlock(ctx)
			}
		})
	}
	wg.Wait()
	t.Logf("granted: %d reads, %d writes", reads.Load(), writes.Load())
	require.Positive(t, reads.Load(), "seed %d: no read lock granted", seed)
	require.Positive(t, writes.Load(), "seed %d: no write lock granted", seed)
	for _, k := range keys {
		requireRWGone(t, clients, k, 10*time.Second) // the seed is logged above
	}
}

// cancelledAfter returns a ctx with no deadline, cancelled after d: a
// writer that gives up without a deadline to bound its mark.
func cancelledAfter(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	stop := time.AfterFunc(d, cancel)
	t.Cleanup(func() {
		stop.Stop()
		cancel()
	})
	return ctx
}
