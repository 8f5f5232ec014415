package redlock_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
)

// subscribed reports whether every client's node has at least n pattern
// subscriptions (the hub's PSUBSCRIBE).
func subscribed(t testing.TB, clients []redis.UniversalClient, n int64) bool {
	t.Helper()
	for _, c := range clients {
		v, err := c.PubSubNumPat(context.Background()).Result()
		if err != nil || v < n {
			return false
		}
	}
	return true
}

// unsubscribed reports whether no node has a pattern subscription left.
func unsubscribed(t testing.TB, clients []redis.UniversalClient) bool {
	t.Helper()
	for _, c := range clients {
		if v, err := c.PubSubNumPat(context.Background()).Result(); err != nil || v != 0 {
			return false
		}
	}
	return true
}

// TestHandoffWakesWaiter: a waiter whose retry delay is 20s gets the lock
// within a fraction of it after Unlock, with one of the five nodes down,
// and its subscriptions are closed once it stops waiting.
func TestHandoffWakesWaiter(t *testing.T) {
	nodes, clients := cluster(t, 5)
	require.NoError(t, nodes[4].Kill())
	live := clients[:4]
	ctx := context.Background()
	k := key(t)
	holder := newClient(t, clients)
	l, err := holder.TryLock(ctx, k, time.Minute)
	require.NoError(t, err)

	waiter := newClient(t, clients, redlock.WithRetryDelay(20*time.Second))
	type result struct {
		l   *redlock.Lock
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		wl, err := waiter.Lock(ctx, k, time.Minute)
		got <- result{wl, err, time.Now()}
	}()
	eventually(t, 5*time.Second, func() bool { return subscribed(t, live, 1) }, "the waiter did not subscribe")
	select {
	case r := <-got:
		t.Fatalf("the waiter returned while the lock was held: %v", r.err)
	default:
	}

	require.NoError(t, l.Unlock(ctx))
	released := time.Now()
	var r result
	select {
	case r = <-got:
	case <-time.After(5 * time.Second): // the fallback alone would take 10s to 30s
		t.Fatal("the waiter was not woken by the release")
	}
	require.NoError(t, r.err)
	require.Less(t, r.at.Sub(released), 2*time.Second)
	require.NoError(t, r.l.Unlock(ctx))
	eventually(t, 5*time.Second, func() bool { return unsubscribed(t, live) }, "subscriptions left after the wait")
}

// TestHandoffInProcess: a waiting Lock is woken by an Unlock of its own
// Client as soon as the release is handed to the nodes, without the
// nodes' announcements: here its user may not subscribe (no PSUBSCRIBE
// in its ACL), and its retry delay is a minute, so only that wake gets it
// the lock within its 20s. Its attempt queues behind the release on each
// node, so it also wins (it is not refused by the key it waits for). The
// Unlock comes at the worst instant, once the waiter's attempt was
// refused but before it joined the Client's waiters (its observer holds
// it there), or after it joined.
func TestHandoffInProcess(t *testing.T) {
	t.Parallel()
	nodes, admins := cluster(t, 3)
	aclSetUser(t, admins, "nosub", append([]string{"on", ">pw"}, slices.DeleteFunc(slices.Clone(documentedACL), func(r string) bool {
		return r == "+psubscribe" || r == "+punsubscribe"
	})...)...)
	clients := userClients(t, nodes, "nosub", "pw")
	for _, before := range []bool{true, false} {
		g := &refusalGate{refused: make(chan struct{}), resume: make(chan struct{})}
		g.hold.Store(before)
		rl := newClient(t, clients, redlock.WithRetryDelay(time.Minute), redlock.WithObserver(observeWith(g)))
		ctx := context.Background()
		k := "lock:" + key(t)
		l, err := rl.TryLock(ctx, k, time.Minute)
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			wl, err := rl.Lock(wctx, k, time.Minute)
			if err == nil {
				err = wl.Unlock(ctx)
			}
			got <- err
		}()
		<-g.refused
		if !before {
			// Let it join (it cannot tell us when), then release.
			eventually(t, 5*time.Second, func() bool { return g.hold.Load() }, "want the observer to return")
		}
		require.NoError(t, l.Unlock(ctx))
		if before {
			close(g.resume)
		}
		require.NoError(t, <-got, "Unlock before the waiter joined: %v: want the waiter woken by its own Client's Unlock", before)
	}
}

