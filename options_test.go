package redlock_test

import (
	"context"
	"errors"
	"math"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/stretchr/testify/require"
)

// TestNewRejects: New names what is wrong with its input.
func TestNewRejects(t *testing.T) {
	_, clients := cluster(t, 3)
	other := redis.NewClient(&redis.Options{Addr: clients[0].(*redis.Client).Options().Addr})
	t.Cleanup(func() { _ = other.Close() })
	for _, tc := range []struct {
		name  string
		nodes []redis.UniversalClient
		opts  []redlock.Option
		want  string
		dup   bool
	}{
		{"no nodes", nil, nil, "no nodes", false},
		{"nil node", []redis.UniversalClient{clients[0], nil}, nil, "node 2 is nil", false},
		{"typed nil", []redis.UniversalClient{(*redis.Client)(nil)}, nil, "node 1 is nil", false},
		{"same client", []redis.UniversalClient{clients[0], clients[1], clients[0]}, nil, "nodes 1 and 3 are the same client", true},
		{"same address", []redis.UniversalClient{clients[0], other}, nil, "nodes 1 and 2 both address", true},
		{"drift", clients, []redlock.Option{redlock.WithDriftFactor(0.5)}, "drift factor", false},
		{"negative drift", clients, []redlock.Option{redlock.WithDriftFactor(-1)}, "drift factor", false},
		{"node timeout", clients, []redlock.Option{redlock.WithNodeTimeout(0)}, "node timeout", false},
		{"retry delay", clients, []redlock.Option{redlock.WithRetryDelay(-time.Second)}, "retry delay", false},
		{"max tries", clients, []redlock.Option{redlock.WithMaxTries(-1)}, "max tries", false},
		{"nil option", clients, []redlock.Option{nil}, "nil Option", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redlock.New(tc.nodes, tc.opts...)
			require.Nil(t, c)
			require.ErrorIs(t, err, redlock.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
			if tc.dup {
				require.ErrorIs(t, err, redlock.ErrInvalid)
			}
		})
	}
}

// TestCallRejects: calls name what is wrong with their input, send
// nothing, and never panic.
func TestCallRejects(t *testing.T) {
	_, clients := cluster(t, 3)
	c := newClient(t, clients)
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	var nilCtx context.Context
	for _, tc := range []struct {
		name string
		call func() error
		want []error
		msg  string
	}{
		{"empty key", func() error { _, err := c.TryLock(ctx, "", time.Second); return err }, []error{redlock.ErrInvalid}, "empty key"},
		{"empty key Lock", func() error { _, err := c.Lock(ctx, "", time.Second); return err }, []error{redlock.ErrInvalid}, "empty key"},
		{"zero ttl", func() error { _, err := c.TryLock(ctx, "k", 0); return err }, []error{redlock.ErrInvalid}, "ttl must be positive, got 0s"},
		{"negative ttl", func() error { _, err := c.Lock(ctx, "k", -time.Second); return err }, []error{redlock.ErrInvalid}, "ttl must be positive, got -1s"},
		{"tiny ttl", func() error { _, err := c.TryLock(ctx, "k", 2*time.Millisecond); return err }, []error{redlock.ErrInvalid}, "leaves no validity"},
		{"nil ctx", func() error { _, err := c.TryLock(nilCtx, "k", time.Second); return err }, []error{redlock.ErrInvalid}, "nil context"},
		{"cancelled ctx", func() error { _, err := c.TryLock(cancelled, "k", time.Second); return err }, []error{redlock.ErrNotObtained, context.Canceled}, "canceled"},
		{"cancelled ctx Lock", func() error { _, err := c.Lock(cancelled, "k", time.Second); return err }, []error{redlock.ErrNotObtained, context.Canceled}, "canceled"},
		{"bad call option", func() error { _, err := c.TryLock(ctx, "k", time.Second, redlock.WithNodeTimeout(-1)); return err }, []error{redlock.ErrInvalid}, "node timeout"},
		{"short token", func() error { _, err := c.TryLock(ctx, "k", time.Second, redlock.WithToken("abc")); return err }, []error{redlock.ErrInvalid}, "token of 3 bytes"},
		{"nil lock Unlock", func() error { return (*redlock.Lock)(nil).Unlock(ctx) }, []error{redlock.ErrInvalid}, "nil *Lock"},
		{"nil lock Extend", func() error { return (*redlock.Lock)(nil).Extend(ctx, time.Second) }, []error{redlock.ErrInvalid}, "nil *Lock"},
		{"nil client", func() error { _, err := (*redlock.Client)(nil).TryLock(ctx, "k", time.Second); return err }, []error{redlock.ErrInvalid}, "nil *Client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			for _, w := range tc.want {
				require.ErrorIs(t, err, w)
			}
			require.ErrorContains(t, err, tc.msg)
		})
	}
	var nl *redlock.Lock
	require.Empty(t, nl.Key())
	require.Empty(t, nl.Token())
	require.Zero(t, nl.Validity())

	l, err := c.TryLock(ctx, key(t), time.Second)
	require.NoError(t, err)
	require.ErrorIs(t, l.Extend(nilCtx, time.Second), redlock.ErrInvalid)
	require.ErrorIs(t, l.Extend(ctx, 0), redlock.ErrInvalid)
	require.ErrorIs(t, l.Unlock(nilCtx), redlock.ErrInvalid)
	require.NoError(t, l.Unlock(ctx))
	for _, cl := range clients {
		require.Empty(t, get(t, cl, "k"), "a rejected call sent nothing")
	}
}

