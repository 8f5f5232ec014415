package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
)

// Adversarial tests of the waiting writer's mark (writer_mark.lua,
// read_acquire.lua): auto-extended readers under it, nodes restarted
// while a key is marked, a key prefix, 1ms contexts and concurrent calls
// on one read lock while a writer waits.

// readersMark is the start of a marked readers' value on a node.
const readersMark = "redlock:readers:w:"

// markedOn reports whether every one of clients holds k marked by a
// waiting writer.
func markedOn(t testing.TB, clients []redis.UniversalClient, k string) bool {
	t.Helper()
	for _, c := range clients {
		if !strings.HasPrefix(get(t, c, k), readersMark) {
			return false
		}
	}
	return true
}

// TestWriterMarkAutoExtendedReaders: readers whose leases the scheduler
// extends (batched extensions) keep them under a waiting writer's mark:
// none is lost while the writer waits, and the writer, which cannot get
// in while they hold, gives up with ErrNotObtained. New readers are
// refused while the mark lasts, and let in once it ended though the
// auto-extended readers still renew their leases: the leases' renewals
// do not renew the mark. Once the readers Unlock, a waiting writer gets
// in, and not before.
func TestWriterMarkAutoExtendedReaders(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	k := key(t)
	// Long enough that a scheduling stall of a few hundred ms on a
	// loaded machine does not cost a lease (the test is about the mark).
	const ttl = time.Second
	actx, stopExtending := context.WithCancel(ctx)
	defer stopExtending()
	readers := make([]*redlock.Lock, 4)
	for i := range readers {
		r, err := rl.TryRLock(ctx, k, ttl)
		require.NoError(t, err, "reader %d", i)
		require.NoError(t, r.AutoExtend(actx), "reader %d", i)
		readers[i] = r
	}

	// A writer waits 2.5 TTLs with a 100ms retry delay: it marks the
	// key on its first attempt and again on each one.
	wctx, cancel := context.WithTimeout(ctx, 5*ttl/2)
	werr := make(chan error, 1)
	go func() {
		_, err := rl.Lock(wctx, k, time.Second, redlock.WithRetryDelay(100*time.Millisecond))
		werr <- err
	}()
	eventually(t, 5*time.Second, func() bool { return markedOn(t, clients, k) }, "want %s marked on every node while the writer waits", k)
	_, err := rl.TryRLock(ctx, k, ttl)
	require.ErrorIs(t, err, redlock.ErrContended, "want a new reader refused under the mark")
	select {
	case err := <-werr:
		require.ErrorIs(t, err, redlock.ErrNotObtained, "want the writer out while auto-extended readers hold")
	case <-time.After(30 * time.Second):
		t.Fatal("the writer's Lock did not return within 30s of a 2.5s ctx")
	}
	cancel()
	for i, r := range readers {
		select {
		case <-r.Done():
			t.Fatalf("reader %d lost its lease under the mark: %v", i, r.Err())
		default:
		}
		require.Positive(t, r.Validity(), "reader %d", i)
	}

	// The mark lasts max(3 x 100ms, 100ms) from the last attempt; the
	// batched extensions of the readers' leases must not renew it.
	eventually(t, 10*time.Second, func() bool {
		r, err := rl.TryRLock(ctx, k, ttl)
		if err != nil {
			return false
		}
		require.NoError(t, r.Unlock(ctx))
		return true
	}, "want new readers in once the mark ended, while auto-extended readers hold")
	for i, r := range readers {
		require.Positive(t, r.Validity(), "reader %d lost its lease: %v", i, r.Err())
	}

	// A writer that waits until the readers leave gets in after their
	// last Unlock started, not before.
	var unlocking atomic.Bool
	granted := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		w, err := rl.Lock(wctx, k, time.Second)
		if err == nil {
			if !unlocking.Load() {
				err = errors.New("writer granted while every reader held its lease")
			}
			_ = w.Unlock(ctx)
		}
		granted <- err
	}()
	eventually(t, 5*time.Second, func() bool { return markedOn(t, clients, k) }, "want the second writer's mark")
	for i, r := range readers[:len(readers)-1] {
		require.NoError(t, r.Unlock(ctx), "reader %d", i)
	}
	unlocking.Store(true)
	require.NoError(t, readers[len(readers)-1].Unlock(ctx))
	select {
	case err := <-granted:
		require.NoError(t, err)
	case <-time.After(40 * time.Second):
		t.Fatal("the writer was not granted within 40s of the readers' Unlock")
	}
	requireRWGone(t, clients, k, 10*time.Second)
}

