package redlock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
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

// counter returns key's fence counter on c, 0 when absent.
func counter(t testing.TB, c redis.UniversalClient, key string) int64 {
	t.Helper()
	v := get(t, c, redlock.KeyName("fence", key))
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err)
	return n
}

func setCounters(t testing.TB, clients []redis.UniversalClient, key string, vals ...int64) {
	t.Helper()
	for i, v := range vals {
		require.NoError(t, clients[i].Set(context.Background(), redlock.KeyName("fence", key), v, 0).Err())
	}
}

// TestFenceSkewedCounters starts from counters {100, 5, 7, 6, 8}, the
// issue's counter-example. A wins on nodes {0,1,2} and B, later, on
// {2,3,4}. The single-round design (max of INCR over the quorum) would
// give A 101 and B 9; ours raises A's token on A's quorum, which B's
// quorum meets at node 2, so B's token is larger.
func TestFenceSkewedCounters(t *testing.T) {
	_, clients := cluster(t, 5)
	ctx := context.Background()
	k := key(t)
	c := newClient(t, clients, redlock.WithFencing())
	setCounters(t, clients, k, 100, 5, 7, 6, 8)

	holdForeign(t, clients[3], k, time.Minute)
	holdForeign(t, clients[4], k, time.Minute)
	a, err := c.TryLock(ctx, k, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, int64(101), a.Fence(), "1 + the largest counter of A's quorum")
	for i := 0; i < 3; i++ {
		require.Equal(t, int64(101), counter(t, clients[i], k), "node %d: A's token is raised on its quorum", i)
	}
	require.Equal(t, int64(6), counter(t, clients[3], k), "node 3 refused A and keeps its counter")
	require.NoError(t, a.Unlock(ctx))

	for _, i := range []int{3, 4} {
		require.NoError(t, clients[i].Del(ctx, k).Err())
	}
	holdForeign(t, clients[0], k, time.Minute)
	holdForeign(t, clients[1], k, time.Minute)
	b, err := c.TryLock(ctx, k, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, int64(102), b.Fence(), "B's quorum {2,3,4} meets A's at node 2")
	require.Greater(t, b.Fence(), a.Fence())
	for i := 2; i < 5; i++ {
		require.Equal(t, int64(102), counter(t, clients[i], k), "node %d", i)
	}
	require.NoError(t, b.Unlock(ctx))

	// Counters never expire.
	for i, cl := range clients {
		require.Equal(t, time.Duration(-1), cl.TTL(ctx, redlock.KeyName("fence", k)).Val(), "node %d: the counter has a TTL", i)
	}

	// Without WithFencing nothing is counted and Fence is 0.
	for _, cl := range clients[:2] {
		require.NoError(t, cl.Del(ctx, k).Err())
	}
	plain, err := newClient(t, clients).TryLock(ctx, k, 10*time.Second)
	require.NoError(t, err)
	require.Zero(t, plain.Fence())
	require.NoError(t, plain.Unlock(ctx))
	require.Equal(t, int64(102), counter(t, clients[2], k))
	var nilLock *redlock.Lock
	require.Zero(t, nilLock.Fence())
}

// TestFenceMultiKey: every key of a multi-key lock is fenced, so its token
// exceeds that of every earlier holder of any of its keys.
func TestFenceMultiKey(t *testing.T) {
	_, clients := cluster(t, 3)
	ctx := context.Background()
	c := newClient(t, clients, redlock.WithFencing())
	k1, k2 := key(t), key(t)
	setCounters(t, clients, k2, 50, 50, 50)
	l, err := c.TryLock(ctx, k1, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, int64(1), l.Fence())
	require.NoError(t, l.Unlock(ctx))

	both, err := c.TryLockKeys(ctx, []string{k1, k2}, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, int64(51), both.Fence(), "above k2's earlier holders too")
	require.NoError(t, both.Unlock(ctx))

	l, err = c.TryLock(ctx, k1, 10*time.Second)
	require.NoError(t, err)
	require.Greater(t, l.Fence(), both.Fence(), "k1's next holder is above the multi-key holder")
	require.NoError(t, l.Unlock(ctx))
}

// failScript is a go-redis hook that makes one script fail on a node, as
// a node that errors or drops the connection would. The script is the
// one whose source contains src (a Lua file of the package, which the
// library may wrap): EVAL shows the source, and the SHA-1 of every such
// source seen names it in EVALSHA. A script never sent as EVAL through
// the hook is not cached on the node, so its EVALSHA fails with NOSCRIPT
// and is sent again as EVAL.
type failScript struct {
	src   string
	shas  sync.Map // SHA-1 (hex) of each source seen -> true
	armed atomic.Bool
	n     atomic.Int64 // failures injected
}

