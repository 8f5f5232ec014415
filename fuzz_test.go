package redlock_test

import (
	"context"
	"errors"
	"math"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

// Fuzz targets. `go test` runs their seed corpora (f.Add and
// testdata/fuzz) as ordinary tests; `make fuzz` fuzzes each for a while.
// None may panic; each checks the documented contract of what it feeds.

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
	f.Add(uint16(optDrift), -0.0, int64(0), int64(0), 0, 0, int64(0), int64(0), "", int64(time.Second))
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
		bad := false
		add := func(bit uint16, invalid bool, o redlock.Option) {
			if mask&bit != 0 {
				opts = append(opts, o)
				bad = bad || invalid
			}
		}
		add(optDrift, !(drift >= 0 && drift < 0.5), redlock.WithDriftFactor(drift))
		add(optNodeTimeout, nodeTimeout <= 0, redlock.WithNodeTimeout(time.Duration(nodeTimeout)))
		add(optRetryDelay, retryDelay <= 0, redlock.WithRetryDelay(time.Duration(retryDelay)))
		add(optMaxTries, maxTries < 0, redlock.WithMaxTries(maxTries))
		add(optMaxExtensions, maxExt < 0, redlock.WithMaxExtensions(maxExt))
		add(optMaxHold, maxHold < 0, redlock.WithMaxHold(time.Duration(maxHold)))
		add(optRestartGuard, guard < 0, redlock.WithRestartGuard(time.Duration(guard)))
		nodes := []redis.UniversalClient{node}

		// New: a token is refused even when valid (it is per call).
		withToken := append(opts[:len(opts):len(opts)], redlock.WithToken(token))
		_, err := redlock.New(nodes, withToken...)
		if !errors.Is(err, redlock.ErrInvalid) {
			t.Fatalf("New with WithToken: want ErrInvalid, got %v", err)
		}
		rl, err := redlock.New(nodes, opts...)
		if bad != errors.Is(err, redlock.ErrInvalid) || (err != nil && !bad) {
			t.Fatalf("New(mask %#x): want invalid=%v, got %v", mask, bad, err)
		}
		if bad {
			return
		}

		// One call, with the options given again per call and a TTL.
		callOpts := opts
		if mask&optToken != 0 {
			callOpts = withToken
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

// FuzzKeys locks arbitrary keys, alone and in pairs, for arbitrary TTLs,
// on one set of three real nodes shared by all cases. Empty and duplicate
// keys and bad TTLs are ErrInvalid; every other key, however odd its bytes,
// is locked and released on every node, all keys of a lock or none.
func FuzzKeys(f *testing.F) {
	for _, k := range [][2]string{
		{"a", "b"}, {"", "b"}, {"a", ""}, {"same", "same"},
		{"{tag}x", "{tag}y"}, {"{}", "}{"}, {"\x00", "\x00\x00"}, {"\xff\xfe", "ünïcödé ✓"},
		{"with space", "with\r\nnewline"}, {"*", "?"}, {"lock:x", redlock.FenceKey("lock:x")},
		{strings.Repeat("k", 4096), "short"},
	} {
		f.Add(k[0], k[1], int64(10*time.Second))
	}
	f.Add("ttl", "zero", int64(0))
	f.Add("ttl", "negative", int64(-1))
	f.Add("ttl", "tiny", int64(3*time.Millisecond))
	f.Add("ttl", "short", int64(20*time.Millisecond))
	f.Add("ttl", "huge", int64(math.MaxInt64))

	nodes := redistest.Nodes(f, 3)
	clients := redistest.Clients(f, nodes)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, k1, k2 string, ttlNs int64) {
		rl := newClient(t, clients)
		ttl := time.Duration(ttlNs)
		// Valid iff ttl - ceil(ttl/100) - 2ms >= 1ms: 3ms is too short,
		// 3.1ms enough; in between either answer is right.
		ttlBad, ttlGood := ttl < 3*time.Millisecond, ttl >= 3100*time.Microsecond

		l, err := rl.TryLock(ctx, k1, ttl)
		switch {
		case k1 == "" || ttlBad:
			if !errors.Is(err, redlock.ErrInvalid) {
				t.Fatalf("TryLock(%q, %v): want ErrInvalid, got %v", k1, ttl, err)
			}
			if k1 == "" {
				return
			}
		case !ttlGood:
			if err == nil {
				_ = l.Unlock(ctx)
			} else if !errors.Is(err, redlock.ErrInvalid) && !errors.Is(err, redlock.ErrNotObtained) {
				t.Fatalf("TryLock(%q, %v): want ErrInvalid or ErrNotObtained, got %v", k1, ttl, err)
			}
			waitGone(t, clients, k1)
		case ttl < time.Second:
			// Too short to be sure of winning on a busy machine, and may
			// expire any moment: only the error's class is checked.
			if err != nil {
				if !errors.Is(err, redlock.ErrNotObtained) {
					t.Fatalf("TryLock(%q, %v): want ErrNotObtained, got %v", k1, ttl, err)
				}
			} else if err := l.Unlock(ctx); err != nil && !errors.Is(err, redlock.ErrNotHeld) {
				t.Fatalf("Unlock: want nil or ErrNotHeld, got %v", err)
			}
			waitGone(t, clients, k1)
		default:
			if err != nil {
				t.Fatalf("TryLock(%q, %v): want the lock, got %v", k1, ttl, err)
			}
			if got := get(t, clients[0], k1); got != l.Token() && got != "" { // "" : node 0 not yet answered
				t.Fatalf("node 0: want our token at %q, got %q", k1, got)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock(%q): %v", k1, err)
			}
			waitGone(t, clients, k1)
		}

		// Two keys: all or none. With k1 held by another lock, the pair is
		// contended and k2 must not be taken anywhere.
		keys := []string{k1, k2}
		if k2 == "" || k1 == k2 {
			if _, err := rl.TryLockKeys(ctx, keys, 10*time.Second); !errors.Is(err, redlock.ErrInvalid) {
				t.Fatalf("TryLockKeys(%q): want ErrInvalid, got %v", keys, err)
			}
			return
		}
		held, err := rl.TryLock(ctx, k1, 10*time.Second)
		if err != nil {
			t.Fatalf("TryLock(%q): %v", k1, err)
		}
		if _, err := rl.TryLockKeys(ctx, keys, 10*time.Second); !errors.Is(err, redlock.ErrContended) {
			t.Fatalf("TryLockKeys(%q) with %q held: want ErrContended, got %v", keys, k1, err)
		}
		waitGone(t, clients, k2)
		if err := held.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q): %v", k1, err)
		}
		waitGone(t, clients, k1)
		both, err := rl.TryLockKeys(ctx, keys, 10*time.Second)
		if err != nil {
			t.Fatalf("TryLockKeys(%q): want the lock, got %v", keys, err)
		}
		for _, k := range keys {
			eventually(t, 5*time.Second, func() bool { return get(t, clients[0], k) == both.Token() },
				"node 0: want our token at %q", k)
		}
		if err := both.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q): %v", keys, err)
		}
		waitGone(t, clients, k1, k2)
	})
}

