package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/node"
)

// TestReadWrite: readers share a key; a writer is refused while a live
// reader holds it and readers while a writer does; a reader whose lease
// expired stops blocking; readers extend; the last reader's release frees
// the key for a writer and leaves nothing on the nodes.
func TestReadWrite(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	k := key(t)

	r1 := rlock(t, rl, k, 10*time.Second)
	require.Equal(t, k, r1.Key())
	r2, err := rl.TryRLock(ctx, k, 10*time.Second)
	require.NoError(t, err, "want readers to share the key")
	_, err = rl.TryLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrContended, "want a writer refused while readers hold the key")
	require.NoError(t, r1.Extend(ctx, 20*time.Second))
	require.NoError(t, r1.Unlock(ctx))
	_, err = rl.TryLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrContended, "want a writer refused while one reader is left")
	require.NoError(t, r2.Unlock(ctx))

	w, err := rl.TryLock(ctx, k, 10*time.Second)
	require.NoError(t, err, "want the writer in once the readers left")
	_, err = rl.TryRLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrContended, "want a reader refused while a writer holds the key")
	require.NoError(t, w.Unlock(ctx))

	// An abandoned reader blocks only until its lease expires: a lease
	// of seconds, so that a stall cannot end it before the writer's
	// refusal below.
	_, err = rl.TryRLock(ctx, k, 2*time.Second)
	require.NoError(t, err)
	long, err := rl.TryRLock(ctx, k, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, long.Unlock(ctx)) // the short one stays, abandoned
	_, err = rl.TryLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrContended)
	eventuallyTaken(t, 10*time.Second, func() (*redlock.Lock, error) { return rl.TryLock(ctx, k, time.Second) },
		"want the writer in once the abandoned reader's lease expired")
	requireRWGone(t, clients, k, 2*time.Second)
}

// TestRWHandoff: a writer waiting for readers wakes on the last reader's
// release; a reader waiting for a writer wakes on the writer's.
func TestRWHandoff(t *testing.T) {
	var refused refusals
	clients, rl := threeNodes(t, redlock.WithObserver(refused.observe))
	ctx := context.Background()
	k := key(t)
	r := rlock(t, rl, k, 10*time.Second)
	wait := func(f func(context.Context) (*redlock.Lock, error)) <-chan *redlock.Lock {
		ch := make(chan *redlock.Lock, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			l, err := f(wctx)
			if err != nil {
				t.Errorf("waiter: %v", err)
			}
			ch <- l
		}()
		return ch
	}
	writer := wait(func(c context.Context) (*redlock.Lock, error) {
		return rl.Lock(c, k, 10*time.Second, redlock.WithRetryDelay(5*time.Second))
	})
	refused.awaitWaiting(t, clients, 1)
	start := time.Now()
	require.NoError(t, r.Unlock(ctx))
	w := <-writer
	require.NotNil(t, w)
	require.Less(t, time.Since(start), 2*time.Second, "want the writer woken by the last reader's release")

	before := refused.n.Load()
	reader := wait(func(c context.Context) (*redlock.Lock, error) {
		return rl.RLock(c, k, 10*time.Second, redlock.WithRetryDelay(5*time.Second))
	})
	refused.awaitWaiting(t, clients, before+1)
	start = time.Now()
	require.NoError(t, w.Unlock(ctx))
	r2 := <-reader
	require.NotNil(t, r2)
	require.Less(t, time.Since(start), 2*time.Second, "want the reader woken by the writer's release")
	require.NoError(t, r2.Unlock(ctx))
}

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
				// ErrUnreachable is Unlock's documented answer when a
				// stalled machine keeps a quorum's replies past the
				// release's wait; the release is retried in the
				// background, and the lease ends with its TTL.
				if err := r.Unlock(context.Background()); err != nil && !errors.Is(err, redlock.ErrUnreachable) {
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

// scriptCalls returns how many scripts (EVALSHA, EVAL, FCALL) node c
// has run, from INFO commandstats: every attempt of a family lock that
// reached it.
func scriptCalls(t testing.TB, c redis.UniversalClient) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	var n int64
	for _, ln := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(ln), ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval" && name != "cmdstat_fcall") {
			continue
		}
		var calls int64
		_, err := fmt.Sscanf(rest, "calls=%d", &calls)
		require.NoError(t, err, "%q", ln)
		n += calls
	}
	return n
}

// awaitAttempts waits until node c has run n more scripts: the
// attempts of callers that wait for a key (the only ones running on c
// meanwhile) have reached it, rather than sleeping for them to.
func awaitAttempts(t testing.TB, c redis.UniversalClient, n int64) {
	t.Helper()
	from := scriptCalls(t, c)
	eventually(t, 10*time.Second, func() bool { return scriptCalls(t, c) >= from+n },
		"want %d more attempts on the node", n)
}

// TestWriterNotStarvedByReaders: 8 readers that overlap without a gap
// (each holds 40ms and takes the key again at once) keep a TryLock
// writer out, but a Lock writer gets in once the readers that hold the
// key leave: new readers wait for it. While it holds the key no reader
// does. Before the writer's mark, the Lock writer waited for a chance
// gap between the readers.
func TestWriterNotStarvedByReaders(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	k := key(t)
	took := overlappingReaders(t, rl, k, 8, 40*time.Millisecond)

	for range 5 {
		_, err := rl.TryLock(ctx, k, 5*time.Second)
		require.ErrorIs(t, err, redlock.ErrContended, "want a TryLock writer refused while readers overlap")
	}
	w, meanwhile := lockPastReaders(t, rl, k, took, "while readers keep coming")
	// Readers whose RLock was in flight at the writer's first attempt
	// may still get in; after that, none until the writer has been in.
	// Without the mark the writer gets in only through a chance gap
	// between readers: after hundreds of read locks and seconds, if at
	// all.
	require.LessOrEqual(t, meanwhile, int64(24), "want new readers held off once the writer waits")
	// While the writer holds the key, no reader gets it.
	during := took.Load()
	_, err := rl.TryRLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrContended, "want a reader refused while the writer holds the key")
	awaitAttempts(t, clients[0], 3) // the readers keep trying meanwhile
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
// that: TestWriterMarkAfterGiveUp.)
func TestWriterMarkEnds(t *testing.T) {
	t.Parallel()
	clients, rl := threeNodes(t)
	ctx := context.Background()
	k := key(t)
	r := rlock(t, rl, k, 10*time.Second)

	// TryLock: refused, no mark.
	_, err := rl.TryLock(ctx, k, 5*time.Second)
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
	eventuallyTaken(t, 10*time.Second, func() (*redlock.Lock, error) { return rl.TryRLock(ctx, k, 10*time.Second) },
		"want new readers in once the mark ended")
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
	_, rl := threeNodes(t)
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
	t.Parallel()
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
			held[k][l] = holder{write: write, end: deadlineOf(l)}
		}
	}
	released := func(l *redlock.Lock, ks []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range ks {
			delete(held[k], l)
		}
	}

	randomRW(t, seed, clients, 6, 3*time.Second, func(cctx context.Context, rl *redlock.Client, rng *rand.Rand) (rwGrant, error) {
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
		return rwGrant{write: write, hold: func() {
			acquired(l, ks, write, from)
			time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond) // the holder's work
			released(l, ks)                                            // before Unlock: its keys may be free once it starts
			_ = l.Unlock(ctx)
		}}, err
	})
	for _, k := range keys {
		requireRWGone(t, clients, k, 10*time.Second) // the seed is logged above
	}
}