// TestWriterMarkNodeRestart: nodes restart, empty, while a reader holds
// a key and a writer waits for it (marking it).
//
// One node of three: the two that keep the reader's marked key refuse
// the writer and new readers, so neither gets in while the reader holds
// its lease; after its Unlock the writer does.
//
// Two of three, with the restart guard on the writer's Client: the two
// empty nodes grant the writer's SET NX, but as restarted nodes their
// votes do not count, so the writer does not get in while the reader's
// lease is valid (without the guard it would: the case the guard is
// for).
func TestWriterMarkNodeRestart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		restarts int
		guard    time.Duration
	}{
		{"minority", 1, 0},
		{"majority with guard", 2, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, clients := cluster(t, 3)
			ctx := context.Background()
			k := key(t)
			readerC := newClient(t, clients)
			var wopts []redlock.Option
			if tc.guard > 0 {
				wopts = append(wopts, redlock.WithRestartGuard(tc.guard))
			}
			writerC := newClient(t, clients, wopts...)
			if tc.guard > 0 {
				// The guard refuses the votes of nodes younger than
				// guard (these were just started): wait until it counts
				// them, so that only the restart below holds them off.
				eventually(t, 20*time.Second, func() bool {
					p, err := writerC.TryLock(ctx, k+"-probe", time.Second)
					if err != nil {
						return false
					}
					require.NoError(t, p.Unlock(ctx))
					return true
				}, "want the guarded writer's Client to count the fresh nodes' votes")
			}
			r, err := readerC.TryRLock(ctx, k, 2*time.Second)
			require.NoError(t, err)
			type grant struct {
				at  time.Time
				err error
			}
			granted := make(chan grant, 1)
			var unlocked atomic.Bool
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				w, err := writerC.Lock(wctx, k, 2*time.Second)
				at := time.Now()
				if err == nil {
					if !unlocked.Load() && at.Before(r.Deadline()) {
						err = errors.New("writer granted while the reader's lease was valid")
					}
					_ = w.Unlock(ctx)
				}
				granted <- grant{at, err}
			}()
			eventually(t, 5*time.Second, func() bool { return markedOn(t, clients, k) }, "want %s marked while the writer waits", k)
			for i := range tc.restarts {
				require.NoError(t, nodes[i].Restart(), "node %d", i)
			}
			if tc.restarts == 1 {
				// The reader's lease is valid on two nodes: still held.
				_, err := writerC.TryRLock(ctx, k, time.Second)
				require.ErrorIs(t, err, redlock.ErrContended, "want a new reader refused by the two marked nodes")
				select {
				case g := <-granted:
					t.Fatalf("writer returned while the reader held its lease: %v", g.err)
				case <-time.After(300 * time.Millisecond): // a window for a wrong grant; the writer retries every ~50ms
				}
				unlocked.Store(true)
				require.NoError(t, r.Unlock(ctx))
			}
			select {
			case g := <-granted:
				require.NoError(t, g.err)
			case <-time.After(40 * time.Second):
				t.Fatal("the writer was not granted within 40s")
			}
			requireRWGone(t, clients, k, 10*time.Second)
		})
	}
}