// refusalGate is an Observer that reports the first refused acquire
// round on refused and, while hold is set, holds that round's goroutine
// (the waiting Lock's) until resume is closed.
type refusalGate struct {
	stats
	hold            atomic.Bool
	once            sync.Once
	refused, resume chan struct{}
}

func (g *refusalGate) ObserveRound(e redlock.Event) {
	g.stats.ObserveRound(e)
	if e.Op != "lock" || e.Reason != "contended" {
		return
	}
	g.once.Do(func() {
		close(g.refused)
		if g.hold.Load() {
			<-g.resume
		} else {
			g.hold.Store(true) // returned
		}
	})
}

// TestHandoffFallback: a lock that expires is not announced, and a waiter
// still gets it by polling; with WithHandoff(false) nothing subscribes.
func TestHandoffFallback(t *testing.T) {
	_, clients := cluster(t, 3)
	ctx := context.Background()
	for _, on := range []bool{true, false} {
		k := key(t)
		_, err := newClient(t, clients).TryLock(ctx, k, 300*time.Millisecond) // never unlocked
		require.NoError(t, err)
		waiter := newClient(t, clients, redlock.WithRetryDelay(20*time.Millisecond), redlock.WithHandoff(on))

		// Watch the subscriptions on node 0 while the waiter waits.
		stop, watched := make(chan struct{}), make(chan int64, 1)
		go func() {
			var most int64
			defer func() { watched <- most }()
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				if v, err := clients[0].PubSubNumPat(ctx).Result(); err == nil {
					most = max(most, v)
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		l, err := waiter.Lock(wctx, k, time.Second)
		cancel()
		close(stop)
		most := <-watched
		require.NoError(t, err, "handoff %v: polling is the fallback", on)
		require.NoError(t, l.Unlock(ctx))
		if on {
			require.Positive(t, most, "the waiter did not subscribe")
		} else {
			require.Zero(t, most, "WithHandoff(false) subscribed")
		}
		eventually(t, 5*time.Second, func() bool { return unsubscribed(t, clients) }, "subscriptions left after the wait")
	}
}

// BenchmarkHandoff measures the hand-off latency on 5 local nodes: from
// the holder's Unlock returning to the waiter's Lock returning. The waiter
// is blocked in Lock, subscribed, before each Unlock. Reported as p50 and
// p90 in µs; compare "pubsub" with "poll-10ms" (WithHandoff(false) and a
// 10ms retry delay, redsync's best case).
func BenchmarkHandoff(b *testing.B) {
	clients := benchClients(b, 5)
	ctx := context.Background()
	bench := func(b *testing.B, opts ...redlock.Option) {
		holder := newClient(b, clients)
		waiter := newClient(b, clients, opts...)
		k := key(b)
		var lat []time.Duration
		for b.Loop() {
			b.StopTimer()
			l, err := holder.TryLock(ctx, k, 10*time.Second)
			require.NoError(b, err)
			done := make(chan time.Time, 1)
			var wl *redlock.Lock
			waiting, refused := refusedOnce()
			go func() {
				var err error
				wl, err = waiter.Lock(ctx, k, 10*time.Second, waiting)
				if err != nil {
					b.Error(err)
				}
				done <- time.Now()
			}()
			if len(opts) == 0 {
				eventually(b, 5*time.Second, func() bool { return subscribed(b, clients, 1) }, "not subscribed")
			}
			select { // the waiter was refused once: it is in its wait
			case <-refused:
			case <-time.After(10 * time.Second):
				b.Fatal("the waiter was not refused within 10s")
			}
			b.StartTimer()
			require.NoError(b, l.Unlock(ctx))
			released := time.Now()
			got := <-done
			b.StopTimer()
			lat = append(lat, got.Sub(released))
			require.NoError(b, wl.Unlock(ctx))
			if len(opts) == 0 {
				eventually(b, 5*time.Second, func() bool { return unsubscribed(b, clients) }, "still subscribed")
			}
			b.StartTimer()
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds()), "p90-µs")
	}
	b.Run("pubsub", func(b *testing.B) { bench(b) })
	b.Run("poll-10ms", func(b *testing.B) {
		bench(b, redlock.WithHandoff(false), redlock.WithRetryDelay(10*time.Millisecond))
	})
}