// rwGrant is a lock a randomized read-write run was granted, and what
// its holder does with it.
type rwGrant struct {
	write bool   // a write lock, else a read lock
	hold  func() // the holder's work, ending with its release
}

// randomRW runs n clients on clients for d, each with its own Client and
// its own rng from seed (the client's index its stream). In each round,
// attempt tries one acquisition with a ctx that ends after 1ms to 300ms
// (cancelled once it returns); a refusal must match ErrNotObtained (else
// the test fails and the client stops), and a grant is counted by kind
// and held. Once every client stopped, it checks that both kinds were
// granted and returns how many of each.
func randomRW(t *testing.T, seed uint64, clients []redis.UniversalClient, n int, d time.Duration, attempt func(ctx context.Context, rl *redlock.Client, rng *rand.Rand) (rwGrant, error)) (reads, writes int64) {
	t.Helper()
	var r, w atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for g := range n {
		rl := newClient(t, clients)
		rng := rand.New(rand.NewPCG(seed, uint64(g)))
		wg.Go(func() {
			for time.Now().Before(stop) {
				wait := time.Duration(1+rng.IntN(300)) * time.Millisecond
				cctx, cancel := context.WithTimeout(context.Background(), wait)
				grant, err := attempt(cctx, rl, rng)
				cancel()
				if err != nil {
					if !errors.Is(err, redlock.ErrNotObtained) {
						t.Errorf("seed %d: client %d: %v", seed, g, err)
						return
					}
					continue
				}
				if grant.write {
					w.Add(1)
				} else {
					r.Add(1)
				}
				grant.hold()
			}
		})
	}
	wg.Wait()
	t.Logf("granted: %d reads, %d writes", r.Load(), w.Load())
	require.Positive(t, r.Load(), "seed %d: no read lock granted", seed)
	require.Positive(t, w.Load(), "seed %d: no write lock granted", seed)
	return r.Load(), w.Load()
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
	t.Parallel()
	clients, rl := threeNodes(t)
	ctx := context.Background()
	k := key(t)
	// Long enough that a scheduling stall of a few hundred ms on a
	// loaded machine does not cost a lease (the test is about the mark):
	// with the 250ms per-node timeout, a 1s lease survives no stall at
	// all, a 2s one half a second (survivableStall).
	const ttl = 2 * time.Second
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
	eventuallyTaken(t, 10*time.Second, func() (*redlock.Lock, error) { return rl.TryRLock(ctx, k, ttl) },
		"want new readers in once the mark ended, while auto-extended readers hold")
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
	awaitNoError(t, granted, 40*time.Second, "the writer was not granted within 40s of the readers' Unlock")
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
	t.Parallel()
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
				eventuallyTaken(t, 20*time.Second, func() (*redlock.Lock, error) { return writerC.TryLock(ctx, k+"-probe", time.Second) },
					"want the guarded writer's Client to count the fresh nodes' votes")
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
					if !unlocked.Load() && at.Before(deadlineOf(r)) {
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
	const prefix = "tenant-a:"
	clients, rl := threeNodes(t, redlock.WithKeyPrefix(prefix))
	ctx := context.Background()
	k := key(t)
	r := rlock(t, rl, k, 10*time.Second)

	granted := acquireAsync(func() (*redlock.Lock, error) {
		// A 20s retry delay: only the release's announcement can let the
		// writer in within a few seconds.
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		return rl.Lock(wctx, k, 5*time.Second, redlock.WithRetryDelay(20*time.Second))
	})
	eventually(t, 5*time.Second, func() bool { return markedOn(t, clients, prefix+k) }, "want %s%s marked", prefix, k)
	for i, c := range clients {
		require.Zero(t, c.Exists(ctx, k, redlock.KeyName("readers", k)).Val(), "node %d: an unprefixed key was created", i)
		require.EqualValues(t, 1, c.ZCard(ctx, redlock.KeyName("readers", prefix+k)).Val(), "node %d: want the one reader's lease under the prefix", i)
	}
	_, err := rl.TryRLock(ctx, k, time.Second)
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
		require.NoError(t, g.l.Unlock(ctx))
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
	clients, rl := threeNodes(t)
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
		require.EqualValues(t, 2, c.ZCard(ctx, redlock.KeyName("readers", k)).Val(), "node %d: want the two readers' leases only", i)
		require.Zero(t, c.Exists(ctx, k2).Val(), "node %d: LockKeys left %s behind", i, k2)
	}
	// The writers' marks (default retry delay: 150ms) end within a
	// second or so; allow 10s on a stalled machine.
	eventuallyTaken(t, 10*time.Second, func() (*redlock.Lock, error) { return rl.TryRLock(ctx, k, time.Second) },
		"want new readers in once the 1ms writers' marks ended")
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
	clients, rl := threeNodes(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for round := range 15 {
		k := key(t)
		r, err := rl.TryRLock(ctx, k, time.Second)
		require.NoError(t, err)
		var unlocking atomic.Bool
		granted := acquireAsync(func() (*redlock.Lock, error) {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			w, err := rl.Lock(wctx, k, 5*time.Second, redlock.WithRetryDelay(20*time.Millisecond))
			// An Extend to 100ms and a stalled machine can end the
			// lease before Unlock: only a grant inside it is wrong.
			if err == nil && !unlocking.Load() && time.Now().Before(deadlineOf(r)) {
				err = errors.New("writer granted before the read lock's Unlock started, while its lease was valid")
			}
			return w, err
		})
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
					if err := r.AutoExtend(actx); err != nil && !errors.Is(err, redlock.ErrInvalid) && !errors.Is(err, redlock.ErrNotHeld) && !errors.Is(err, redlock.ErrReleased) {
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
		var g acquireResult
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
				return (v == g.l.Token() || v == "") && c.Exists(ctx, redlock.KeyName("readers", k)).Val() == 0
			}, "seed %d round %d: node %d holds %q or a readers key under the writer", seed, round, i, get(t, c, k))
		}
		require.NoError(t, g.l.Unlock(ctx))
		requireRWGone(t, clients, k, 10*time.Second)
	}
}

// cleanErr checks that err is one a user can match: nil, or
// ErrNotObtained with no node failure other than a wrong-type key when
// wrongTypeOK. It returns a description of what is wrong, or "".
func cleanErr(err error, wrongTypeOK bool) string {
	if err == nil {
		return ""
	}
	if !errors.Is(err, redlock.ErrNotObtained) {
		return "not ErrNotObtained: " + err.Error()
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return "not a *QuorumError: " + err.Error()
	}
	for _, n := range qe.Nodes {
		if n.Status == "failed" {
			if errors.Is(n.Err, context.DeadlineExceeded) || errors.Is(n.Err, node.ErrNodeTimeout) {
				continue // the caller's ctx ended during the round
			}
			if wrongTypeOK && n.Err != nil && strings.Contains(n.Err.Error(), "WRONGTYPE") {
				continue
			}
			return "a node failed (reported as an outage): " + err.Error()
		}
	}
	return ""
}