// TestWriterMarkKeyPrefix: under WithKeyPrefix the mark lands on the
// prefixed key and nothing unprefixed is created; readers under the
// prefix are held off by it; and the last reader's release, announced
// under the prefix, wakes the waiting writer long before its retry
// delay.
func TestWriterMarkKeyPrefix(t *testing.T) {
	_, clients := cluster(t, 3)
	const prefix = "tenant-a:"
	rl := newClient(t, clients, redlock.WithKeyPrefix(prefix))
	ctx := context.Background()
	k := key(t)
	r, err := rl.TryRLock(ctx, k, 10*time.Second)
	require.NoError(t, err)

	type grant struct {
		w   *redlock.Lock
		err error
	}
	granted := make(chan grant, 1)
	go func() {
		// A 20s retry delay: only the release's announcement can let the
		// writer in within a few seconds.
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		w, err := rl.Lock(wctx, k, 5*time.Second, redlock.WithRetryDelay(20*time.Second))
		granted <- grant{w, err}
	}()
	eventually(t, 5*time.Second, func() bool { return markedOn(t, clients, prefix+k) }, "want %s%s marked", prefix, k)
	for i, c := range clients {
		require.Zero(t, c.Exists(ctx, k, redlock.ReadersKey(k)).Val(), "node %d: an unprefixed key was created", i)
		require.EqualValues(t, 1, c.ZCard(ctx, redlock.ReadersKey(prefix+k)).Val(), "node %d: want the one reader's lease under the prefix", i)
	}
	_, err = rl.TryRLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrContended, "want a new reader under the prefix held off by the mark")
	other := newClient(t, clients) // no prefix: another key altogether
	o, err := other.TryRLock(ctx, k, time.Second)
	require.NoError(t, err, "want the unprefixed key free of the prefixed key's mark")
	require.NoError(t, o.Unlock(ctx))

	released := time.Now()
	require.NoError(t, r.Unlock(ctx))
	select {
	case g := <-granted:
		require.NoError(t, g.err)
		// The first retry is at least 10s away (half the delay).
		require.Less(t, time.Since(released), 8*time.Second, "want the writer woken by the release, not its retry delay")
		require.NoError(t, g.w.Unlock(ctx))
	case <-time.After(40 * time.Second):
		t.Fatal("the writer was not granted within 40s of the release")
	}
	requireRWGone(t, clients, prefix+k, 10*time.Second)
	requireRWGone(t, clients, k, 10*time.Second)
}