// waitGone waits until no node holds any of keys: a round returns once a
// quorum answered, and the others answer a moment later.
func waitGone(t testing.TB, clients []redis.UniversalClient, keys ...string) {
	t.Helper()
	for i, c := range clients {
		for _, k := range keys {
			eventually(t, 5*time.Second, func() bool { return get(t, c, k) == "" },
				"node %d: want %q gone", i, k)
		}
	}
}

// FuzzURL builds nodes from node URLs as go-redis parses them: New never
// panics, accepts one node, and refuses one URL given twice as a
// duplicate node, whatever the URL says.
func FuzzURL(f *testing.F) {
	for _, u := range []string{
		"redis://127.0.0.1:6379", "rediss://user:pass@127.0.0.1:6380/2",
		"redis://:secret@localhost/15?dial_timeout=1s&pool_size=2", "unix:///tmp/redis.sock?db=3",
		"redis://[::1]:6379/0", "redis://h:0", "redis://h:99999", "redis://h/-1", "redis:///",
		"rediss://h?skip_verify=true", "redis://user@h?protocol=2&client_name=x", "redis://h?max_retries=-1",
		"redis://h?pool_size=-1", "redis://h?read_timeout=-1", "http://h", "", "redis://%zz",
	} {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, u string) {
		o1, err := redis.ParseURL(u)
		if err != nil {
			return
		}
		o2, err := redis.ParseURL(u)
		if err != nil {
			t.Fatalf("ParseURL(%q) succeeded once then failed: %v", u, err)
		}
		if o1.Addr == "FailoverClient" { // go-redis's placeholder; see docs/sentinel.md
			return
		}
		c1, c2, ok := newClientPair(o1, o2)
		if !ok {
			return // go-redis refuses these options by panicking (pool_size=-1)
		}
		defer c1.Close()
		defer c2.Close()
		if _, err := redlock.New([]redis.UniversalClient{c1}); err != nil {
			t.Fatalf("New(%q): want a client, got %v", u, err)
		}
		_, err = redlock.New([]redis.UniversalClient{c1, c2})
		if !errors.Is(err, redlock.ErrDuplicateNode) || !errors.Is(err, redlock.ErrInvalid) {
			t.Fatalf("New(%q twice): want ErrDuplicateNode and ErrInvalid, got %v", u, err)
		}
	})
}

