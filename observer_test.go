package redlock_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

// recorder keeps every event, and counts them (stats) too.
type recorder struct {
	stats
	mu     sync.Mutex
	nodes  []redlock.Event
	rounds []redlock.Event
	locks  []redlock.Event
}

var _ eventObserver = (*recorder)(nil)

func (r *recorder) ObserveNode(e redlock.Event) {
	r.stats.ObserveNode(e)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes = append(r.nodes, e)
}

func (r *recorder) ObserveRound(e redlock.Event) {
	r.stats.ObserveRound(e)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rounds = append(r.rounds, e)
}

func (r *recorder) ObserveLock(e redlock.Event) {
	r.stats.ObserveLock(e)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.locks = append(r.locks, e)
}

// nodeEvents returns the node events of op so far.
func (r *recorder) nodeEvents(op string) []redlock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []redlock.Event
	for _, e := range r.nodes {
		if e.Op == op {
			out = append(out, e)
		}
	}
	return out
}

// roundEvents returns the round events so far.
func (r *recorder) roundEvents() []redlock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]redlock.Event(nil), r.rounds...)
}

// lockEvents returns the lock events so far.
func (r *recorder) lockEvents() []redlock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]redlock.Event(nil), r.locks...)
}

// lastRound returns the last round event, which must be of op.
func (r *recorder) lastRound(t testing.TB, op string) redlock.Event {
	t.Helper()
	rs := r.roundEvents()
	if len(rs) == 0 {
		t.Fatalf("want a %s round event, got none", op)
	}
	e := rs[len(rs)-1]
	if e.Op != op {
		t.Fatalf("want the last round event of op %s, got %+v", op, e)
	}
	return e
}

// waitNodeEvents waits until op has n node events and returns them.
func (r *recorder) waitNodeEvents(t testing.TB, op string, n int) []redlock.Event {
	t.Helper()
	eventually(t, 5*time.Second, func() bool { return len(r.nodeEvents(op)) >= n },
		"want %d %s node events, got %d", n, op, len(r.nodeEvents(op)))
	return r.nodeEvents(op)
}

// TestObserverLockLifecycle: a won lock, an extension and an Unlock.
func TestObserverLockLifecycle(t *testing.T) {
	_, cs := cluster(t, 3)
	rec := &recorder{}
	rl := newClient(t, cs, redlock.WithObserver(observeWith(rec)))
	ctx := context.Background()
	k := key(t)

	l, err := rl.TryLock(ctx, k, 10*time.Second)
	require.NoError(t, err)
	won := rec.lastRound(t, "lock")
	require.Equal(t, "won", won.Reason)
	require.NoError(t, won.Err)
	require.Equal(t, []string{k}, won.Keys)
	require.Positive(t, won.Duration)

	// Every node answers, the one the round did not wait for included,
	// each with its own address and latency.
	evs := rec.waitNodeEvents(t, "lock", 3)
	require.Len(t, evs, 3)
	seen := map[int]bool{}
	for _, e := range evs {
		require.Equal(t, "ok", e.Status, "node %d", e.Node)
		require.NoError(t, e.Err)
		require.Positive(t, e.Latency, "node %d", e.Node)
		require.Equal(t, cs[e.Node].(*redis.Client).Options().Addr, e.Addr)
		seen[e.Node] = true
	}
	require.Len(t, seen, 3, "want one event per node, got %+v", evs)

	require.NoError(t, l.Extend(ctx, 10*time.Second))
	require.Equal(t, "won", rec.lastRound(t, "extend").Reason)
	rec.waitNodeEvents(t, "extend", 3)
	time.Sleep(10 * time.Millisecond) // a measurable hold
	require.NoError(t, l.Unlock(ctx))
	require.Equal(t, "won", rec.lastRound(t, "unlock").Reason)
	rec.waitNodeEvents(t, "unlock", 3)

	ends := rec.lockEvents()
	require.Len(t, ends, 1)
	end := ends[0]
	require.False(t, end.Lost)
	require.NoError(t, end.Err)
	require.Equal(t, 1, end.Extensions)
	require.Equal(t, []string{k}, end.Keys)
	require.GreaterOrEqual(t, end.Held, 10*time.Millisecond)

	// A second Unlock does not end the lock again.
	require.ErrorIs(t, l.Unlock(ctx), redlock.ErrNotHeld)
	require.Len(t, rec.lockEvents(), 1)

	s := rec.Snapshot()
	want := statsSnapshot{Attempts: 1, Won: 1, Extensions: 1, Released: 1}
	require.Equal(t, want, s)
}

