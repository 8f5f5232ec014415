package redlock_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

var keySeq atomic.Int64

// testSeed returns the seed of a randomized test: -seed N, or one from
// the clock; logged with the command that replays it.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test -race -run '^%s$' -seed %d .)", seed, t.Name(), seed)
	return seed
}

var seedFlag = flag.Uint64("seed", 0, "the randomized tests' seed (0: from the clock)")

// key returns a key unique to this test run.
func key(t testing.TB) string {
	return fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), keySeq.Add(1))
}

// cluster starts n real redis-server processes and returns them with one
// go-redis client each.
func cluster(t testing.TB, n int) ([]*redisnode.Node, []redis.UniversalClient) {
	t.Helper()
	nodes := redistest.Nodes(t, n)
	return nodes, redistest.Clients(t, nodes)
}

// newClient returns a Client on clients with testNodeTimeout, unless opts
// set another per-node timeout (later options win).
func newClient(t testing.TB, clients []redis.UniversalClient, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := redlock.New(clients, append([]redlock.Option{redlock.WithNodeTimeout(testNodeTimeout)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// threeNodes starts 3 real nodes and returns their clients and a Client
// on them (newClient, with opts).
func threeNodes(t testing.TB, opts ...redlock.Option) ([]redis.UniversalClient, *redlock.Client) {
	t.Helper()
	_, clients := cluster(t, 3)
	return clients, newClient(t, clients, opts...)
}

// deadClients returns clients for n addresses where a redis-server was
// killed: connections are refused, as for a crashed node.
func deadClients(t testing.TB, n int) []redis.UniversalClient {
	t.Helper()
	nodes, clients := cluster(t, n)
	for _, nd := range nodes {
		require.NoError(t, nd.Kill())
	}
	return clients
}

const foreignToken = "someone-else-0123456789"

// testNodeTimeout is the per-node timeout newClient gives unless a test
// sets its own: far above a node's reply time even on a loaded 2-core
// machine under -race, so that a scheduling stall does not fail a test
// that is not about timeouts. TestDefaultNodeTimeoutBoundsRound tests the
// default, through redlock.New.
const testNodeTimeout = 250 * time.Millisecond

// holdForeign sets key on c to another holder's token.
func holdForeign(t testing.TB, c redis.UniversalClient, key string, ttl time.Duration) {
	t.Helper()
	require.NoError(t, c.Set(context.Background(), key, foreignToken, ttl).Err())
}

// spoilUntilLost runs spoil, then again every pause until l's Done
// closes, and fails t when it is still open after within. An
// auto-extension that comes between two nodes' deletions heals the nodes
// already deleted while a quorum still holds the key, so one pass may
// leave the lock held; a pass that no extension interrupts loses it.
func spoilUntilLost(t testing.TB, l *redlock.Lock, pause, within time.Duration, spoil func()) {
	t.Helper()
	deadline := time.After(within)
	for {
		spoil()
		select {
		case <-l.Done():
			return
		case <-time.After(pause):
		case <-deadline:
			t.Fatalf("lock %s: Done still open %v after its keys were spoiled", l.Key(), within)
		}
	}
}

// get returns key's value on c, or "" when absent.
func get(t testing.TB, c redis.UniversalClient, key string) string {
	t.Helper()
	v, err := c.Get(context.Background(), key).Result()
	if err == redis.Nil {
		return ""
	}
	require.NoError(t, err)
	return v
}

// eventually polls cond every 5ms until it holds or wait passes.
func eventually(t testing.TB, wait time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	poll(t, wait, 5*time.Millisecond, cond, format, args...)
}

// eventuallyTaken polls like eventually until try, an acquisition that
// does not wait, is granted, and releases the lock it got.
func eventuallyTaken(t testing.TB, wait time.Duration, try func() (*redlock.Lock, error), format string, args ...any) {
	t.Helper()
	eventually(t, wait, func() bool {
		l, err := try()
		if err != nil {
			return false
		}
		require.NoError(t, l.Unlock(context.Background()))
		return true
	}, format, args...)
}

// awaitDone fails the test with msg unless l's Done closes within d.
func awaitDone(t testing.TB, l *redlock.Lock, d time.Duration, msg string) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(d):
		t.Fatal(msg)
	}
}

// refusedOnce is an observer for one call's options, and a channel it
// closes at the call's first round that a holder refused: the call is
// then in its wait, neither before it nor done.
func refusedOnce() (redlock.SharedOption, <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return redlock.WithObserver(func(e redlock.Event) {
		if e.Kind == "round" && e.Reason == "contended" {
			once.Do(func() { close(ch) })
		}
	}), ch
}

// poll checks cond every interval until it holds, and fails the test with
// the message when wait passes first.
func poll(t testing.TB, wait, interval time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: "+format, append([]any{wait}, args...)...)
		}
		time.Sleep(interval)
	}
}

