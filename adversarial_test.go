package redlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
)

// Tests from an adversarial review of the concurrency fixes and the lock
// family (TestAttack*): each tries to break one promise.

// within fails the test when f does not return within d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	var p any
	go func() {
		defer close(done)
		defer func() { p = recover() }()
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: hung for more than %v", what, d)
	}
	if p != nil {
		t.Errorf("%s: panicked: %v", what, p)
	}
}

// TestAttackZeroValues calls every exported method on nil and zero
// values: no panic, no hang, errors where errors are due.
func TestAttackZeroValues(t *testing.T) {
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	var nilC *redlock.Client
	zc := &redlock.Client{}
	var nilM *redlock.MultiLock
	zm := &redlock.MultiLock{}
	var nilL *redlock.Lock
	zl := &redlock.Lock{}
	for name, c := range map[string]*redlock.Client{"nil Client": nilC, "zero Client": zc} {
		within(t, 2*time.Second, name, func() {
			_ = c.Nodes()
			_ = c.Quorum()
			_, err := c.TryLock(ctx, "k", time.Second)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" TryLock")
			_, err = c.Lock(ctx, "k", time.Second)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" Lock")
			_, err = c.TryLockKeys(ctx, []string{"a", "b"}, time.Second)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" TryLockKeys")
			_, err = c.LockKeys(ctx, []string{"a"}, time.Second)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" LockKeys")
			_, err = c.TryLockPath(ctx, "/a/b", time.Second)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" TryLockPath")
			_, err = c.LockPath(ctx, "/a/b", time.Second)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" LockPath")
			_, err = c.TryRLock(ctx, "k", time.Second)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" TryRLock")
			_, err = c.RLock(ctx, "k", time.Second)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" RLock")
			_, err = c.TryAcquire(ctx, "k", 2, time.Second)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" TryAcquire")
			_, err = c.Acquire(ctx, "k", 2, time.Second)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" Acquire")
			err = c.Do(ctx, "k", time.Second, fn)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" Do")
			require.NoError(t, c.Close())
			require.NoError(t, c.Close())
		})
	}
	for name, m := range map[string]*redlock.MultiLock{"nil MultiLock": nilM, "zero MultiLock": zm} {
		within(t, 2*time.Second, name, func() {
			_ = m.Nodes()
			_, err := m.TryLock(ctx, "k", time.Second)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" TryLock")
			_, err = m.Lock(ctx, "k", time.Second)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" Lock")
			_, err = m.TryLockKeys(ctx, []string{"a"}, time.Second)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" TryLockKeys")
			_, err = m.LockKeys(ctx, []string{"a"}, time.Second)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" LockKeys")
			err = m.Do(ctx, "k", time.Second, fn)
			require.ErrorIs(t, err, redlock.ErrInvalid, name+" Do")
			require.NoError(t, m.Close())
		})
	}
	for name, l := range map[string]*redlock.Lock{"nil Lock": nilL, "zero Lock": zl} {
		within(t, 2*time.Second, name, func() {
			_ = l.Key()
			_ = l.Keys()
			_ = l.Token()
			_ = l.TTL()
			_ = l.Validity()
			_ = l.Deadline()
			_ = l.Extensions()
			_ = l.Fence()
			select {
			case <-l.Done():
			default:
				t.Errorf("%s: Done not closed", name)
			}
			_ = l.Err()
			require.ErrorIs(t, l.Extend(ctx, time.Second), redlock.ErrInvalid, name+" Extend")
			require.ErrorIs(t, l.Unlock(ctx), redlock.ErrInvalid, name+" Unlock")
			require.ErrorIs(t, l.AutoExtend(ctx), redlock.ErrInvalid, name+" AutoExtend")
		})
	}
	var zs redlock.Stats
	within(t, time.Second, "zero Stats", func() {
		_ = zs.Snapshot()
		zs.ObserveRound(redlock.RoundEvent{})
		zs.ObserveNode(redlock.NodeEvent{})
		zs.ObserveLock(redlock.LockEvent{})
	})
	var qe *redlock.QuorumError
	within(t, time.Second, "nil QuorumError", func() {
		_ = qe.Failed()
	})
	within(t, time.Second, "zero QuorumError", func() {
		z := &redlock.QuorumError{}
		_ = z.Error()
		_ = z.Failed()
		_ = errors.Is(z, redlock.ErrNotHeld)
	})
}