// TestWriterMarkOddPresets: the lock key preset on every node to odd
// values that look like (or almost like) a marked marker, with no, a
// live, an expired or a wrong-type readers key, with and without an
// expiry. Every acquisition returns within its ctx with nil or a clean
// ErrNotObtained (no node reported failed: the nodes answered), a writer
// is never granted over a live reader lease or a key it does not own, and
// a reader's Unlock never deletes a live foreign lease.
func TestWriterMarkOddPresets(t *testing.T) {
	t.Parallel()
	runOddPresets(t)
}

func runOddPresets(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	values := []string{
		"redlock:readers:w:",
		"redlock:readers:w:abc",
		"redlock:readers:w:-5",
		"redlock:readers:w:99999999999999999999",
		"redlock:readers:wx",
		"redlock:readers:w:inf",
		"redlock:readers:w:nan",
		"redlock:readers:w:0x7fffffffffff",
		"redlock:readers:w:1e400",
		"redlock:readers:w: 12",
		"redlock:readers:w:12:w:34",
		"redlock:readers",
		"redlock:readers:",
		"redlock:readersX",
	}
	type zsetKind int
	const (
		zNone zsetKind = iota
		zLive
		zExpired
		zWrongType
	)
	zNames := []string{"no readers key", "a live foreign lease", "an expired lease", "a wrong-type readers key"}
	lastZ := zWrongType
	var (
		pmu      sync.Mutex
		problems []string
	)
	report := func(format string, args ...any) {
		pmu.Lock()
		defer pmu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for vi, v := range values {
		for _, ttl := range []time.Duration{5 * time.Second, 0} {
			for z := zNone; z <= lastZ; z++ {
				k := fmt.Sprintf("%s-%d-%d-%d", key(t), vi, ttl/time.Second, z)
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					oddPreset(t, ctx, rl, clients, k, v, ttl, z == zLive, z == zExpired, z == zWrongType, zNames[z], report)
				}()
			}
		}
	}
	wg.Wait()
	for _, p := range problems {
		t.Error(p)
	}
}

// bookHolder is a lock the randomized tests hold.
type bookHolder struct {
	l     *redlock.Lock
	write bool
}

// holdBook records who holds which key and checks that no grant shares a
// key with a holder of the other kind (or a writer with anyone) while
// both are valid, as their Deadlines (read live: auto-extension and
// Extend move them) say at the instant the grant returned.
type holdBook struct {
	t     *testing.T
	seed  uint64
	mu    sync.Mutex
	held  map[string]map[*redlock.Lock]bookHolder
	fence map[string]int64 // the last fence granted per key
}

func newHoldBook(t *testing.T, seed uint64, keys ...string) *holdBook {
	b := &holdBook{t: t, seed: seed, held: map[string]map[*redlock.Lock]bookHolder{}, fence: map[string]int64{}}
	for _, k := range keys {
		b.held[k] = map[*redlock.Lock]bookHolder{}
	}
	return b
}

func (b *holdBook) acquired(l *redlock.Lock, ks []string, write bool, fenced bool) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !deadlineOf(l).After(now) {
		return // no validity left: it promises nothing
	}
	for _, k := range ks {
		for other, h := range b.held[k] {
			if !deadlineOf(other).After(now) {
				continue
			}
			if write || h.write {
				b.t.Errorf("seed %d: %s: %s (write %v, valid %v) granted while %s (write %v) is valid for %v more",
					b.seed, k, l.Token(), write, time.Until(deadlineOf(l)), other.Token(), h.write, deadlineOf(other).Sub(now))
			}
		}
		b.held[k][l] = bookHolder{l: l, write: write}
		if fenced {
			if f := l.Fence(); f <= b.fence[k] {
				b.t.Errorf("seed %d: %s: fence %d granted after fence %d", b.seed, k, f, b.fence[k])
			} else {
				b.fence[k] = f
			}
		}
	}
}

func (b *holdBook) released(l *redlock.Lock, ks []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range ks {
		delete(b.held[k], l)
	}
}

// TestWriterMarkRandomized: 8 clients on 2 keys mix RLock (half of them
// auto-extended with short TTLs, held past their TTL), TryRLock, Lock
// (retry delays 2ms to 100ms, so marks of 100ms to 300ms), TryLock,
// LockKeys and fenced Lock, with contexts of 1ms to 300ms; holders Extend
// with shorter and longer TTLs, sometimes concurrently with their own
// Unlock. Checked: no writer shares a key with a valid holder, no reader
// with a valid writer; fences increase; both kinds are granted; nothing
// is left on the nodes afterwards. Replay with -seed N.
func TestWriterMarkRandomized(t *testing.T) {
	t.Parallel()
	runMarkRandomized(t, 3, 8, false)
}

// TestWriterMarkRandomizedPausedNodes: TestWriterMarkRandomized on 5 nodes
// with 12 clients while one node after another is paused (SIGSTOP) for
// 20ms to 300ms, so that requests time out and land late: marks, read
// acquires and extensions included.
func TestWriterMarkRandomizedPausedNodes(t *testing.T) {
	t.Parallel()
	runMarkRandomized(t, 5, 12, true)
}