// requireRWGone waits (up to wait) until no node keeps k or its readers
// key: a read-write lock that was released or expired leaves nothing.
func requireRWGone(t testing.TB, clients []redis.UniversalClient, k string, wait time.Duration) {
	t.Helper()
	ctx := context.Background()
	for i, c := range clients {
		eventually(t, wait, func() bool {
			return get(t, c, k) == "" && c.Exists(ctx, redlock.KeyName("readers", k)).Val() == 0
		}, "node %d keeps %s or its readers key", i+1, k)
	}
}

// watchStalls starts a stall monitor (redistest.StallMonitor); it
// stops at the test's cleanup.
func watchStalls(t testing.TB) *redistest.StallMonitor { return redistest.WatchStalls(t) }

// defaultNodeTimeout is the per-node timeout a Client gives a lock of
// ttl when none is set: ttl/20 in [5ms, 200ms] (WithNodeTimeout's doc).
func defaultNodeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/20, 5*time.Millisecond), 200*time.Millisecond)
}

// lossMargin is how long before its deadline a lock of ttl, on a client
// whose per-node timeout is nodeTimeout, is reported lost: that timeout,
// at least minLossMargin, at most ttl/4 (see Lock.Done).
func lossMargin(ttl, nodeTimeout time.Duration) time.Duration {
	return min(max(nodeTimeout, minLossMargin), ttl/4)
}

// requireLossesSafe checks what holds of auto-extended locks however long
// the process stalled: a lock whose validity ran out says so within a
// few seconds, and a lock that reports an error is lost everywhere at
// once: Done closed, no validity left, Err matching ErrLockLost.
func requireLossesSafe(t testing.TB, locks []*redlock.Lock) {
	t.Helper()
	for i, l := range locks {
		eventually(t, 5*time.Second, func() bool { return l.Validity() > 0 || l.Err() != nil },
			"lock %d: validity %v, and Done still open", i, l.Validity())
		err := l.Err()
		if err == nil {
			continue
		}
		select {
		case <-l.Done():
		default:
			t.Fatalf("lock %d: want Done closed with Err set (%v), got it open", i, err)
		}
		require.LessOrEqual(t, l.Validity(), time.Duration(0), "lock %d: want no validity left once lost", i)
		require.ErrorIs(t, err, redlock.ErrLockLost, "lock %d", i)
	}
}

// autoExtended takes a lock of ttl on a fresh key with TryLock and
// auto-extends it with a background ctx: until Unlock, a hold limit or
// its loss.
func autoExtended(t testing.TB, rl *redlock.Client, ttl time.Duration) *redlock.Lock {
	t.Helper()
	l, err := rl.TryLock(context.Background(), key(t), ttl)
	require.NoError(t, err)
	require.NoError(t, l.AutoExtend(context.Background()))
	return l
}