// TestObserverLosses: a contended attempt, an unreachable one (killed
// nodes) and a cancelled one are classified by reason, and the failed
// nodes are reported with their errors.
func TestObserverLosses(t *testing.T) {
	nodes, cs := cluster(t, 3)
	rec := &recorder{}
	rl := newClient(t, cs, redlock.WithObserver(observeWith(rec)))
	ctx := context.Background()

	t.Run("contended", func(t *testing.T) {
		k := key(t)
		holdForeign(t, cs[0], k, 10*time.Second)
		holdForeign(t, cs[1], k, 10*time.Second)
		_, err := rl.TryLock(ctx, k, 10*time.Second)
		require.ErrorIs(t, err, redlock.ErrContended)
		e := rec.lastRound(t, "lock")
		require.Equal(t, "contended", e.Reason)
		require.ErrorIs(t, e.Err, redlock.ErrContended)
		taken := 0
		for _, n := range rec.waitNodeEvents(t, "lock", 3) {
			if n.Status == "taken" {
				taken++
			}
		}
		require.Equal(t, 2, taken)
	})

	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := rl.TryLock(cctx, key(t), 10*time.Second)
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, "cancelled", rec.lastRound(t, "lock").Reason)
	})

	t.Run("unreachable", func(t *testing.T) {
		require.NoError(t, nodes[1].Kill())
		require.NoError(t, nodes[2].Kill())
		before := len(rec.nodeEvents("lock"))
		cleanups := len(rec.nodeEvents("unlock"))
		_, err := rl.TryLock(ctx, key(t), 10*time.Second)
		require.ErrorIs(t, err, redlock.ErrUnreachable)
		e := rec.lastRound(t, "lock")
		require.Equal(t, "unreachable", e.Reason)
		evs := rec.waitNodeEvents(t, "lock", before+3)[before:]
		failed := map[int]error{}
		for _, n := range evs {
			if n.Status == "failed" {
				failed[n.Node] = n.Err
			}
		}
		require.Len(t, failed, 2, "want nodes 1 and 2 failed, got %+v", evs)
		for i, err := range failed {
			require.Error(t, err, "node %d", i)
		}
		// The grant of node 0 is released as a clean-up.
		rec.waitNodeEvents(t, "unlock", cleanups+1)
	})

	s := rec.Snapshot()
	require.Equal(t, int64(3), s.Attempts)
	require.Equal(t, int64(0), s.Won)
	require.Equal(t, int64(1), s.Contended)
	require.Equal(t, int64(1), s.Cancelled)
	require.Equal(t, int64(1), s.Unreachable)
	require.GreaterOrEqual(t, s.NodeErrors, int64(2))
}