// TestWriterMarkTinyContexts: writers whose contexts end after 1 to 3ms
// (Lock, fenced Lock, LockKeys) and readers' RLocks with 1ms contexts,
// against readers that hold the key: every writer is refused (never
// granted), every call returns an error matching ErrNotObtained, no
// lease is lost or left behind, the mark ends within its bound once the
// writers stop, and the last reader's release leaves nothing.
func TestWriterMarkTinyContexts(t *testing.T) {
	seed := testSeed(t)
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	k, k2 := key(t), key(t)
	readers := make([]*redlock.Lock, 2)
	for i := range readers {
		r, err := rl.TryRLock(ctx, k, 20*time.Second)
		require.NoError(t, err)
		readers[i] = r
	}
	var wg sync.WaitGroup
	var calls atomic.Int64
	for g := range 4 {
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(g)))
		wg.Go(func() {
			for range 50 {
				d := time.Duration(1+rng.IntN(3)) * time.Millisecond
				cctx, cancel := context.WithTimeout(ctx, d)
				var l *redlock.Lock
				var err error
				switch rng.IntN(4) {
				case 0:
					l, err = rl.Lock(cctx, k, time.Second)
				case 1:
					l, err = rl.Lock(cctx, k, time.Second, redlock.WithFencing())
				case 2:
					l, err = rl.LockKeys(cctx, []string{k2, k}, time.Second)
				case 3:
					// A reader's wait under the mark.
					cctx2, cancel2 := context.WithTimeout(ctx, time.Millisecond)
					l, err = rl.RLock(cctx2, k, time.Second)
					cancel2()
					if err == nil {
						_ = l.Unlock(ctx) // a reader may get in: before the first mark
						cancel()
						continue
					}
				}
				cancel()
				calls.Add(1)
				if err == nil {
					_ = l.Unlock(ctx)
					t.Errorf("seed %d: a writer was granted while two readers held %s", seed, k)
					return
				}
				if !errors.Is(err, redlock.ErrNotObtained) {
					t.Errorf("seed %d: want ErrNotObtained, got %v", seed, err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d refused calls", calls.Load())
	for i, r := range readers {
		require.Positive(t, r.Validity(), "reader %d", i)
		require.NoError(t, r.Extend(ctx, 20*time.Second), "reader %d: want its Extend under the marks", i)
	}
	for i, c := range clients {
		require.EqualValues(t, 2, c.ZCard(ctx, redlock.ReadersKey(k)).Val(), "node %d: want the two readers' leases only", i)
		require.Zero(t, c.Exists(ctx, k2).Val(), "node %d: LockKeys left %s behind", i, k2)
	}
	// The writers' marks (default retry delay: 150ms) end within a
	// second or so; allow 10s on a stalled machine.
	eventually(t, 10*time.Second, func() bool {
		r, err := rl.TryRLock(ctx, k, time.Second)
		if err != nil {
			return false
		}
		require.NoError(t, r.Unlock(ctx))
		return true
	}, "want new readers in once the 1ms writers' marks ended")
	for _, r := range readers {
		require.NoError(t, r.Unlock(ctx))
	}
	requireRWGone(t, clients, k, 10*time.Second)
}

// TestReadLockConcurrentCallsUnderMark: while a writer waits (marking the
// key), goroutines call Extend (with TTLs shorter and longer than the
// lease), Validity, AutoExtend and Unlock on one read lock at random
// instants. The writer is granted only after Unlock started; every call
// returns nil or a matchable error; after the writer is in, the read
// lock's Extend fails with ErrNotHeld and leaves the writer's key alone.
// Rounds from a seed it logs; replay with -seed N.
func TestReadLockConcurrentCallsUnderMark(t *testing.T) {
	seed := testSeed(t)
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for round := range 15 {
		k := key(t)
		r, err := rl.TryRLock(ctx, k, time.Second)
		require.NoError(t, err)
		var unlocking atomic.Bool
		type grant struct {
			w   *redlock.Lock
			err error
		}
		granted := make(chan grant, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			w, err := rl.Lock(wctx, k, 5*time.Second, redlock.WithRetryDelay(20*time.Millisecond))
			// An Extend to 100ms and a stalled machine can end the
			// lease before Unlock: only a grant inside it is wrong.
			if err == nil && !unlocking.Load() && time.Now().Before(r.Deadline()) {
				err = errors.New("writer granted before the read lock's Unlock started, while its lease was valid")
			}
			granted <- grant{w, err}
		}()
		eventually(t, 5*time.Second, func() bool { return markedOn(t, clients, k) }, "round %d: want %s marked", round, k)

		var wg sync.WaitGroup
		var bad atomic.Pointer[string]
		fail := func(s string) { bad.CompareAndSwap(nil, &s) }
		unlockAfter := time.Duration(rng.IntN(30)) * time.Millisecond
		delays := make([]time.Duration, 6)
		ttls := make([]time.Duration, 6)
		for i := range delays {
			delays[i] = time.Duration(rng.IntN(40)) * time.Millisecond
			ttls[i] = time.Duration(100+rng.IntN(1900)) * time.Millisecond
		}
		actx, stopAuto := context.WithCancel(ctx)
		for i := range delays {
			wg.Go(func() {
				time.Sleep(delays[i]) // a random instant, not synchronization
				switch i % 3 {
				case 0, 1:
					if err := r.Extend(ctx, ttls[i]); err != nil && !errors.Is(err, redlock.ErrNotHeld) {
						fail("Extend: " + err.Error())
					}
				case 2:
					if err := r.AutoExtend(actx); err != nil && !errors.Is(err, redlock.ErrAlreadyExtending) && !errors.Is(err, redlock.ErrNotHeld) && !errors.Is(err, redlock.ErrReleased) {
						fail("AutoExtend: " + err.Error())
					}
				}
				_ = r.Validity()
			})
		}
		wg.Go(func() {
			time.Sleep(unlockAfter) // a random instant, not synchronization
			unlocking.Store(true)
			if err := r.Unlock(ctx); err != nil && !errors.Is(err, redlock.ErrNotHeld) {
				fail("Unlock: " + err.Error())
			}
		})
		wg.Wait()
		stopAuto()
		if p := bad.Load(); p != nil {
			t.Fatalf("seed %d round %d: %s", seed, round, *p)
		}
		var g grant
		select {
		case g = <-granted:
			require.NoError(t, g.err, "seed %d round %d", seed, round)
		case <-time.After(40 * time.Second):
			t.Fatalf("seed %d round %d: the writer was not granted within 40s of the read lock's Unlock", seed, round)
		}
		err = r.Extend(ctx, time.Second)
		require.ErrorIs(t, err, redlock.ErrNotHeld, "seed %d round %d: want the released read lock's Extend refused", seed, round)
		for i, c := range clients {
			// A node the writer did not need may still be releasing the
			// reader (in the background): wait for it.
			eventually(t, 10*time.Second, func() bool {
				v := get(t, c, k)
				return (v == g.w.Token() || v == "") && c.Exists(ctx, redlock.ReadersKey(k)).Val() == 0
			}, "seed %d round %d: node %d holds %q or a readers key under the writer", seed, round, i, get(t, c, k))
		}
		require.NoError(t, g.w.Unlock(ctx))
		requireRWGone(t, clients, k, 10*time.Second)
	}
}