func runMarkRandomized(t *testing.T, nodesN, clientsN int, pause bool) {
	seed := testSeed(t)
	nodes, clients := cluster(t, nodesN)
	ctx := context.Background()
	base := key(t)
	keys := []string{base + "-0", base + "-1"}
	book := newHoldBook(t, seed, keys...)
	var fencedN, extends, autoN, lost atomic.Int64
	stop := time.Now().Add(4 * time.Second)
	var pauses sync.WaitGroup
	t.Cleanup(pauses.Wait) // on a failure too: before the nodes go, every node resumed
	if pause {
		prng := rand.New(rand.NewPCG(seed, 999))
		pauses.Go(func() {
			for time.Now().Before(stop) {
				nd := nodes[prng.IntN(len(nodes))]
				if err := nd.Pause(); err != nil {
					t.Errorf("pause: %v", err)
					return
				}
				time.Sleep(time.Duration(20+prng.IntN(280)) * time.Millisecond) // the pause
				if err := nd.Resume(); err != nil {
					t.Errorf("resume: %v", err)
					return
				}
				time.Sleep(time.Duration(prng.IntN(100)) * time.Millisecond) // between pauses
			}
		})
	}
	reads, writes := randomRW(t, seed, clients, clientsN, 4*time.Second, func(cctx context.Context, rl *redlock.Client, rng *rand.Rand) (rwGrant, error) {
		k := keys[rng.IntN(2)]
		ks := []string{k}
		write, fenced, auto := true, false, false
		ttl := 2 * time.Second
		delay := redlock.WithRetryDelay([]time.Duration{2 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}[rng.IntN(5)])
		var l *redlock.Lock
		var err error
		switch rng.IntN(7) {
		case 0, 1:
			write = false
			auto = rng.IntN(2) == 0
			if auto {
				ttl = time.Duration(150+rng.IntN(150)) * time.Millisecond
			}
			l, err = rl.RLock(cctx, k, ttl, delay)
		case 2:
			write = false
			l, err = rl.TryRLock(cctx, k, ttl)
		case 3:
			l, err = rl.Lock(cctx, k, ttl, delay)
		case 4:
			l, err = rl.TryLock(cctx, k, ttl)
		case 5:
			ks = keys
			l, err = rl.LockKeys(cctx, keys, ttl, delay)
		case 6:
			fenced = true
			l, err = rl.Lock(cctx, k, ttl, delay, redlock.WithFencing())
		}
		return rwGrant{write: write, hold: func() {
			if fenced {
				fencedN.Add(1)
			}
			book.acquired(l, ks, write, fenced)
			hold := time.Duration(rng.IntN(20)) * time.Millisecond
			if auto {
				autoN.Add(1)
				if err := l.AutoExtend(ctx); err != nil {
					// AutoExtend returns Err() for a lock that has
					// already ended: with a 150ms TTL, an acquire that
					// waited for a paused node can return with little
					// validity left. Anything else is wrong.
					if l.Err() == nil {
						t.Errorf("seed %d: AutoExtend on a live lock: %v", seed, err)
					}
				}
				hold = time.Duration(rng.IntN(400)) * time.Millisecond // past the TTL
			}
			var ewg sync.WaitGroup
			if rng.IntN(2) == 0 && !auto {
				// Extends, shorter or longer, during the work and racing
				// the Unlock below.
				for range 1 + rng.IntN(3) {
					ettl := time.Duration(50+rng.IntN(3000)) * time.Millisecond
					pause := time.Duration(rng.IntN(int(hold/time.Millisecond)+2)) * time.Millisecond
					ewg.Go(func() {
						time.Sleep(pause) // a random instant of the work, not synchronization
						if l.Extend(ctx, ettl) == nil {
							extends.Add(1)
						}
					})
				}
			}
			time.Sleep(hold) // the holder's work
			if auto {
				select {
				case <-l.Done():
					// Lost while auto-extended (a loaded machine?).
					lost.Add(1)
					t.Logf("seed %d: auto-extended read lock lost: %v", seed, l.Err())
				default:
				}
			}
			book.released(l, ks) // before Unlock: its keys may be free once it starts
			_ = l.Unlock(ctx)
			ewg.Wait()
		}}, err
	})
	pauses.Wait() // every node resumed
	t.Logf("granted: %d reads (%d auto-extended, %d lost), %d writes (%d fenced), %d extends", reads, autoN.Load(), lost.Load(), writes, fencedN.Load(), extends.Load())
	for _, k := range keys {
		requireRWGone(t, clients, k, 10*time.Second)
	}
	require.Empty(t, nodeKeys(t, clients, base), "seed %d: keys left on the nodes", seed)
}

// oddPreset runs each acquisition on k preset to v (see
// TestWriterMarkOddPresets) and reports what is wrong.
func oddPreset(t *testing.T, ctx context.Context, rl *redlock.Client, clients []redis.UniversalClient, k, v string, ttl time.Duration, live, expired, wrongType bool, zName string, report func(string, ...any)) {
	rk := redlock.KeyName("readers", k)
	setup := func() bool {
		for _, c := range clients {
			p := c.TxPipeline()
			p.Del(ctx, k, rk)
			p.Set(ctx, k, v, ttl)
			switch {
			case live:
				now := time.Now().UnixMilli()
				p.ZAdd(ctx, rk, redis.Z{Score: float64(now + 5000), Member: "foreign-reader-0123456789"})
				p.PExpire(ctx, rk, 5*time.Second)
			case expired:
				p.ZAdd(ctx, rk, redis.Z{Score: 5, Member: "foreign-reader-0123456789"})
			case wrongType:
				p.Set(ctx, rk, "not a zset", 5*time.Second)
			}
			if _, err := p.Exec(ctx); err != nil {
				report("setup: %v", err)
				return false
			}
		}
		return true
	}
	what := fmt.Sprintf("value %q, ttl %v, %s", v, ttl, zName)
	isMarkerish := v == "redlock:readers" || strings.HasPrefix(v, "redlock:readers:w:")
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 60*time.Millisecond) }
	delay := redlock.WithRetryDelay(10 * time.Millisecond)
	type op struct {
		name  string
		write bool
		f     func() (*redlock.Lock, error)
	}
	ops := []op{
		{"TryRLock", false, func() (*redlock.Lock, error) { return rl.TryRLock(ctx, k, time.Second) }},
		{"RLock", false, func() (*redlock.Lock, error) {
			c, cancel := short()
			defer cancel()
			return rl.RLock(c, k, time.Second, delay)
		}},
		{"TryLock", true, func() (*redlock.Lock, error) { return rl.TryLock(ctx, k, time.Second) }},
		{"Lock", true, func() (*redlock.Lock, error) {
			c, cancel := short()
			defer cancel()
			return rl.Lock(c, k, time.Second, delay)
		}},
		{"LockKeys", true, func() (*redlock.Lock, error) {
			c, cancel := short()
			defer cancel()
			return rl.LockKeys(c, []string{k + "-other", k}, time.Second, delay)
		}},
		{"Lock fenced", true, func() (*redlock.Lock, error) {
			c, cancel := short()
			defer cancel()
			return rl.Lock(c, k, time.Second, redlock.WithFencing(), delay)
		}},
	}
	for _, o := range ops {
		if !setup() {
			return
		}
		var l *redlock.Lock
		var err error
		within(t, 5*time.Second, what+": "+o.name, func() { l, err = o.f() })
		if l == nil && err == nil {
			continue // within reported the panic
		}
		if p := cleanErr(err, wrongType); p != "" {
			report("%s: %s: %s", what, o.name, p)
		}
		if err != nil {
			continue
		}
		if o.write || !isMarkerish {
			// The key held a value that is not the caller's token on
			// every node.
			report("%s: %s granted over a key holding %q", what, o.name, v)
		}
		if !o.write {
			if err := l.Extend(ctx, 2*time.Second); err != nil {
				report("%s: %s: Extend: %v", what, o.name, err)
			}
		}
		if err := l.Unlock(ctx); err != nil {
			report("%s: %s: Unlock: %v", what, o.name, err)
		}
		if live {
			for i, c := range clients {
				if c.Exists(ctx, k).Val() == 0 {
					report("%s: %s: node %d: the key is gone while a foreign lease lives", what, o.name, i+1)
				}
			}
		}
	}
}

// acquireAsync runs f in the background and returns its result's channel.
func acquireAsync(f func() (*redlock.Lock, error)) <-chan acquireResult {
	ch := make(chan acquireResult, 1)
	go func() {
		l, err := f()
		ch <- acquireResult{l, err, time.Now()}
	}()
	return ch
}