// TestObserverLostLock: auto-extension that cannot reach a majority
// (killed) reports the lock lost, once, and logs it when a logger is set.
func TestObserverLostLock(t *testing.T) {
	nodes, cs := cluster(t, 3)
	rec := &recorder{}
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rl := newClient(t, cs, redlock.WithObserver(observeWith(rec)), redlock.WithLogger(log))
	ctx := context.Background()

	const ttl = 600 * time.Millisecond
	l := autoExtended(t, rl, ttl)
	// Let one extension happen first.
	eventually(t, 5*time.Second, func() bool { return l.Extensions() >= 1 }, "want an extension")
	require.NoError(t, nodes[0].Kill())
	require.NoError(t, nodes[1].Kill())
	awaitDone(t, l, 5*time.Second, "want Done closed after the majority was killed")
	require.ErrorIs(t, l.Err(), redlock.ErrLockLost)
	ends := rec.lockEvents()
	require.Len(t, ends, 1)
	require.True(t, ends[0].Lost)
	require.ErrorIs(t, ends[0].Err, redlock.ErrLockLost)
	require.Equal(t, l.Extensions(), ends[0].Extensions)
	require.Positive(t, ends[0].Held)

	// Unlock after the loss does not report a release.
	_ = l.Unlock(ctx)
	require.Len(t, rec.lockEvents(), 1)
	s := rec.Snapshot()
	require.Equal(t, int64(1), s.Lost)
	require.Equal(t, int64(0), s.Released)
	require.GreaterOrEqual(t, s.Extensions, int64(1))

	out := buf.String()
	require.Contains(t, out, "level=WARN")
	require.Contains(t, out, "lock lost")
}

// TestLoggerSilentByDefault: without WithLogger nothing is logged, not
// even through slog's default logger.
func TestLoggerSilentByDefault(t *testing.T) {
	var buf syncBuffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })

	cs, rl := threeNodes(t)
	ctx := context.Background()
	k := key(t)
	l := tryLock(t, rl, k, time.Second)
	require.NoError(t, l.AutoExtend(ctx))
	// The key vanishes from every node: the next extension finds the lock
	// gone.
	spoilUntilLost(t, l, 300*time.Millisecond, 5*time.Second, func() {
		for _, c := range cs {
			require.NoError(t, c.Del(ctx, k).Err())
		}
	})
	require.ErrorIs(t, l.Err(), redlock.ErrLockLost)
	_ = l.Unlock(ctx)
	require.Empty(t, buf.String())
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestWithObserverNil(t *testing.T) {
	_, cs := cluster(t, 1)
	// A nil func turns observation off, also for one call.
	rec := &recorder{}
	rl := newClient(t, cs, redlock.WithObserver(observeWith(rec)), redlock.WithLogger(nil))
	l, err := rl.TryLock(context.Background(), key(t), time.Second, redlock.WithObserver(nil))
	require.NoError(t, err)
	require.NoError(t, l.Unlock(context.Background()))
	require.Empty(t, rec.roundEvents())
	require.Empty(t, rec.lockEvents())
}

// TestLoggerEvents: a server given twice is logged as an error, and the
// restart guard's refusals once per node, not per vote.
func TestLoggerEvents(t *testing.T) {
	nodes, _ := cluster(t, 3)
	ctx := context.Background()

	t.Run("duplicate node", func(t *testing.T) {
		var buf syncBuffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		var cs []redis.UniversalClient
		for db := range 2 { // one server, two databases
			c := redis.NewClient(&redis.Options{Addr: nodes[0].Addr(), DB: db})
			t.Cleanup(func() { _ = c.Close() })
			cs = append(cs, c)
		}
		rl := newClient(t, append(cs, redistest.Client(t, nodes[1])), redlock.WithLogger(log))
		_, err := rl.TryLock(ctx, key(t), 10*time.Second)
		require.ErrorIs(t, err, redlock.ErrInvalid)
		require.Contains(t, buf.String(), "level=ERROR")
		require.Contains(t, buf.String(), "two nodes are one server")
	})

	t.Run("restart guard", func(t *testing.T) {
		var buf syncBuffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		// The nodes started moments ago: an hour's guard refuses them.
		rl := newClient(t, redistest.Clients(t, nodes), redlock.WithRestartGuard(time.Hour), redlock.WithLogger(log))
		for range 3 {
			_, err := rl.TryLock(ctx, key(t), 10*time.Second)
			require.ErrorIs(t, err, redlock.ErrUnreachable)
		}
		eventually(t, 5*time.Second, func() bool {
			return strings.Count(buf.String(), "restart guard refuses its votes") == 3
		}, "want one line per node, got %q", buf.String())
		require.Contains(t, buf.String(), "level=INFO")
	})
}