// cancelAround makes n attempts with acquire (its i from 0 to n-1), 4 at
// a time, each with a ctx cancelled after a random delay of up to 1.5ms:
// around the decision of a round on loopback nodes. Wins that stand are
// unlocked, and an Unlock that fails fails the test. It returns how many
// attempts won and how many were cut (by the cancellation, or refused).
func cancelAround(t *testing.T, rng *rand.Rand, n int, what string, acquire func(ctx context.Context, i int) (*redlock.Lock, error)) (won, cut int64) {
	t.Helper()
	var wg sync.WaitGroup
	var w, c atomic.Int64
	sem := make(chan struct{}, 4)
	for i := range n {
		delay := time.Duration(rng.Int64N(int64(1500 * time.Microsecond)))
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithCancel(context.Background())
			timer := time.AfterFunc(delay, cancel)
			defer timer.Stop()
			l, err := acquire(ctx, i)
			cancel()
			if err != nil {
				c.Add(1)
				return
			}
			w.Add(1)
			if err := l.Unlock(context.Background()); err != nil {
				t.Errorf("%s: Unlock of a won lock: %v", what, err)
			}
		}()
	}
	wg.Wait()
	return w.Load(), c.Load()
}

// nodeKeys returns the keys on the nodes that contain root, as
// "node i: key = value (pttl d)"; fence counters are left out, as they
// are not lock state and outlive every lock by design, and so are
// elections' histories (KeyName("terms", name)) that expire: they are not lock
// state either, and outlive a leadership by design so that observers
// read them; one without a TTL would never go, and is listed.
func nodeKeys(t testing.TB, clients []redis.UniversalClient, root string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for i, c := range clients {
		keys, err := c.Keys(ctx, "*"+root+"*").Result()
		require.NoError(t, err)
		for _, k := range keys {
			expiring := strings.HasSuffix(k, ":terms") || strings.HasSuffix(k, ":queue") || strings.HasSuffix(k, ":queue:named")
			pttl := c.PTTL(ctx, k).Val()
			if strings.HasSuffix(k, ":fence") || (expiring && pttl > 0) || pttl == -2 {
				// A wait queue, like a history, expires on its own; -2:
				// the key expired since KEYS listed it.
				continue
			}
			v := c.Type(ctx, k).Val()
			if v == "string" {
				v = get(t, c, k)
			}
			out = append(out, fmt.Sprintf("node %d: %s = %s (pttl %v)", i+1, k, v, c.PTTL(ctx, k).Val()))
		}
	}
	return out
}

// within fails the test when f does not return within d, and reports a
// panic in f as an error.
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
		t.Fatalf("%s: want a return within %v, got none", what, d)
	}
	if p != nil {
		t.Errorf("%s: want no panic, got %v", what, p)
	}
}

// Figures the library documents and the tests rely on; the library keeps
// them unexported, so the tests restate them here.
const (
	// firstContactTimeout: a Client's first round waits at least this
	// long for its nodes (WithNodeTimeout's doc).
	firstContactTimeout = 250 * time.Millisecond
	// releaseTimeout: Unlock waits at least this long for its nodes
	// (Unlock's and WithNodeTimeout's docs).
	releaseTimeout = 250 * time.Millisecond
	// minLossMargin: Done closes at least this long before the deadline
	// (Done's doc).
	minLossMargin = 20 * time.Millisecond
	// minTokenLen: WithToken refuses shorter tokens (WithToken's doc).
	minTokenLen = 16
	// defaultDriftFactor: WithDriftFactor's default (its doc).
	defaultDriftFactor = 0.01
)

// nodeState is what a walk over node states makes of one node.
type nodeState int

const (
	nodeHealthy nodeState = iota // up and free
	nodeDown                     // killed: connections are refused
	nodeTaken                    // up, the key held by another token
)

// subsetCase is one assignment of states to the nodes of a walk.
type subsetCase struct {
	name    string                  // the states, as "[0 2 1 ...]"
	key     string                  // unique to the case
	states  []nodeState             // one per node
	clients []redis.UniversalClient // down nodes' are killed servers'
	live    []redis.UniversalClient // every node's, live, to read them
	// How many nodes are in each state.
	healthy, down, taken int
}