// TestAttackNilContexts passes nil contexts to every ctx-taking method of
// a real client and of a held lock.
func TestAttackNilContexts(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ml, err := redlock.NewMultiLock(clients, redlock.WithNodeTimeout(testNodeTimeout))
	require.NoError(t, err)
	defer ml.Close()
	k := key(t)
	var nilCtx context.Context
	fn := func(context.Context) error { return nil }
	within(t, 5*time.Second, "nil ctx", func() {
		_, err := rl.TryLock(nilCtx, k, time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = rl.Lock(nilCtx, k, time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = rl.TryLockPath(nilCtx, "/a", time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = rl.LockPath(nilCtx, "/a", time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = rl.TryRLock(nilCtx, k, time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = rl.RLock(nilCtx, k, time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = rl.TryAcquire(nilCtx, k+"s", 2, time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = rl.Acquire(nilCtx, k+"s", 2, time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		require.ErrorIs(t, rl.Do(nilCtx, k, time.Second, fn), redlock.ErrInvalid)
		require.ErrorIs(t, ml.Do(nilCtx, k, time.Second, fn), redlock.ErrInvalid)
		_, err = ml.TryLockKeys(nilCtx, []string{k}, time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		l, err := rl.TryLock(context.Background(), k, 2*time.Second)
		require.NoError(t, err)
		require.ErrorIs(t, l.Extend(nilCtx, time.Second), redlock.ErrInvalid)
		require.ErrorIs(t, l.AutoExtend(nilCtx), redlock.ErrInvalid)
		require.ErrorIs(t, l.Unlock(nilCtx), redlock.ErrInvalid)
		require.NoError(t, l.Unlock(context.Background()))
	})
}

// TestAttackTokenReuseRetryDeletesNewLock: a lock with WithToken(T) is
// unlocked while node 3 is paused, so its release there fails. The
// holder then takes the lock back with the same token, and node 3
// resumes. MONITOR must not show the new lock's SET on node 3 followed by
// a release of the same token deleting it. Found by an adversarial
// review: a background retry of the old release did exactly that, so
// releases of WithToken locks are no longer retried.
func TestAttackTokenReuseRetryDeletesNewLock(t *testing.T) {
	nodes, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	const token = "attack-token-0123456789abcdef"
	for round := 0; round < 4; round++ {
		k := key(t)
		mon := monitor(t, nodes[2].Addr(), nodes[2].Password())
		l1, err := rl.TryLock(ctx, k, 60*time.Second, redlock.WithToken(token))
		require.NoError(t, err)
		require.NoError(t, nodes[2].Pause())
		require.NoError(t, l1.Unlock(ctx)) // nodes 1 and 2; node 3's release in flight
		// The release fails at the go-redis timeouts; its retries wait up
		// to 250ms each.
		time.Sleep(600 * time.Millisecond)
		l2, err := rl.TryLock(ctx, k, 20*time.Second, redlock.WithToken(token))
		require.NoError(t, err) // nodes 1 and 2
		time.Sleep(30 * time.Millisecond)
		require.NoError(t, nodes[2].Resume())
		time.Sleep(1500 * time.Millisecond) // retries and rechecks run
		lines := mon()
		// The new lock's SET (PX 20000) on node 3, then a DEL of k.
		set, del := -1, -1
		for i, ln := range lines {
			switch {
			case strings.Contains(ln, `"SET" "`+k+`"`) && strings.Contains(ln, `"20000"`):
				set = i
			case set >= 0 && strings.Contains(ln, `"DEL" "`+k+`"`):
				del = i
			}
		}
		valid := l2.Validity()
		_ = l2.Unlock(ctx)
		if set >= 0 && del > set {
			t.Fatalf("round %d: after TryLock(WithToken) returned, a retry of the earlier release of the same token deleted the new lock's key on node 3 (new lock Validity %v, never unlocked):\n%s",
				round, valid, strings.Join(lines[set:del+1], "\n"))
		}
		t.Logf("round %d: no witness (set %d, del %d)", round, set, del)
	}
}

// monitor runs MONITOR on addr and returns a function that stops it and
// returns the lines seen.
func monitor(t *testing.T, addr, password string) func() []string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	if password != "" {
		_, err = conn.Write([]byte("AUTH " + password + "\r\n"))
		require.NoError(t, err)
	}
	_, err = conn.Write([]byte("MONITOR\r\n"))
	require.NoError(t, err)
	var mu sync.Mutex
	var lines []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReader(conn)
		for {
			ln, err := r.ReadString('\n')
			if err != nil {
				return
			}
			mu.Lock()
			lines = append(lines, strings.TrimSpace(ln))
			mu.Unlock()
		}
	}()
	return func() []string {
		_ = conn.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return lines
	}
}

// TestAttackCloseWithPausedNode: Close with releases in flight and queued
// for a paused node returns within its bound, and a second Close and
// Unlock after Close neither hang nor panic.
func TestAttackCloseWithPausedNode(t *testing.T) {
	nodes, clients := cluster(t, 3)
	rl, err := redlock.New(clients, redlock.WithNodeTimeout(50*time.Millisecond))
	require.NoError(t, err)
	ctx := context.Background()
	var locks []*redlock.Lock
	for i := 0; i < 20; i++ {
		l, err := rl.TryLock(ctx, fmt.Sprintf("%s-%d", key(t), i), 10*time.Second)
		require.NoError(t, err)
		locks = append(locks, l)
	}
	require.NoError(t, nodes[2].Pause())
	defer func() { _ = nodes[2].Resume() }()
	var wg sync.WaitGroup
	for _, l := range locks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = l.Unlock(ctx)
		}()
	}
	wg.Wait()
	start := time.Now()
	var closers sync.WaitGroup
	for i := 0; i < 4; i++ {
		closers.Add(1)
		go func() {
			defer closers.Done()
			within(t, 2*time.Second, "Close", func() { _ = rl.Close() })
		}()
	}
	// Acquisitions racing Close.
	for i := 0; i < 10; i++ {
		closers.Add(1)
		go func() {
			defer closers.Done()
			l, err := rl.TryLock(ctx, key(t), time.Second)
			if err == nil {
				_ = l.Unlock(ctx)
			}
		}()
	}
	closers.Wait()
	t.Logf("Close took %v", time.Since(start))
	_, err = rl.TryLock(ctx, key(t), time.Second)
	require.ErrorIs(t, err, redlock.ErrClosed)
	require.NoError(t, nodes[2].Resume())
}

// TestAttackDoPanicAndGoexit: Do releases the lock when fn panics or
// calls runtime.Goexit, and the panic value reaches the caller.
func TestAttackDoPanicAndGoexit(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	k := key(t)
	ctx := context.Background()
	func() {
		defer func() {
			p := recover()
			require.Equal(t, "boom", p)
		}()
		_ = rl.Do(ctx, k, time.Second, func(context.Context) error { panic("boom") })
	}()
	l, err := rl.TryLock(ctx, k, time.Second)
	require.NoError(t, err, "after a panicking Do the key must be free")
	require.NoError(t, l.Unlock(ctx))

	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rl.Do(ctx, k, time.Second, func(context.Context) error { runtime.Goexit(); return nil })
	}()
	<-done
	l, err = rl.TryLock(ctx, k, time.Second)
	require.NoError(t, err, "after a Goexit in Do the key must be free")
	require.NoError(t, l.Unlock(ctx))

	// Cancel at random instants.
	for i := 0; i < 30; i++ {
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			time.Sleep(time.Duration(i) * 300 * time.Microsecond)
			cancel()
		}()
		_ = rl.Do(cctx, k, time.Second, func(c context.Context) error {
			<-c.Done()
			return c.Err()
		})
		cancel()
		l, err := rl.TryLock(ctx, k, time.Second)
		require.NoError(t, err, "iteration %d: key left held after a cancelled Do", i)
		require.NoError(t, l.Unlock(ctx))
	}
}

// TestAttackLostErrors: a lost lock's errors match ErrLockLost, ErrNotHeld
// and, through errors.As, a *QuorumError; a hold limit adds ErrHoldLimit.
func TestAttackLostErrors(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients, redlock.WithNodeTimeout(20*time.Millisecond))
	ctx := context.Background()
	k := key(t)
	l, err := rl.TryLock(ctx, k, 400*time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, l.AutoExtend(ctx))
	for _, c := range clients {
		require.NoError(t, c.Set(ctx, k, foreignToken, time.Minute).Err())
	}
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Done never closed after the key was taken")
	}
	e := l.Err()
	require.ErrorIs(t, e, redlock.ErrLockLost)
	require.ErrorIs(t, e, redlock.ErrNotHeld)
	var qe *redlock.QuorumError
	require.True(t, errors.As(e, &qe), "want a *QuorumError in %v", e)
	require.False(t, strings.Contains(e.Error(), "redlock: redlock:"), "message repeats its prefix: %q", e.Error())
	t.Logf("lost: %v", e)

	k2 := key(t)
	l2, err := rl.TryLock(ctx, k2, 200*time.Millisecond, redlock.WithMaxExtensions(1))
	require.NoError(t, err)
	require.NoError(t, l2.AutoExtend(ctx))
	select {
	case <-l2.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("Done never closed after the hold limit")
	}
	e2 := l2.Err()
	require.ErrorIs(t, e2, redlock.ErrLockLost)
	require.ErrorIs(t, e2, redlock.ErrHoldLimit)
	require.ErrorIs(t, e2, redlock.ErrNotHeld)
	t.Logf("limit: %v", e2)
	_ = l2.Unlock(ctx)
	_ = l.Unlock(ctx)
}

// TestAttackFamilyPaths: paths with unicode, braces, depth 50, and a key
// prefix conflict with their ancestors and descendants and leave nothing
// behind.
func TestAttackFamilyPaths(t *testing.T) {
	_, clients := cluster(t, 3)
	ctx := context.Background()
	for _, prefix := range []string{"", "pfx:"} {
		var opts []redlock.Option
		if prefix != "" {
			opts = append(opts, redlock.WithKeyPrefix(prefix))
		}
		rl := newClient(t, clients, opts...)
		base := "/" + strings.ReplaceAll(key(t), "/", "_")
		comps := []string{"ünï⌘", "{tag}", "a}b{c", "日本", "x y"}
		for i := len(comps); i < 50; i++ {
			comps = append(comps, fmt.Sprintf("d%d", i))
		}
		deep := base + "/" + strings.Join(comps, "/")
		l, err := rl.TryLockPath(ctx, deep, 5*time.Second)
		require.NoError(t, err, "depth-50 path")
		// Every ancestor conflicts.
		for i := 0; i <= len(comps); i++ {
			anc := base
			if i > 0 {
				anc += "/" + strings.Join(comps[:i], "/")
			}
			if anc == deep {
				continue
			}
			_, err := rl.TryLockPath(ctx, anc, time.Second)
			require.ErrorIs(t, err, redlock.ErrNotObtained, "ancestor %q of a held path must conflict (prefix %q)", anc, prefix)
		}
		// A descendant conflicts; a sibling does not.
		_, err = rl.TryLockPath(ctx, deep+"/child", time.Second)
		require.ErrorIs(t, err, redlock.ErrNotObtained, "descendant")
		sib, err := rl.TryLockPath(ctx, base+"/"+strings.Join(comps[:49], "/")+"/sibling", time.Second)
		require.NoError(t, err, "sibling")
		require.NoError(t, l.Extend(ctx, 5*time.Second))
		require.NoError(t, sib.Unlock(ctx))
		require.NoError(t, l.Unlock(ctx))
		// Now the root is free.
		root, err := rl.TryLockPath(ctx, base, time.Second)
		require.NoError(t, err, "root after release")
		require.NoError(t, root.Unlock(ctx))
		for i, c := range clients {
			eventually(t, time.Second, func() bool {
				n, err := c.DBSize(ctx).Result()
				require.NoError(t, err)
				if n == 0 {
					return true
				}
				ks, _ := c.Keys(ctx, "*").Result()
				t.Logf("node %d keys: %q", i+1, ks)
				return false
			}, "node %d keeps keys after every path lock was released", i+1)
		}
	}
}

// TestAttackReadWrite: a writer's failed attempt and a writer's Unlock do
// not disturb readers; a reader's Unlock after a writer took the key does
// not delete the writer's key.
func TestAttackReadWrite(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	k := key(t)
	r1, err := rl.TryRLock(ctx, k, 2*time.Second)
	require.NoError(t, err)
	r2, err := rl.TryRLock(ctx, k, 300*time.Millisecond)
	require.NoError(t, err)
	_, err = rl.TryLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained, "writer while readers hold")
	// r2 expires; r1 still holds; the writer still must not win.
	time.Sleep(400 * time.Millisecond)
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
	time.Sleep(250 * time.Millisecond)
	r3, err := rl.TryRLock(ctx, k, 5*time.Second)
	require.NoError(t, err)
	_ = w2.Unlock(ctx)
	_, err = rl.TryLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained, "writer after a stale writer's Unlock while a reader holds")
	require.NoError(t, r3.Unlock(ctx))
}