// awaitAcquired waits (wait at most) for the acquisition of ch, which
// must succeed, and logs how long after since it came; ok is false if it
// did not come in time.
func awaitAcquired(t *testing.T, ch <-chan acquireResult, wait time.Duration, since time.Time, after string) (res acquireResult, ok bool) {
	t.Helper()
	select {
	case res = <-ch:
		require.NoError(t, res.err)
		t.Logf("in %v after %s", res.at.Sub(since).Round(time.Millisecond), after)
		return res, true
	case <-time.After(wait):
		return res, false
	}
}

// lockPastReaders takes the write lock of k with Lock (10s at most)
// while the readers counted by took keep coming; it returns the lock
// and how many read locks the readers took meanwhile.
func lockPastReaders(t *testing.T, rl *redlock.Client, k string, took *atomic.Int64, while string) (*redlock.Lock, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := took.Load()
	start := time.Now()
	w, err := rl.Lock(ctx, k, 5*time.Second)
	meanwhile := took.Load() - before
	require.NoError(t, err, "want the waiting writer in %s (after %d read locks)", while, meanwhile)
	t.Logf("writer in after %v (%d read locks meanwhile)", time.Since(start).Round(time.Millisecond), meanwhile)
	return w, meanwhile
}

type acquireResult struct {
	l   *redlock.Lock
	err error
	at  time.Time
}

// markLeft reports whether k on c holds a live writer's mark, and the
// mark's time left on the node's clock.
func markLeft(t testing.TB, c redis.UniversalClient, k string) (bool, time.Duration) {
	t.Helper()
	v := get(t, c, k)
	const p = "redlock:readers:w:"
	if !strings.HasPrefix(v, p) {
		return false, 0
	}
	var end int64
	_, err := fmt.Sscanf(v[len(p):], "%d", &end)
	require.NoError(t, err, "mark %q", v)
	now, err := c.Time(context.Background()).Result()
	require.NoError(t, err)
	left := time.Duration(end-now.UnixMilli()) * time.Millisecond
	return left > 0, left
}

// TestWriterMarkPrefixSeparatesClients: with WithKeyPrefix, a waiting writer's mark
// lands on the prefixed key on every node and nothing unprefixed is
// created; prefixed readers are held off while an unprefixed client's
// readers of the same name are not; in one Client a waiting writer and a
// waiting reader (both with retry delays far beyond the test) are woken
// in turn: the writer by the last reader's release, the reader by the
// writer's; nothing is left on the nodes.
func TestWriterMarkPrefixSeparatesClients(t *testing.T) {
	_, clients := cluster(t, 3)
	const pfx = "pfx:"
	rl := newClient(t, clients, redlock.WithKeyPrefix(pfx))
	plain := newClient(t, clients)
	ctx := context.Background()
	k := key(t)

	r1, err := rl.TryRLock(ctx, k, 8*time.Second)
	require.NoError(t, err)
	for i, c := range clients {
		eventually(t, 5*time.Second, func() bool { return get(t, c, pfx+k) == "redlock:readers" }, "node %d: want the marker on %s", i+1, pfx+k)
		require.Zero(t, c.Exists(ctx, k, redlock.KeyName("readers", k)).Val(), "node %d: unprefixed keys", i+1)
	}
	wctx, wcancel := context.WithTimeout(ctx, 8*time.Second)
	defer wcancel()
	writer := acquireAsync(func() (*redlock.Lock, error) {
		return rl.Lock(wctx, k, 5*time.Second, redlock.WithRetryDelay(time.Minute))
	})
	for i, c := range clients {
		eventually(t, 5*time.Second, func() bool { m, _ := markLeft(t, c, pfx+k); return m },
			"node %d: want the waiting writer's mark on %s", i+1, pfx+k)
		require.Zero(t, c.Exists(ctx, k, redlock.KeyName("readers", k)).Val(), "node %d: unprefixed keys", i+1)
	}
	_, err = rl.TryRLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrContended, "want a prefixed reader held off by the mark")
	pr, err := plain.TryRLock(ctx, k, time.Second)
	require.NoError(t, err, "want an unprefixed reader of the same name in: another key")
	require.NoError(t, pr.Unlock(ctx))
	require.NoError(t, r1.Extend(ctx, 8*time.Second), "want the held reader's Extend under the mark")

	rctx, rcancel := context.WithTimeout(ctx, 8*time.Second)
	defer rcancel()
	reader := acquireAsync(func() (*redlock.Lock, error) {
		return rl.RLock(rctx, k, 5*time.Second, redlock.WithRetryDelay(time.Minute))
	})
	// The reader is refused (the mark) and waits; give it the time to
	// subscribe. Its retry delay (30s to 90s) is beyond the test.
	select {
	case res := <-reader:
		t.Fatalf("want the reader to wait under the mark, got %v, %v", res.l, res.err)
	case <-time.After(300 * time.Millisecond):
	}
	start := time.Now()
	require.NoError(t, r1.Unlock(ctx))
	res, ok := awaitAcquired(t, writer, 3*time.Second, start, "the last reader's release")
	if !ok {
		t.Fatal("want the prefixed writer woken by the last reader's release (message r on the prefixed channel)")
	}
	w := res.l
	held := 0
	for _, c := range clients {
		if get(t, c, pfx+k) == w.Token() {
			held++
		}
	}
	require.GreaterOrEqual(t, held, 2, "want the writer's token on a quorum of the prefixed keys")
	select {
	case res := <-reader:
		t.Fatalf("a reader got in while the writer holds the key: %v, %v", res.l, res.err)
	case <-time.After(100 * time.Millisecond):
	}
	start = time.Now()
	require.NoError(t, w.Unlock(ctx))
	if res, ok = awaitAcquired(t, reader, 3*time.Second, start, "the writer's release"); !ok {
		t.Fatal("want the waiting reader woken by the writer's release")
	}
	require.NoError(t, res.l.Unlock(ctx))
	requireRWGone(t, clients, pfx+k, 5*time.Second)
	requireRWGone(t, clients, k, 5*time.Second)
	require.Empty(t, nodeKeys(t, clients, k), "keys left on the nodes")
}