// newClientPair builds two clients, or reports false when go-redis panics
// on the options: building clients is the caller's part, not the
// library's.
func newClientPair(o1, o2 *redis.Options) (c1, c2 *redis.Client, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return redis.NewClient(o1), redis.NewClient(o2), true
}

// replyPlans holds the plan FuzzReply's one fake server follows now.
type replyPlans struct{ p atomic.Pointer[replyPlan] }

func (r *replyPlans) reply(cmd []string) []byte { return r.p.Load().reply(cmd) }

// FuzzReply answers one command of a lock attempt with arbitrary bytes. It
// must never panic. A lost attempt says why, in the node's result. The
// target's high bit makes the attempt fenced (WithFencing), whose replies
// go through the fenced parser.
func FuzzReply(f *testing.F) {
	for ti := range replyTargets {
		for _, m := range malformed {
			if m.reply != nil {
				f.Add(m.reply, uint8(ti), ti%2 == 0)
			}
		}
	}
	f.Add([]byte(":1\r\n"), uint8(0), false) // a real vote
	f.Add([]byte(":0\r\n"), uint8(0), true)  // a real refusal
	f.Add([]byte(":1\r\n:1\r\n+OK\r\n"), uint8(1), false)
	f.Add([]byte{}, uint8(0), false) // silence
	for _, m := range fencedMalformed {
		f.Add(m.reply, uint8(0x80|1), false) // fenced, EVAL
	}
	f.Add([]byte("*2\r\n:1\r\n:7\r\n"), uint8(0x80|1), false) // a real fenced vote
	f.Add([]byte("*2\r\n:0\r\n:0\r\n"), uint8(0x80|1), true)  // a real fenced refusal

	plans := &replyPlans{}
	fake := startFake(f, plans.reply)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, reply []byte, target uint8, resp3 bool) {
		plans.p.Store(&replyPlan{target: replyTargets[int(target)%len(replyTargets)], garbage: reply, resp3: resp3, runID: "fuzz-fake"})
		c := redis.NewClient(&redis.Options{
			Addr: fake.Addr(), MaxRetries: -1, DialerRetries: 1, PoolSize: 2,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		})
		defer c.Close()
		opts := []redlock.Option{redlock.WithNodeTimeout(100 * time.Millisecond)}
		if target&0x80 != 0 {
			opts = append(opts, redlock.WithFencing())
		}
		rl, err := redlock.New([]redis.UniversalClient{c}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		l, err := rl.TryLock(ctx, "fuzz-reply", 10*time.Second)
		if err == nil {
			_ = l.Extend(ctx, 10*time.Second)
			_ = l.Unlock(ctx)
			return
		}
		if !errors.Is(err, redlock.ErrNotObtained) {
			t.Fatalf("want ErrNotObtained, got %v", err)
		}
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) {
			t.Fatalf("want a *QuorumError, got %T: %v", err, err)
		}
		switch n := qe.Nodes[0]; n.Status {
		case redlock.NodeFailed:
			if n.Err == nil {
				t.Fatalf("want the node's error, got %v", n)
			}
		case redlock.NodeTaken:
		default:
			t.Fatalf("want failed or taken, got %v", n)
		}
	})
}