// TestAttackWrongType: family locks on keys of another type fail cleanly
// (no panic, an error, nothing deleted).
func TestAttackWrongType(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	k := key(t)
	for _, c := range clients {
		require.NoError(t, c.HSet(ctx, k, "f", "v").Err())
		require.NoError(t, c.HSet(ctx, redlock.ReadersKey(k+"r"), "f", "v").Err())
		require.NoError(t, c.Set(ctx, k+"s", "plain", time.Minute).Err())
	}
	within(t, 5*time.Second, "wrongtype", func() {
		_, err := rl.TryLock(ctx, k, time.Second)
		require.Error(t, err)
		_, err = rl.TryRLock(ctx, k, time.Second)
		require.Error(t, err)
		_, err = rl.TryAcquire(ctx, k, 3, time.Second)
		require.Error(t, err)
		_, err = rl.TryAcquire(ctx, k+"s", 3, time.Second)
		require.Error(t, err)
		_, err = rl.TryRLock(ctx, k+"r", time.Second)
		require.Error(t, err)
		t.Logf("rlock on a hash readers key: %v", err)
		// A semaphore key, then a plain lock and a read lock on it.
		p, err := rl.TryAcquire(ctx, k+"sem", 2, time.Second)
		require.NoError(t, err)
		_, err = rl.TryLock(ctx, k+"sem", time.Second)
		require.Error(t, err)
		_, err = rl.TryRLock(ctx, k+"sem", time.Second)
		require.Error(t, err)
		require.NoError(t, p.Unlock(ctx))
	})
	for i, c := range clients {
		typ, err := c.Type(ctx, k).Result()
		require.NoError(t, err)
		require.Equal(t, "hash", typ, "node %d", i+1)
		require.Equal(t, "plain", get(t, c, k+"s"), "node %d", i+1)
	}
}