// TestWriterMarkReadUnlockRacesExtend: a read lock under a waiting writer's
// mark is extended (shorter and longer TTLs, and auto-extended) by
// several goroutines while it is unlocked. Once Unlock returns, no
// extension may have revived the lease: the waiting writer gets in at
// once (well before the reader's 5s TTL), and nothing is left.
func TestWriterMarkReadUnlockRacesExtend(t *testing.T) {
	t.Parallel()
	clients, rl := threeNodes(t)
	ctx := context.Background()
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	for round := range 15 {
		k := fmt.Sprintf("%s-%d", key(t), round)
		r, err := rl.TryRLock(ctx, k, 5*time.Second)
		require.NoError(t, err)
		other, err := rl.TryRLock(ctx, k, 5*time.Second) // a second reader, released first
		require.NoError(t, err)
		wctx, wcancel := context.WithTimeout(ctx, 4*time.Second)
		writer := acquireAsync(func() (*redlock.Lock, error) {
			return rl.Lock(wctx, k, 5*time.Second, redlock.WithRetryDelay(2*time.Second))
		})
		for i, c := range clients {
			eventually(t, 3*time.Second, func() bool { m, _ := markLeft(t, c, k); return m }, "round %d: node %d: no mark", round, i+1)
		}
		if rng.IntN(2) == 0 {
			require.NoError(t, r.AutoExtend(ctx))
		}
		require.NoError(t, other.Unlock(ctx))
		var ewg sync.WaitGroup
		startExt := make(chan struct{})
		for range 4 {
			// Shorter and longer than the 5s TTL, but not so short
			// that a stalled machine ends the lease before Unlock.
			ettl := time.Duration(1000+rng.IntN(7100)) * time.Millisecond
			ewg.Go(func() {
				<-startExt
				for range 3 {
					if err := r.Extend(ctx, ettl); err != nil {
						return
					}
				}
			})
		}
		close(startExt)
		time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond) // a random instant of the Extends, not synchronization
		unlocked := time.Now()
		require.NoError(t, r.Unlock(ctx), "round %d", round)
		ewg.Wait()
		select {
		case res := <-writer:
			require.NoError(t, res.err, "round %d", round)
			require.Less(t, res.at.Sub(unlocked), 1500*time.Millisecond, "round %d: the writer waited long after the last reader's Unlock", round)
			require.NoError(t, res.l.Unlock(ctx))
		case <-time.After(4 * time.Second):
			t.Fatalf("round %d: the writer never got in after the last reader's Unlock: %v", round, nodeKeys(t, clients, k))
		}
		wcancel()
		requireRWGone(t, clients, k, 5*time.Second)
	}
}

// TestWriterMarkEndsWithinBound: after a writer gives up, the mark it left on each
// node ends within three retry delays (at least 100ms) plus the per-node
// timeout of its last attempt, as the node's clock tells; a reader that
// waits (RLock) gets in within that bound plus its own retry delay; a
// stale mark does not hold anyone off.
func TestWriterMarkEndsWithinBound(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	for _, d := range []time.Duration{time.Millisecond, 20 * time.Millisecond, 150 * time.Millisecond} {
		k := key(t)
		bound := max(3*d, 100*time.Millisecond) + testNodeTimeout
		r, err := rl.TryRLock(ctx, k, 10*time.Second)
		require.NoError(t, err)
		wctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		_, err = rl.Lock(wctx, k, 5*time.Second, redlock.WithRetryDelay(d))
		cancel()
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		gaveUp := time.Now()
		for i, c := range clients {
			// The mark may have ended already: it lasts no longer than
			// the writer's ctx deadline (at least 100ms).
			_, left := markLeft(t, c, k)
			require.LessOrEqual(t, left, bound, "delay %v: node %d: the mark outlives three retry delays and the per-node timeout", d, i+1)
		}
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		r2, err := rl.RLock(rctx, k, 5*time.Second, redlock.WithRetryDelay(10*time.Millisecond))
		rcancel()
		require.NoError(t, err, "delay %v: want a waiting reader in after the mark", d)
		took := time.Since(gaveUp)
		t.Logf("delay %v: reader in %v after the writer gave up (bound %v)", d, took.Round(time.Millisecond), bound)
		require.Less(t, took, bound+500*time.Millisecond, "delay %v: reader held off beyond the mark", d)
		require.NoError(t, r2.Unlock(ctx))
		require.NoError(t, r.Unlock(ctx))
		requireRWGone(t, clients, k, 5*time.Second)
	}
}

// TestWriterMarkHugeRetryDelay: a writer whose retry delay is so long
// that only the hand-off could wake it ("never retry on a timer"), with
// the hand-off off: each Lock call of 40ms against a reader makes one
// attempt and waits. With d above about 2/3 of math.MaxInt64 the jitter
// (d/2 + rand.N(d), retry.go) overflows to a negative delay about half
// the time, and the writer retries at once instead: about twice the
// attempts. The marks its attempts leave are logged.
func TestWriterMarkHugeRetryDelay(t *testing.T) {
	t.Parallel()
	_, clients := cluster(t, 3)
	for _, d := range []time.Duration{math.MaxInt64 / 3, math.MaxInt64 / 2, 200 * 365 * 24 * time.Hour, math.MaxInt64} {
		t.Run(fmt.Sprint(int64(d)), func(t *testing.T) {
			var rounds atomic.Int64
			rl := newClient(t, clients, redlock.WithObserver(observeWith(roundCounter{&rounds})))
			ctx := context.Background()
			k := key(t)
			r, err := rl.TryRLock(ctx, k, 10*time.Second)
			require.NoError(t, err)
			rounds.Store(0)
			const calls = 20
			for range calls {
				wctx, cancel := context.WithTimeout(ctx, 40*time.Millisecond)
				_, err = rl.Lock(wctx, k, 5*time.Second, redlock.WithRetryDelay(d), redlock.WithHandoff(false))
				cancel()
				require.ErrorIs(t, err, redlock.ErrNotObtained)
			}
			for i, c := range clients {
				_, left := markLeft(t, c, k)
				t.Logf("node %d: %q: the mark has %v left", i+1, get(t, c, k), left)
			}
			t.Logf("retry delay %v: %d lock rounds in %d calls", d, rounds.Load(), calls)
			require.LessOrEqual(t, rounds.Load(), int64(calls+calls/4), "retry delay %d: the writer retried at once (a negative, overflowed delay)", int64(d))
			require.NoError(t, r.Unlock(ctx))
			requireRWGone(t, clients, k, 5*time.Second)
		})
	}
}

type roundCounter struct{ n *atomic.Int64 }

func (o roundCounter) ObserveNode(redlock.Event) {}

func (o roundCounter) ObserveRound(e redlock.Event) {
	if e.Op == "lock" {
		o.n.Add(1)
	}
}

func (o roundCounter) ObserveLock(redlock.Event) {}