// everyNodeState walks every assignment of healthy, down and taken over
// n real nodes (3^n cases). For each case, hold puts another holder's
// value at the case's key on each taken node, and check runs with
// clients whose down nodes are killed redis-servers.
func everyNodeState(t *testing.T, n int, hold func(c redis.UniversalClient, key string), check func(sc subsetCase)) {
	t.Helper()
	_, live := cluster(t, n)
	dead := deadClients(t, n)
	cases := 1
	for range n {
		cases *= 3
	}
	for mask := range cases {
		sc := subsetCase{key: key(t), states: make([]nodeState, n), clients: make([]redis.UniversalClient, n), live: live}
		m := mask
		for i := range sc.states {
			sc.states[i] = nodeState(m % 3)
			m /= 3
			switch sc.states[i] {
			case nodeHealthy:
				sc.clients[i] = live[i]
				sc.healthy++
			case nodeDown:
				sc.clients[i] = dead[i]
				sc.down++
			case nodeTaken:
				sc.clients[i] = live[i]
				hold(live[i], sc.key)
				sc.taken++
			}
		}
		sc.name = fmt.Sprint(sc.states)
		check(sc)
	}
}

// rlock takes a read lock of k for ttl on rl, which must be granted.
func rlock(t testing.TB, rl *redlock.Client, k string, ttl time.Duration) *redlock.Lock {
	t.Helper()
	r, err := rl.TryRLock(context.Background(), k, ttl)
	require.NoError(t, err)
	return r
}

// tryLock takes the lock k for ttl on rl, which must be granted.
func tryLock(t testing.TB, rl *redlock.Client, k string, ttl time.Duration) *redlock.Lock {
	t.Helper()
	l, err := rl.TryLock(context.Background(), k, ttl)
	require.NoError(t, err)
	return l
}

// awaitNoError fails the test with msg unless an error comes from ch
// within d, and fails it if that error is not nil.
func awaitNoError(t testing.TB, ch <-chan error, d time.Duration, msg string) {
	t.Helper()
	select {
	case err := <-ch:
		require.NoError(t, err)
	case <-time.After(d):
		t.Fatal(msg)
	}
}

// requireNotObtained checks that an acquisition failed with
// ErrNotObtained and no lock, and returns its per-node detail.
func requireNotObtained(t testing.TB, l *redlock.Lock, err error, msgAndArgs ...any) *redlock.QuorumError {
	t.Helper()
	require.ErrorIs(t, err, redlock.ErrNotObtained, msgAndArgs...)
	require.Nil(t, l, msgAndArgs...)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe, msgAndArgs...)
	return qe
}

// unboundedClients returns a go-redis client per node with no read or
// write timeout and no retries: a request to a stopped node waits for it.
func unboundedClients(t testing.TB, nodes []*redisnode.Node) []redis.UniversalClient {
	t.Helper()
	return timeoutClients(t, nodes, -1)
}