// TestAttackSemaphore: limit changes, permit Extend after expiry, and no
// more than limit permits under concurrency.
func TestAttackSemaphore(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	k := key(t)
	p1, err := rl.TryAcquire(ctx, k, 2, 300*time.Millisecond)
	require.NoError(t, err)
	_, err = rl.TryAcquire(ctx, k, 3, time.Second)
	require.Error(t, err, "another limit while permits are live")
	t.Logf("limit mismatch: %v", err)
	time.Sleep(350 * time.Millisecond)
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
		wg.Add(1)
		go func() {
			defer wg.Done()
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
				time.Sleep(time.Millisecond)
				mu.Lock()
				held--
				mu.Unlock()
				_ = p.Unlock(ctx)
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, maxHeld, 2)
}

// TestAttackExtendUnlockRace: Extend, Unlock and AutoExtend at once on one
// lock: no panic, no hang, Validity <= 0 after Unlock, nothing left.
func TestAttackExtendUnlockRace(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	for i := 0; i < 40; i++ {
		k := key(t)
		l, err := rl.TryLock(ctx, k, time.Second)
		require.NoError(t, err)
		var wg sync.WaitGroup
		for j := 0; j < 3; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = l.Extend(ctx, time.Duration(j+1)*time.Second)
			}()
		}
		wg.Add(2)
		go func() { defer wg.Done(); _ = l.AutoExtend(ctx) }()
		go func() { defer wg.Done(); _ = l.Unlock(ctx) }()
		within(t, 3*time.Second, "race", wg.Wait)
		require.LessOrEqual(t, l.Validity(), time.Duration(0), "iteration %d: Validity after Unlock", i)
		_ = l.Unlock(ctx)
		for n, c := range clients {
			eventually(t, time.Second, func() bool { return get(t, c, k) == "" }, "iteration %d node %d: key left", i, n+1)
		}
	}
}