// TestZeroLock: a zero Lock and a nil *Client answer with errors or zero
// values, never a panic.
func TestZeroLock(t *testing.T) {
	ctx := context.Background()
	var l redlock.Lock
	require.ErrorIs(t, l.Unlock(ctx), redlock.ErrInvalid)
	require.ErrorIs(t, l.Extend(ctx, time.Second), redlock.ErrInvalid)
	require.ErrorContains(t, l.Extend(ctx, time.Second), "zero Lock")
	require.Empty(t, l.Key())
	require.Empty(t, l.Token())
	require.LessOrEqual(t, l.Validity(), time.Duration(0))
	require.Zero(t, l.Fence())
	require.Zero(t, l.Extensions())
	<-l.Done()
	require.ErrorIs(t, l.Err(), redlock.ErrNotHeld)
	require.Error(t, l.AutoExtend(ctx))

	var c *redlock.Client
	require.Zero(t, c.Quorum())
}

// TestZeroValues: a zero Client, MultiLock and Lock fail at once with
// ErrInvalid, never hang or panic: a zero Client has no nodes, and a
// Lock that retried over an empty node list would never return.
func TestZeroValues(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var c redlock.Client
	start := time.Now()
	_, err := c.Lock(ctx, "k", time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = c.TryLock(ctx, "k", time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = c.LockKeys(ctx, []string{"a", "b"}, time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = c.TryLockKeys(ctx, []string{"a", "b"}, time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorIs(t, c.Do(ctx, "k", time.Second, func(context.Context) error { return nil }), redlock.ErrInvalid)
	require.NoError(t, c.Close())

	var m redlock.MultiLock
	_, err = m.Lock(ctx, "k", time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = m.TryLock(ctx, "k", time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorIs(t, m.Do(ctx, "k", time.Second, func(context.Context) error { return nil }), redlock.ErrInvalid)
	require.NoError(t, m.Close())

	var l redlock.Lock
	require.ErrorIs(t, l.AutoExtend(ctx), redlock.ErrInvalid)
	require.ErrorIs(t, l.Extend(ctx, time.Second), redlock.ErrInvalid)
	require.ErrorIs(t, l.Unlock(ctx), redlock.ErrInvalid)
	require.LessOrEqual(t, l.Validity(), time.Duration(0))
	select {
	case <-l.Done():
	default:
		t.Fatal("want a zero Lock's Done closed")
	}
	require.Error(t, l.Err())
	require.Less(t, time.Since(start), time.Second, "want zero values refused at once")
}

// TestFamilyZeroAndBadInput: a zero or nil Client, bad TTLs, cancelled
// contexts and reserved tokens fail at once with the documented error.
func TestFamilyZeroAndBadInput(t *testing.T) {
	ctx := context.Background()
	var zero redlock.Client
	var nilc *redlock.Client
	for _, c := range []*redlock.Client{&zero, nilc} {
		_, err := c.TryLockPath(ctx, "a/b", time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = c.LockPath(ctx, "a/b", time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = c.TryRLock(ctx, "k", time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = c.RLock(ctx, "k", time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = c.TryAcquire(ctx, "k", 2, time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		_, err = c.Acquire(ctx, "k", 2, time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
	}
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	for _, ttl := range []time.Duration{0, -time.Second, time.Millisecond} {
		_, err := rl.TryRLock(ctx, key(t), ttl)
		require.ErrorIs(t, err, redlock.ErrInvalid, "ttl %v", ttl)
		_, err = rl.TryAcquire(ctx, key(t), 1, ttl)
		require.ErrorIs(t, err, redlock.ErrInvalid, "ttl %v", ttl)
		_, err = rl.TryLockPath(ctx, key(t), ttl)
		require.ErrorIs(t, err, redlock.ErrInvalid, "ttl %v", ttl)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err := rl.RLock(done, key(t), time.Second)
	require.ErrorIs(t, err, context.Canceled)
	_, err = rl.Acquire(done, key(t), 1, time.Second)
	require.ErrorIs(t, err, context.Canceled)
	_, err = rl.LockPath(done, key(t), time.Second)
	require.ErrorIs(t, err, context.Canceled)
	_, err = rl.TryRLock(ctx, key(t), time.Second, redlock.WithToken("redlock:readers-and-more"))
	require.ErrorIs(t, err, redlock.ErrInvalid, "want tokens in the library's namespace refused")
	_, err = rl.TryRLock(ctx, "", time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = rl.TryRLock(ctx, key(t), time.Second, redlock.WithFencing())
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = rl.TryAcquire(ctx, key(t), 2, time.Second, redlock.WithFencing())
	require.ErrorIs(t, err, redlock.ErrInvalid)
}

// TestEveryMethodOnZeroValuesReturns calls every exported method on nil and zero
// values: no panic, no hang, errors where errors are due.
func TestEveryMethodOnZeroValuesReturns(t *testing.T) {
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
			_ = lockKeys(l)
			_ = l.Token()
			_ = l.Validity()
			_ = deadlineOf(l)
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
	var zs stats
	within(t, time.Second, "zero Stats", func() {
		_ = zs.Snapshot()
		zs.ObserveRound(redlock.Event{})
		zs.ObserveNode(redlock.Event{})
		zs.ObserveLock(redlock.Event{})
	})
	var qe *redlock.QuorumError
	within(t, time.Second, "nil QuorumError", func() {
		_ = failedNodes(qe)
	})
	within(t, time.Second, "zero QuorumError", func() {
		z := &redlock.QuorumError{}
		_ = z.Error()
		_ = failedNodes(z)
		_ = errors.Is(z, redlock.ErrNotHeld)
	})
}

// TestNilContextsAreInvalid passes nil contexts to every ctx-taking method of
// a real client and of a held lock.
func TestNilContextsAreInvalid(t *testing.T) {
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

// Fuzz targets run their seed corpora (f.Add and testdata/fuzz) as
// ordinary tests; `make fuzz` fuzzes each for a while. None may panic;
// each checks the documented contract of what it feeds.

// deadNode returns a client for a loopback port nothing listens on: every
// request fails at once with "connection refused", without a server.
func deadNode(t testing.TB) redis.UniversalClient {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Bits of FuzzOptions' mask: which options a case passes.
const (
	optDrift = 1 << iota
	optNodeTimeout
	optRetryDelay
	optMaxTries
	optMaxExtensions
	optMaxHold
	optRestartGuard
	optToken
)

// FuzzOptions checks that option and TTL validation never panics and
// fails with ErrInvalid exactly when an input is out of its documented
// range. The node set is one dead port, so a valid call fails with
// ErrNotObtained instead.
func FuzzOptions(f *testing.F) {
	f.Add(uint16(0), 0.01, int64(0), int64(0), 0, 0, int64(0), int64(0), "", int64(10*time.Second))
	f.Add(uint16(0xff), 0.01, int64(time.Millisecond), int64(time.Millisecond), 3, 1, int64(time.Second), int64(time.Second), "0123456789abcdef", int64(time.Second))
	f.Add(uint16(optDrift), math.Copysign(0, -1), int64(0), int64(0), 0, 0, int64(0), int64(0), "", int64(time.Second))
	f.Add(uint16(optDrift), 0.5, int64(0), int64(0), 0, 0, int64(0), int64(0), "", int64(time.Second))
	f.Add(uint16(optDrift), 0.4999999999, int64(0), int64(0), 0, 0, int64(0), int64(0), "", int64(math.MaxInt64))
	f.Add(uint16(optDrift), math.NaN(), int64(0), int64(0), 0, 0, int64(0), int64(0), "", int64(time.Second))
	f.Add(uint16(optDrift), math.Inf(-1), int64(0), int64(0), 0, 0, int64(0), int64(0), "", int64(time.Second))
	f.Add(uint16(optNodeTimeout|optRetryDelay), 0.0, int64(0), int64(-1), 0, 0, int64(0), int64(0), "", int64(time.Second))
	f.Add(uint16(optMaxTries|optMaxExtensions|optMaxHold|optRestartGuard), 0.0, int64(0), int64(0), -1, -1, int64(-1), int64(-1), "", int64(time.Second))
	f.Add(uint16(optToken), 0.0, int64(0), int64(0), 0, 0, int64(0), int64(0), "short", int64(time.Second))
	f.Add(uint16(0), 0.0, int64(0), int64(0), 0, 0, int64(0), int64(0), "", int64(3*time.Millisecond))
	f.Add(uint16(0), 0.0, int64(0), int64(0), 0, 0, int64(0), int64(0), "", int64(-time.Second))
	f.Add(uint16(0), 0.0, int64(0), int64(0), 0, 0, int64(0), int64(0), "", int64(math.MinInt64))
	f.Add(uint16(optNodeTimeout), 0.0, int64(math.MaxInt64), int64(0), 0, 0, int64(0), int64(0), "", int64(math.MaxInt64))

	node := deadNode(f)
	f.Fuzz(func(t *testing.T, mask uint16, drift float64, nodeTimeout, retryDelay int64, maxTries, maxExt int, maxHold, guard int64, token string, ttlNs int64) {
		var opts []redlock.Option
		var callOpts []redlock.LockOption
		bad := false
		add := func(bit uint16, invalid bool, o redlock.SharedOption) {
			if mask&bit != 0 {
				opts = append(opts, o)
				callOpts = append(callOpts, o)
				bad = bad || invalid
			}
		}
		add(optDrift, !(drift >= 0 && drift < 0.5), redlock.WithDriftFactor(drift))
		add(optNodeTimeout, nodeTimeout <= 0, redlock.WithNodeTimeout(time.Duration(nodeTimeout)))
		add(optRetryDelay, retryDelay <= 0, redlock.WithRetryDelay(time.Duration(retryDelay)))
		add(optMaxTries, maxTries < 0, redlock.WithMaxTries(maxTries))
		add(optMaxExtensions, maxExt < 0, redlock.WithMaxExtensions(maxExt))
		add(optMaxHold, maxHold < 0, redlock.WithMaxHold(time.Duration(maxHold)))
		if mask&optRestartGuard != 0 {
			opts = append(opts, redlock.WithRestartGuard(time.Duration(guard)))
			bad = bad || guard < 0
		}
		rl, err := redlock.New([]redis.UniversalClient{node}, opts...)
		if bad != errors.Is(err, redlock.ErrInvalid) || (err != nil && !bad) {
			t.Fatalf("New(mask %#x): want invalid=%v, got %v", mask, bad, err)
		}
		if bad {
			return
		}

		// One call, with the options given again per call and a TTL.
		if mask&optToken != 0 {
			callOpts = append(callOpts, redlock.WithToken(token))
			bad = len(token) < minTokenLen
		}
		ttl := time.Duration(ttlNs)
		factor := defaultDriftFactor
		if mask&optDrift != 0 {
			factor = drift
		}
		// Valid iff ttl - ceil(ttl*f) - 2ms >= 1ms (the least validity a lock may have); the
		// bounds below leave the rounding at the edge to either answer.
		ttlBad, ttlGood := ttl < 3*time.Millisecond, float64(ttl)*(1-factor) >= float64(4*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		l, err := rl.TryLock(ctx, "fuzz-options", ttl, callOpts...)
		switch {
		case err == nil:
			t.Fatalf("TryLock on a dead node: want an error, got lock %q", l.Token())
		case bad || ttlBad:
			if !errors.Is(err, redlock.ErrInvalid) {
				t.Fatalf("TryLock(ttl %v, mask %#x): want ErrInvalid, got %v", ttl, mask, err)
			}
		case ttlGood:
			if errors.Is(err, redlock.ErrInvalid) || !errors.Is(err, redlock.ErrNotObtained) {
				t.Fatalf("TryLock(ttl %v, mask %#x): want ErrNotObtained, not ErrInvalid, got %v", ttl, mask, err)
			}
		default: // within a few ms of the bound: either, but classified
			if !errors.Is(err, redlock.ErrInvalid) && !errors.Is(err, redlock.ErrNotObtained) {
				t.Fatalf("TryLock(ttl %v): want ErrInvalid or ErrNotObtained, got %v", ttl, err)
			}
		}

		// Lock retries; it refuses a token outright, and ends with ctx.
		lctx, lcancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer lcancel()
		_, err = rl.Lock(lctx, "fuzz-options", ttl, callOpts...)
		switch {
		case err == nil:
			t.Fatal("Lock on a dead node: want an error, got a lock")
		case mask&optToken != 0 || ttlBad:
			if !errors.Is(err, redlock.ErrInvalid) {
				t.Fatalf("Lock(ttl %v, mask %#x): want ErrInvalid, got %v", ttl, mask, err)
			}
		case ttlGood:
			if !errors.Is(err, redlock.ErrNotObtained) {
				t.Fatalf("Lock(ttl %v, mask %#x): want ErrNotObtained, got %v", ttl, mask, err)
			}
		}
	})
}