// failing returns a failScript for src that knows its SHA-1 before
// any EVAL: it fails EVALSHA calls on nodes that already cache src.
func failing(src any) *failScript {
	h := &failScript{src: src.(string)}
	sum := sha1.Sum([]byte(h.src))
	h.shas.Store(hex.EncodeToString(sum[:]), true)
	return h
}

func (h *failScript) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook fails the script's commands in a pipeline (a
// node's queued requests go out in one) and sends the others.
func (h *failScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		rest := cmds[:0:0]
		for _, cmd := range cmds {
			if !h.fail(cmd) {
				rest = append(rest, cmd)
			}
		}
		if len(rest) == 0 {
			return nil
		}
		return next(ctx, rest)
	}
}

func (h *failScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.fail(cmd) {
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

// fail fails cmd when it runs the script and h is armed.
func (h *failScript) fail(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	arg, _ := args[1].(string)
	if name, _ := args[0].(string); strings.EqualFold(name, "eval") && strings.Contains(arg, h.src) {
		sum := sha1.Sum([]byte(arg))
		arg = hex.EncodeToString(sum[:])
		h.shas.Store(arg, true)
	}
	if _, ours := h.shas.Load(arg); ours && h.armed.Load() {
		h.n.Add(1)
		cmd.SetErr(errors.New("injected failure"))
		return true
	}
	return false
}

// TestFenceRaiseRoundNeedsQuorum: when the second round cannot raise the
// counters on a quorum (it fails on 3 of 5 nodes), the acquisition fails
// and everything it took is released.
func TestFenceRaiseRoundNeedsQuorum(t *testing.T) {
	nodes := redistest.Nodes(t, 5)
	src, err := os.ReadFile("internal/wire/scripts/fence/raise.lua")
	require.NoError(t, err)
	hook := &failScript{src: string(src)}
	clients := redistest.Clients(t, nodes)
	for _, cl := range clients[:3] {
		cl.AddHook(hook)
	}
	ctx := context.Background()
	k := key(t)
	c := newClient(t, clients, redlock.WithFencing())
	setCounters(t, clients, k, 100, 5, 7, 6, 8) // any quorum disagrees: a raise round is needed
	hook.armed.Store(true)
	_, err = c.TryLock(ctx, k, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrUnreachable)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, "fence", qe.Op)
	for i, cl := range clients {
		eventually(t, 2*time.Second, func() bool { return get(t, cl, k) == "" }, "node %d keeps the key of a failed fenced acquisition", i)
	}

	hook.armed.Store(false)
	l, err := c.TryLock(ctx, k, 10*time.Second)
	require.NoError(t, err)
	raised := 0
	for _, cl := range clients {
		if counter(t, cl, k) >= l.Fence() {
			raised++
		}
	}
	require.GreaterOrEqual(t, raised, 3, "token %d is not on a majority", l.Fence())
	require.NoError(t, l.Unlock(ctx))
}

// memDir returns a directory on tmpfs when there is one, else a temporary
// one, removed when the test ends. A killed redis-server loses nothing it
// wrote (the page cache survives the process), so tmpfs keeps the data
// across Kill and Restart like a disk, without the fsync cost.
func memDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "redlock-test-*")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// TestFenceMonotonicWithRestarts: 2000 acquisitions by 2 contending
// clients while minority nodes are killed and restarted (appendfsync
// always: data kept). Every holder, while its lock is valid, checks that
// its token exceeds the previous holder's.
func TestFenceMonotonicWithRestarts(t *testing.T) {
	t.Parallel()
	nodes := redistest.NodesWith(t, 5, redisnode.Options{AppendOnly: true, Dir: memDir(t)})
	clients := redistest.Clients(t, nodes)
	k := key(t)
	const workers, total = 2, 2000
	var (
		mu       sync.Mutex
		last     int64
		acquired atomic.Int64
		skipped  atomic.Int64 // tokens above their predecessor's + 1 (lost attempts and raises)
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for w := 0; w < workers; w++ {
		c := newClient(t, clients, redlock.WithFencing(), redlock.WithRetryDelay(2*time.Millisecond), redlock.WithNodeTimeout(100*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for acquired.Load() < total && ctx.Err() == nil {
				l, err := c.Lock(ctx, k, 2*time.Second)
				if err != nil {
					if ctx.Err() == nil {
						assert.NoError(t, err)
					}
					return
				}
				if l.Validity() > 0 {
					mu.Lock()
					if l.Fence() <= last {
						t.Errorf("holder %d: token %d after %d", acquired.Load(), l.Fence(), last)
					}
					if l.Fence() > last+1 {
						skipped.Add(1)
					}
					last = l.Fence()
					mu.Unlock()
					acquired.Add(1)
				}
				_ = l.Unlock(ctx) // may miss a quorum while nodes are down: the key expires
			}
		}()
	}

	// Chaos, paced by progress: kill a random minority, let 150
	// acquisitions pass, restart it, let 150 more pass; 5 times.
	rng := rand.New(rand.NewPCG(1, 2))
	for cycle := 0; cycle < 5; cycle++ {
		at := acquired.Load()
		down := rng.Perm(5)[:1+rng.IntN(2)]
		before := make(map[int]int64)
		for _, i := range down {
			before[i] = counter(t, redistest.Client(t, nodes[i]), k)
			require.NoError(t, nodes[i].Kill())
		}
		eventually(t, time.Minute, func() bool { return acquired.Load() >= at+150 }, "no progress with nodes %v down", down)
		for _, i := range down {
			require.NoError(t, nodes[i].Restart())
			// A fresh client: the workers' one may still be backing off
			// from the refused dials.
			require.GreaterOrEqual(t, counter(t, redistest.Client(t, nodes[i]), k), before[i], "node %d lost its counter in the restart", i)
		}
		at = acquired.Load()
		eventually(t, time.Minute, func() bool { return acquired.Load() >= at+150 }, "no progress after restarting %v", down)
	}
	wg.Wait()
	require.GreaterOrEqual(t, acquired.Load(), int64(total))
	t.Logf("%d holders, last token %d, %d tokens above their predecessor's + 1", acquired.Load(), last, skipped.Load())
}

// BenchmarkTryLockUnlockFenced measures TryLock+Unlock on 5 local nodes
// without and with fencing. "synced" is the usual case, where the
// counters agree and fencing needs no second round; "skewed" forces the
// raise round on every acquisition by making every node's counter differ.
func BenchmarkTryLockUnlockFenced(b *testing.B) {
	clients := benchClients(b, 5)
	ctx := context.Background()
	run := func(b *testing.B, c *redlock.Client, skew bool) {
		k := key(b)
		for b.Loop() {
			if skew {
				b.StopTimer()
				for i := 1; i < len(clients); i++ { // all differ: every quorum disagrees
					require.NoError(b, clients[i].IncrBy(ctx, redlock.KeyName("fence", k), int64(i)).Err())
				}
				b.StartTimer()
			}
			l, err := c.TryLock(ctx, k, 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("fencing=off", func(b *testing.B) { run(b, newClient(b, clients), false) })
	b.Run("fencing=on,synced", func(b *testing.B) { run(b, newClient(b, clients, redlock.WithFencing()), false) })
	b.Run("fencing=on,skewed", func(b *testing.B) { run(b, newClient(b, clients, redlock.WithFencing()), true) })
}

// TestFencedSet: the resource accepts only increasing tokens, and says
// which one it has seen.
func TestFencedSet(t *testing.T) {
	_, clients := cluster(t, 1)
	db := clients[0]
	ctx := context.Background()
	k := key(t)
	require.NoError(t, redlock.FencedSet(ctx, db, k, 5, "five"))
	for _, stale := range []int64{5, 4, 1} {
		err := redlock.FencedSet(ctx, db, k, stale, "stale")
		require.ErrorIs(t, err, redlock.ErrStaleFence)
		require.ErrorContains(t, err, fmt.Sprintf("refused token %d, has seen 5", stale))
	}
	require.Equal(t, "five", db.HGet(ctx, k, "value").Val())
	require.NoError(t, redlock.FencedSet(ctx, db, k, 6, []byte("six")))
	require.Equal(t, "six", db.HGet(ctx, k, "value").Val())
	require.Equal(t, "6", db.HGet(ctx, k, "fence").Val())

	require.ErrorIs(t, redlock.FencedSet(ctx, db, k, 0, "x"), redlock.ErrInvalid, "a lock without fencing has token 0")
	require.ErrorIs(t, redlock.FencedSet(ctx, db, "", 7, "x"), redlock.ErrInvalid)
	require.ErrorIs(t, redlock.FencedSet(ctx, nil, k, 7, "x"), redlock.ErrInvalid)
	require.Equal(t, "six", db.HGet(ctx, k, "value").Val())
}