// TestWriterMarkPrefixedAutoExtendedReaders: prefixed readers,
// auto-extended (the scheduler's batched extend_batch.lua), keep their
// leases under a waiting writer's mark for several TTLs, across a SCRIPT
// FLUSH on every node (the EVAL fallbacks of the batch and of the
// writer's marking acquire); meanwhile no new reader and not the writer
// gets in. Once they leave, one by one, the writer gets in at the last
// one's release.
func TestWriterMarkPrefixedAutoExtendedReaders(t *testing.T) {
	const pfx = "pfx2:"
	clients, rl := threeNodes(t, redlock.WithKeyPrefix(pfx))
	ctx := context.Background()
	k := key(t)
	// Long enough that a scheduling stall of a few hundred ms on a
	// loaded machine does not cost a lease (the test is about the mark):
	// with the 250ms per-node timeout, a 2s lease survives half a second
	// (survivableStall), and is still extended several times under the
	// mark in 2.5 TTLs.
	const ttl = 2 * time.Second
	var readers []*redlock.Lock
	for range 3 {
		r, err := rl.TryRLock(ctx, k, ttl)
		require.NoError(t, err)
		require.NoError(t, r.AutoExtend(ctx))
		readers = append(readers, r)
	}
	// The writer waits through the whole watch below, and longer.
	wctx, wcancel := context.WithTimeout(ctx, 8*ttl)
	defer wcancel()
	writer := acquireAsync(func() (*redlock.Lock, error) {
		return rl.Lock(wctx, k, 5*time.Second, redlock.WithRetryDelay(300*time.Millisecond))
	})
	for i, c := range clients {
		eventually(t, 3*time.Second, func() bool { m, _ := markLeft(t, c, pfx+k); return m }, "node %d: no mark", i+1)
	}
	end := time.Now().Add(5 * ttl / 2)
	flushed := false
	for time.Now().Before(end) {
		if !flushed && time.Until(end) < 5*ttl/4 {
			for _, c := range clients {
				require.NoError(t, c.ScriptFlush(ctx).Err())
			}
			flushed = true
		}
		_, err := rl.TryRLock(ctx, k, time.Second)
		require.ErrorIs(t, err, redlock.ErrContended, "want new readers held off by the mark")
		select {
		case res := <-writer:
			t.Fatalf("the writer got in while auto-extended readers hold the key: %v, %v", res.l, res.err)
		default:
		}
		for i, r := range readers {
			select {
			case <-r.Done():
				t.Fatalf("reader %d lost under the mark: %v", i, r.Err())
			default:
			}
		}
		time.Sleep(50 * time.Millisecond) // polling the state, not synchronization
	}
	for i, r := range readers {
		require.Greater(t, r.Extensions(), 3, "reader %d: want it auto-extended under the mark", i)
	}
	var last time.Time
	for i, r := range readers {
		select {
		case res := <-writer:
			t.Fatalf("the writer got in with %d readers left: %v, %v", len(readers)-i, res.l, res.err)
		default:
		}
		last = time.Now()
		require.NoError(t, r.Unlock(ctx))
	}
	res, ok := awaitAcquired(t, writer, 3*time.Second, last, "the last reader's release")
	if !ok {
		t.Fatalf("the writer never got in: %v", nodeKeys(t, clients, k))
	}
	require.Less(t, res.at.Sub(last), time.Second)
	require.NoError(t, res.l.Unlock(ctx))
	requireRWGone(t, clients, pfx+k, 5*time.Second)
	require.Empty(t, nodeKeys(t, clients, k))
}

// TestWriterMarkFencedWritersInOrder: fenced Lock writers, one after another,
// each waiting for 6 readers that overlap without a gap: each gets in,
// its fence is above the last, and no reader holds the key meanwhile.
func TestWriterMarkFencedWritersInOrder(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	k := key(t)
	took := overlappingReaders(t, rl, k, 6, 30*time.Millisecond)
	var last int64
	for i := range 4 {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		w, err := rl.Lock(wctx, k, 5*time.Second, redlock.WithFencing())
		cancel()
		require.NoError(t, err, "writer %d", i)
		require.Greater(t, w.Fence(), last, "writer %d: fence", i)
		last = w.Fence()
		during := took.Load()
		_, err = rl.TryRLock(ctx, k, time.Second)
		require.ErrorIs(t, err, redlock.ErrContended)
		awaitAttempts(t, clients[0], 2) // the readers keep trying meanwhile
		require.Equal(t, during, took.Load(), "writer %d: a reader got in while the fenced writer holds the key", i)
		require.NoError(t, w.Unlock(ctx))
		eventually(t, 5*time.Second, func() bool { return took.Load() > during+3 }, "writer %d: readers back", i)
	}
}

// TestNestedReadWaitsForMarkingWriter: a goroutine that holds a read
// lock and takes the same read lock again (a nested read, as in a
// recursive call) while a writer waits is held off by the writer's mark,
// and the writer waits for the outer read: they wait for each other
// until one gives up. sync.RWMutex documents this; the mark makes it so
// here too. This test pins the behaviour (it passes when the nested
// read is refused) so the report can describe it.
func TestNestedReadWaitsForMarkingWriter(t *testing.T) {
	t.Parallel()
	clients, rl := threeNodes(t)
	ctx := context.Background()
	k := key(t)
	outer := rlock(t, rl, k, 10*time.Second)
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	defer wcancel()
	writer := acquireAsync(func() (*redlock.Lock, error) { return rl.Lock(wctx, k, 5*time.Second) })
	for i, c := range clients {
		eventually(t, 3*time.Second, func() bool { m, _ := markLeft(t, c, k); return m }, "node %d: no mark", i+1)
	}
	ictx, icancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := rl.RLock(ictx, k, 5*time.Second)
	icancel()
	require.ErrorIs(t, err, redlock.ErrNotObtained, "the nested read")
	t.Logf("nested RLock under a waiting writer: %v", err)
	require.NoError(t, outer.Unlock(ctx))
	res := <-writer
	require.NoError(t, res.err)
	require.NoError(t, res.l.Unlock(ctx))
}

// TestWriterNotStarvedWithSilentNode: TestWriterNotStarvedByReaders with one of 3
// nodes paused (silent: every round that the other two do not decide
// waits for the per-node timeout, 250ms, longer than the 150ms mark of
// the default retry delay). The waiting writer must still get in, and
// no reader while it holds the key.
func TestWriterNotStarvedWithSilentNode(t *testing.T) {
	nodes, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	k := key(t)
	// Contact every node before the pause: a first contact waits longer.
	require.NoError(t, rlock(t, rl, k, time.Second).Unlock(ctx))
	require.NoError(t, nodes[2].Pause())
	t.Cleanup(func() { _ = nodes[2].Resume() })
	took := overlappingReaders(t, rl, k, 8, 40*time.Millisecond)
	w, _ := lockPastReaders(t, rl, k, took, "with one node silent")
	during := took.Load()
	awaitAttempts(t, clients[0], 3) // the readers keep trying meanwhile
	require.Equal(t, during, took.Load(), "a reader took the key while the writer held it")
	require.NoError(t, w.Unlock(ctx))
	eventually(t, 10*time.Second, func() bool { return took.Load() > during+8 }, "want the readers back")
}

// TestWriterMarkRetryDelayOverflow: a writer that relies on the hand-off
// alone (a retry delay far beyond any wait: "never retry on a timer")
// waits for readers that overlap without a gap, each holding 150ms. The
// mark must last while it waits (three retry delays: centuries), so that
// the readers drain and the last one's release wakes it. With
// math.MaxInt64/3 it does; with math.MaxInt64/2, 3*d overflows
// time.Duration (writerMark), the mark falls back to its 100ms least,
// shorter than the readers' holds, new readers keep the key, no release
// ever empties it, and the writer never gets in.
func TestWriterMarkRetryDelayOverflow(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{math.MaxInt64 / 3, math.MaxInt64 / 2, 100 * 365 * 24 * time.Hour} {
		t.Run(fmt.Sprint(int64(d)), func(t *testing.T) {
			clients, rl := threeNodes(t)
			ctx := context.Background()
			k := key(t)
			took := overlappingReaders(t, rl, k, 8, 150*time.Millisecond)
			before := took.Load()
			wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			start := time.Now()
			w, err := rl.Lock(wctx, k, 5*time.Second, redlock.WithRetryDelay(d))
			for i, c := range clients {
				t.Logf("node %d: %q", i+1, get(t, c, k))
			}
			require.NoError(t, err, "retry delay %d: want the writer in (%d read locks meanwhile)", int64(d), took.Load()-before)
			t.Logf("writer in after %v (%d read locks meanwhile)", time.Since(start).Round(time.Millisecond), took.Load()-before)
			require.NoError(t, w.Unlock(ctx))
		})
	}
}

