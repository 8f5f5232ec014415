package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/stretchr/testify/require"
)

// TestSemaphore: at most limit permits at once; a returned permit is
// taken again; a different limit on a key with live permits is
// ErrInvalid, and not retried by Acquire.
func TestSemaphore(t *testing.T) {
	clients, rl := threeNodes(t)
	ctx := context.Background()
	k := key(t)
	var held []*redlock.Lock
	for i := range 3 {
		l, err := rl.TryAcquire(ctx, k, 3, 10*time.Second)
		require.NoError(t, err, "permit %d of 3", i+1)
		require.Equal(t, k, l.Key())
		held = append(held, l)
	}
	_, err := rl.TryAcquire(ctx, k, 3, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrContended, "want a 4th permit of 3 refused")

	_, err = rl.TryAcquire(ctx, k, 4, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid, "want another limit refused while permits are live")
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err = rl.Acquire(actx, k, 4, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.Less(t, time.Since(start), 2*time.Second, "want Acquire not to retry a limit mismatch")

	require.NoError(t, held[0].Extend(ctx, 20*time.Second))
	require.NoError(t, held[1].Unlock(ctx))
	l, err := rl.TryAcquire(ctx, k, 3, 10*time.Second)
	require.NoError(t, err, "want a returned permit taken again")
	held[1] = l
	for _, l := range held {
		require.NoError(t, l.Unlock(ctx))
	}
	for i, c := range clients {
		eventually(t, 2*time.Second, func() bool { return c.Exists(ctx, k).Val() == 0 },
			"node %d keeps the semaphore after every permit was returned", i+1)
	}
	// With no live permits, another limit is fine.
	l, err = rl.TryAcquire(ctx, k, 1, time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))

	for _, bad := range []int{0, -1} {
		_, err = rl.TryAcquire(ctx, k, bad, time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
	}
	_, err = rl.TryAcquire(ctx, "", 1, time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
}

// TestSemaphorePartition is the counter-example to a majority quorum,
// on real nodes: 5 nodes, limit 2, and three clients that each see only
// some nodes (the others are dead addresses): A sees {0,1,2}, B {2,3,4},
// C {0,1,3,4}. Under a majority quorum all three would win, no node above
// 2 permits. With SemaphoreQuorum(5,2) = 4, at most 2 do.
func TestSemaphorePartition(t *testing.T) {
	_, live := cluster(t, 5)
	dead := deadClients(t, 5)
	view := func(seen ...int) *redlock.Client {
		cs := append([]redis.UniversalClient(nil), dead...)
		for _, i := range seen {
			cs[i] = live[i]
		}
		return newClient(t, cs, redlock.WithNodeTimeout(100*time.Millisecond))
	}
	ctx := context.Background()
	k := key(t)
	won := 0
	for name, c := range map[string]*redlock.Client{"A": view(0, 1, 2), "B": view(2, 3, 4), "C": view(0, 1, 3, 4)} {
		l, err := c.TryAcquire(ctx, k, 2, 10*time.Second)
		if err == nil {
			won++
			t.Logf("%s holds a permit", name)
			defer func() { _ = l.Unlock(ctx) }()
		}
	}
	if won > 2 {
		t.Fatalf("want at most 2 holders of a semaphore of limit 2, got %d", won)
	}
	// Per node, never more than the limit.
	for i, c := range live {
		n, err := c.ZCount(ctx, k, "-inf", "(+inf").Result()
		require.NoError(t, err)
		require.LessOrEqual(t, n, int64(2), "node %d admits %d permits", i, n)
	}
}

// TestSemaphoreLimitChangeAndExpiredPermit: limit changes, permit Extend after expiry, and no
// more than limit permits under concurrency.
func TestSemaphoreLimitChangeAndExpiredPermit(t *testing.T) {
	_, rl := threeNodes(t)
	ctx := context.Background()
	k := key(t)
	p1, err := rl.TryAcquire(ctx, k, 2, 300*time.Millisecond)
	require.NoError(t, err)
	_, err = rl.TryAcquire(ctx, k, 3, time.Second)
	require.Error(t, err, "another limit while permits are live")
	t.Logf("limit mismatch: %v", err)
	time.Sleep(350 * time.Millisecond) // past the permits' 300ms TTL: their expiry is the subject
	require.Error(t, p1.Extend(ctx, time.Second), "permit extend after expiry")
	p3, err := rl.TryAcquire(ctx, k, 3, time.Second)
	require.NoError(t, err, "another limit once the permits expired")
	require.NoError(t, p3.Unlock(ctx))
	_ = p1.Unlock(ctx)

	// Concurrency: limit 2, 8 goroutines, check overlap count.
	var mu sync.Mutex
	held, maxHeld := 0, 0
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 15; i++ {
				p, err := rl.TryAcquire(ctx, k, 2, time.Second)
				if err != nil {
					continue
				}
				mu.Lock()
				held++
				if held > maxHeld {
					maxHeld = held
				}
				mu.Unlock()
				time.Sleep(time.Millisecond) // the permit holder's work
				mu.Lock()
				held--
				mu.Unlock()
				_ = p.Unlock(ctx)
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, maxHeld, 2)
}