// timeoutClients returns a go-redis client per node with read and write
// timeout d (-1: none) and no retries. Context deadlines are ignored
// (go-redis's default, ContextTimeoutEnabled off): only d and the
// library's own per-node timeout bound a request to a stopped node.
func timeoutClients(t testing.TB, nodes []*redisnode.Node, d time.Duration) []redis.UniversalClient {
	t.Helper()
	clients := make([]redis.UniversalClient, len(nodes))
	for i, nd := range nodes {
		c := redis.NewClient(&redis.Options{Addr: nd.Addr(), ReadTimeout: d, WriteTimeout: d, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	return clients
}

// holdBriefly is the critical section's work: 1-3ms of holding, so that
// a second holder let in by a broken lock would be caught inside.
func holdBriefly() {
	time.Sleep(time.Millisecond + rand.N(2*time.Millisecond))
}

// contend runs workers goroutines that each take a lock iters times, with
// lock under a deadline of wait, and release it, passing Unlock's error
// to unlocked. While the lock's Validity is positive, goroutine w is in
// the critical section: enter(w) on the way in, holdBriefly, then the
// leave that enter returned. It fails t unless every attempt won.
func contend(t *testing.T, workers, iters int, wait time.Duration,
	lock func(ctx context.Context, w int) (*redlock.Lock, error),
	enter func(w int) (leave func()),
	unlocked func(err error)) {
	t.Helper()
	var won atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			for range iters {
				l, err := lock(ctx, w)
				if !assert.NoError(t, err) {
					return
				}
				if l.Validity() > 0 {
					leave := enter(w)
					holdBriefly()
					leave()
				}
				won.Add(1)
				unlocked(l.Unlock(ctx))
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(workers*iters), won.Load(), "attempts won")
}

// lostLocks counts the locks that were lost, and returns the first
// loss's error.
func lostLocks(locks []*redlock.Lock) (lost int, first error) {
	for _, l := range locks {
		if err := l.Err(); err != nil {
			lost++
			if first == nil {
				first = err
			}
		}
	}
	return lost, first
}

// benchHeldKey returns a Client on 3 nodes, closed when the benchmark
// ends, and one key that it holds for an hour with metadata.
func benchHeldKey(b *testing.B) (*redlock.Client, []string) {
	b.Helper()
	rl, err := redlock.New(benchClients(b, 3))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rl.Close() })
	keys := benchKeys(b, 1)
	if _, err := rl.TryLock(context.Background(), keys[0], time.Hour, redlock.WithMetadata("host-a pid 4242")); err != nil {
		b.Fatal(err)
	}
	return rl, keys
}

// refusals counts the lock rounds refused because the key was held:
// given to a Client (WithObserver(r.observe)), it lets a test await a
// waiter's refusal (awaitWaiting) instead of sleeping for it.
type refusals struct {
	n    atomic.Int64
	mu   sync.Mutex
	last time.Time     // the last refused round's decision
	gap  time.Duration // from the decision before it to its start
}

func (r *refusals) observe(e redlock.Event) {
	if e.Kind == "round" && e.Op == "lock" && e.Reason == "contended" {
		r.mu.Lock()
		if !r.last.IsZero() {
			r.gap = e.Start.Sub(r.last)
		}
		r.last = e.Start.Add(e.Duration)
		r.mu.Unlock()
		r.n.Add(1)
	}
}

// lastAt returns when the last refused round was decided, and how long
// before its start the one before it was.
func (r *refusals) lastAt() (time.Time, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.gap
}

// awaitWaiting waits (10s at most) until r has counted n refused lock
// rounds in all and every node has a release subscription: a waiter was
// refused and waits for a release, or its retry delay.
func (r *refusals) awaitWaiting(t testing.TB, clients []redis.UniversalClient, n int64) {
	t.Helper()
	eventually(t, 10*time.Second, func() bool { return r.n.Load() >= n && subscribed(t, clients, 1) },
		"want %d refused lock rounds and a waiter subscribed, got %d refused", n, r.n.Load())
}

// eventObserver is a test's observer: one method per kind of redlock.Event.
type eventObserver interface {
	ObserveNode(redlock.Event)
	ObserveRound(redlock.Event)
	ObserveLock(redlock.Event)
}

// observeWith returns the func WithObserver takes, handing each event to
// o's method of its kind.
func observeWith(o eventObserver) func(redlock.Event) {
	return func(e redlock.Event) {
		switch e.Kind {
		case "node":
			o.ObserveNode(e)
		case "round":
			o.ObserveRound(e)
		case "lock":
			o.ObserveLock(e)
		}
	}
}

// stats counts the library's events with atomics, for tests that await
// them.
type stats struct {
	attempts, won, contended, unreachable, cancelled, expired atomic.Int64
	nodeErrors, extensions, released, lost                    atomic.Int64
}

// statsSnapshot is a copy of the counters of a Stats.
type statsSnapshot struct {
	Attempts    int64 // acquisition rounds ("lock"), won or not
	Won         int64 // acquisition rounds won
	Contended   int64 // acquisition rounds lost to other owners ("contended")
	Unreachable int64 // acquisition rounds lost to failed nodes ("unreachable")
	Cancelled   int64 // acquisition rounds cut short by their ctx ("cancelled")
	Expired     int64 // acquisition rounds won too late ("expired")
	NodeErrors  int64 // node requests that failed ("failed")
	Extensions  int64 // extension rounds won
	Released    int64 // locks ended by Unlock
	Lost        int64 // locks that Done reported lost
}

// ObserveNode counts failed node requests.
func (s *stats) ObserveNode(e redlock.Event) {
	if e.Status == "failed" {
		s.nodeErrors.Add(1)
	}
}

// ObserveRound counts acquire attempts by outcome, and extensions.
func (s *stats) ObserveRound(e redlock.Event) {
	switch e.Op {
	case "lock":
		s.attempts.Add(1)
		switch e.Reason {
		case "won":
			s.won.Add(1)
		case "contended":
			s.contended.Add(1)
		case "unreachable":
			s.unreachable.Add(1)
		case "cancelled":
			s.cancelled.Add(1)
		case "expired":
			s.expired.Add(1)
		}
	case "extend":
		if e.Reason == "won" {
			s.extensions.Add(1)
		}
	}
}

// ObserveLock counts released and lost locks.
func (s *stats) ObserveLock(e redlock.Event) {
	if e.Lost {
		s.lost.Add(1)
	} else {
		s.released.Add(1)
	}
}

// Snapshot returns the current counts.
func (s *stats) Snapshot() statsSnapshot {
	return statsSnapshot{
		Attempts: s.attempts.Load(), Won: s.won.Load(), Contended: s.contended.Load(),
		Unreachable: s.unreachable.Load(), Cancelled: s.cancelled.Load(), Expired: s.expired.Load(),
		NodeErrors: s.nodeErrors.Load(), Extensions: s.extensions.Load(),
		Released: s.released.Load(), Lost: s.lost.Load(),
	}
}

// failedNodes returns the results of qe's nodes whose request failed.
func failedNodes(qe *redlock.QuorumError) []redlock.NodeResult {
	if qe == nil {
		return nil
	}
	var out []redlock.NodeResult
	for _, n := range qe.Nodes {
		if n.Status == "failed" {
			out = append(out, n)
		}
	}
	return out
}

// lockKeys returns the keys of a lock over several keys.
func lockKeys(l *redlock.Lock) []string { return strings.Split(l.Key(), ",") }

// deadlineOf returns the instant at which l's Validity reaches zero.
func deadlineOf(l *redlock.Lock) time.Time { return time.Now().Add(l.Validity()) }

// holderOf returns who holds the key as the nodes that refused qe's
// acquire said: the metadata most of them reported, the longest TTL any
// reported for it, and whether any did.
func holderOf(qe *redlock.QuorumError) (meta string, ttl time.Duration, ok bool) {
	count := map[string]int{}
	best := -1
	for _, n := range qe.Nodes {
		if n.Status != "taken" || (n.Holder == "" && n.HolderTTL == 0) {
			continue
		}
		count[n.Holder]++
		if c := count[n.Holder]; c > best || (c == best && n.Holder < meta) {
			meta, best = n.Holder, c
		}
	}
	if best < 0 {
		return "", 0, false
	}
	ttl = -1
	for _, n := range qe.Nodes {
		if n.Status == "taken" && n.Holder == meta && n.HolderTTL > ttl {
			ttl = n.HolderTTL
		}
	}
	return meta, ttl, true
}