// TestWriterMarkAfterGiveUp pins three documented consequences of
// the mark:
//  1. a writer whose ctx has a 200ms deadline, with a 1h retry delay,
//     marks only until that deadline (at least 100ms), not for three
//     hours: once it gave up, new readers get in at once, though the
//     readers that hold the key keep it (here one auto-extended reader);
//  2. a writer cancelled after 200ms with no deadline, with a 1h retry
//     delay, leaves a mark of three hours: new readers are refused for
//     hours, though nobody waits to write (documented: "up to the whole
//     mark");
//  3. a reader that waits (RLock, 2s retry delay) behind that mark is
//     not woken when the last reader leaves (message "r" is ignored by
//     readers) and sits out its retry delay while the key is free.
func TestWriterMarkAfterGiveUp(t *testing.T) {
	t.Parallel()
	var refused refusals
	clients, rl := threeNodes(t, redlock.WithObserver(refused.observe))
	ctx := context.Background()
	k := key(t)
	r1, err := rl.TryRLock(ctx, k, time.Second)
	require.NoError(t, err)
	require.NoError(t, r1.AutoExtend(ctx))

	dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = rl.Lock(dctx, k, 5*time.Second, redlock.WithRetryDelay(time.Hour))
	dcancel()
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	for i, c := range clients {
		_, left := markLeft(t, c, k)
		require.LessOrEqual(t, left, 200*time.Millisecond, "node %d: want the mark no longer than the writer's ctx deadline", i+1)
	}
	eventuallyTaken(t, 5*time.Second, func() (*redlock.Lock, error) { return rl.TryRLock(ctx, k, time.Second) },
		"want new readers in once the deadline-bound mark ended")

	wctx, cancel := context.WithCancel(ctx)
	stopWriter := time.AfterFunc(200*time.Millisecond, cancel)
	defer stopWriter.Stop()
	_, err = rl.Lock(wctx, k, 5*time.Second, redlock.WithRetryDelay(time.Hour))
	cancel()
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	// A quorum is marked: the writer's refused attempt decided there,
	// and a queued writer checks in rather than attempts again.
	marked := 0
	for i, c := range clients {
		m, left := markLeft(t, c, k)
		if !m {
			continue
		}
		marked++
		t.Logf("node %d: the mark of a writer that gave up has %v left", i+1, left.Round(time.Second))
		require.Greater(t, left, 2*time.Hour)
	}
	require.GreaterOrEqual(t, marked, rl.Quorum(), "want the mark on a quorum")
	time.Sleep(1200 * time.Millisecond) // past r1's TTL: it lives on auto-extension
	_, err = rl.TryRLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrContended, "new readers refused, nobody waiting to write")

	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	before := refused.n.Load()
	reader := acquireAsync(func() (*redlock.Lock, error) {
		return rl.RLock(rctx, k, time.Second, redlock.WithRetryDelay(2*time.Second))
	})
	refused.awaitWaiting(t, clients, before+1) // refused, it waits
	// Each node's confirmation of the waiter's subscription wakes it for
	// an attempt at once (a release may have gone unseen), and the test
	// sees the subscriptions on the nodes before the Client has read
	// every confirmation. Wait for an attempt its retry timer made (1s
	// or more after the refusal before it): the confirmations are read.
	eventually(t, 15*time.Second, func() bool { _, gap := refused.lastAt(); return gap >= 900*time.Millisecond },
		"want the waiting reader's attempts on its retry timer")
	freed := time.Now()
	require.NoError(t, r1.Unlock(ctx))
	requireRWGone(t, clients, k, time.Second) // the key is free on every node
	res := <-reader
	require.NoError(t, res.err)
	t.Logf("the waiting reader got the free key %v after it was freed", res.at.Sub(freed).Round(time.Millisecond))
	// Its next attempt waited out the retry delay (at least half of 2s,
	// jittered) from its last refusal: the release did not wake it. (A
	// stalled test that frees the key over a second after that refusal
	// cannot tell the two apart, and passes.)
	last, _ := refused.lastAt()
	require.GreaterOrEqual(t, res.at.Sub(last), time.Second,
		"want the reader's attempt a retry delay after its refusal, not at the release")
	require.NoError(t, res.l.Unlock(ctx))
}

// TestReadWriteReleasesSpareEachOther: a writer's failed attempt and a writer's Unlock do
// not disturb readers; a reader's Unlock after a writer took the key does
// not delete the writer's key.
func TestReadWriteReleasesSpareEachOther(t *testing.T) {
	t.Parallel()
	clients, rl := threeNodes(t)
	ctx := context.Background()
	k := key(t)
	r1 := rlock(t, rl, k, 10*time.Second) // held throughout: a stall must not end it
	r2 := rlock(t, rl, k, 300*time.Millisecond)
	_, err := rl.TryLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained, "writer while readers hold")
	// r2 expires; r1 still holds; the writer still must not win.
	time.Sleep(400 * time.Millisecond) // past r2's 300ms TTL: its expiry is the subject
	_, err = rl.TryLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained, "writer while r1 holds after r2 expired")
	// r2's Extend after expiry must fail.
	require.Error(t, r2.Extend(ctx, time.Second))
	require.NoError(t, r1.Extend(ctx, 2*time.Second))
	require.NoError(t, r1.Unlock(ctx))
	w, err := rl.TryLock(ctx, k, 5*time.Second)
	require.NoError(t, err, "writer after the readers left")
	// Late reader Unlocks must not touch the writer's key, on any node
	// that granted it (on a loaded machine one node may have timed out).
	var held []int
	for i, c := range clients {
		if get(t, c, k) == w.Token() {
			held = append(held, i)
		}
	}
	require.GreaterOrEqual(t, len(held), rl.Quorum(), "the writer's key is on a quorum")
	_ = r2.Unlock(ctx)
	_ = r1.Unlock(ctx)
	for _, i := range held {
		require.Equal(t, w.Token(), get(t, clients[i], k), "node %d: writer's key after readers' late Unlock", i+1)
	}
	_, err = rl.TryRLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained, "reader while writer holds")
	require.NoError(t, w.Extend(ctx, 5*time.Second))
	require.NoError(t, w.Unlock(ctx))
	// A writer's Unlock of a lost lock while readers now hold must not
	// delete the marker.
	w2, err := rl.TryLock(ctx, k, 200*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(250 * time.Millisecond) // past w2's 200ms TTL: it is lost
	r3, err := rl.TryRLock(ctx, k, 5*time.Second)
	require.NoError(t, err)
	_ = w2.Unlock(ctx)
	_, err = rl.TryLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained, "writer after a stale writer's Unlock while a reader holds")
	require.NoError(t, r3.Unlock(ctx))
}
