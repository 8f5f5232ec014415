package redlock_test

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/stretchr/testify/require"
)

// TestQuorumSubsets walks every assignment of the states down, held by
// another token, and healthy over 5 real nodes (3^5 = 243 cases): the lock
// is won if and only if at least 3 nodes are healthy, a lost attempt
// leaves none of our keys, the reason names contention or outage, and
// neither Lock nor Unlock touches another holder's key.
func TestQuorumSubsets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	everyNodeState(t, 5, func(c redis.UniversalClient, k string) {
		holdForeign(t, c, k, time.Minute)
	}, func(sc subsetCase) {
		name, k, states, live := sc.name, sc.key, sc.states, sc.live
		c := newClient(t, sc.clients, redlock.WithNodeTimeout(time.Second))
		l, err := c.TryLock(ctx, k, 10*time.Second)
		if sc.healthy >= 3 {
			require.NoError(t, err, name)
			require.Positive(t, l.Validity(), name)
			holding := 0
			for i, s := range states {
				if s == nodeHealthy && get(t, live[i], k) == l.Token() {
					holding++
				}
			}
			require.GreaterOrEqual(t, holding, 3, "%s: a won lock is held on a quorum", name)
			require.NoError(t, l.Unlock(ctx), name)
		} else {
			qe := requireNotObtained(t, l, err, name)
			require.Len(t, qe.Nodes, 5, name)
			// The round decides on the replies it has: a majority
			// of refusals is contention, of failures an outage, a mix
			// is both.
			if sc.taken >= 3 {
				require.ErrorIs(t, err, redlock.ErrContended, name)
			}
			if sc.down >= 3 {
				require.ErrorIs(t, err, redlock.ErrUnreachable, name)
			}
			if sc.down == 0 {
				require.NotErrorIs(t, err, redlock.ErrUnreachable, name)
			}
			if sc.taken == 0 {
				require.NotErrorIs(t, err, redlock.ErrContended, name)
			}
			for _, r := range qe.Nodes {
				switch states[r.Node] {
				case nodeDown:
					if r.Status != "pending" {
						require.Equal(t, "failed", r.Status, "%s: %v", name, r)
						require.Error(t, r.Err, name)
					}
				case nodeTaken:
					if r.Status != "pending" {
						require.Equal(t, "taken", r.Status, "%s: %v", name, r)
					}
				}
			}
		}
		for i, s := range states {
			switch s {
			case nodeHealthy: // released by Unlock or the lost attempt, late replies too
				eventually(t, 2*time.Second, func() bool { return get(t, live[i], k) == "" }, "%s: node %d keeps a key", name, i)
			case nodeTaken: // never touched
				require.Equal(t, foreignToken, get(t, live[i], k), "%s: node %d lost the other holder's key", name, i)
			}
		}
	})
}

// TestFirstRoundNeverReturnsExpired: a client's first round waits up to
// firstContactTimeout for a stopped node's first contact after the quorum
// was won; with a 150ms TTL the lock has expired by then. It must be
// refused with ErrExpired (and released), never returned with
// Validity <= 0.
func TestFirstRoundNeverReturnsExpired(t *testing.T) {
	t.Parallel()
	nodes, clients := cluster(t, 3)
	require.NoError(t, nodes[2].Pause())
	t.Cleanup(func() { _ = nodes[2].Resume() })
	rl, err := redlock.New(clients) // default options: the first round waits for first contact
	require.NoError(t, err)
	t.Cleanup(func() { _ = rl.Close() })
	k := key(t)
	l, err := rl.TryLock(context.Background(), k, 150*time.Millisecond)
	if err == nil {
		v := l.Validity()
		_ = l.Unlock(context.Background())
		t.Fatalf("want ErrExpired or a lock with Validity > 0, got a lock with Validity %v", v)
	}
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrExpired)
	for i, c := range clients[:2] {
		require.Empty(t, get(t, c, k), "node %d keeps the key of an expired win", i)
	}
}

// TestCancelledWinLeavesNothing cancels TryLock at random instants
// around its decision, on 5 nodes, many times; wins that stand are
// unlocked. Afterwards no key may be left: a win cut short by ctx must
// also release the grants that arrive between the decision and the
// cancellation being seen (the 4th and 5th replies come right after the
// 3rd, which decides).
func TestCancelledWinLeavesNothing(t *testing.T) {
	t.Parallel()
	_, clients := cluster(t, 5)
	rl := newClient(t, clients)
	tries := 3000
	if testing.Short() {
		tries = 500
	}
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	keys := make([]string, tries)
	for i := range keys {
		keys[i] = key(t)
	}
	won, cut := cancelAround(t, rng, tries, "TryLock", func(ctx context.Context, i int) (*redlock.Lock, error) {
		return rl.TryLock(ctx, keys[i], 30*time.Second)
	})
	t.Logf("seed %d: %d attempts cut by cancellation, %d won", seed, cut, won)
	eventually(t, 5*time.Second, func() bool { return leftKeys(t, clients, keys) == "" },
		"seed %d: want no key left after cancelled wins, got %s", seed, leftKeys(t, clients, keys))
}

// familyOps are one acquisition of each kind, on names under root.
func familyOps(rl *redlock.Client, root string) map[string]func(ctx context.Context, i int) (*redlock.Lock, error) {
	return map[string]func(ctx context.Context, i int) (*redlock.Lock, error){
		"path": func(ctx context.Context, i int) (*redlock.Lock, error) {
			return rl.TryLockPath(ctx, fmt.Sprintf("%s/p/%d/x", root, i), 30*time.Second)
		},
		"read": func(ctx context.Context, i int) (*redlock.Lock, error) {
			return rl.TryRLock(ctx, fmt.Sprintf("%s-r%d", root, i), 30*time.Second)
		},
		"permit": func(ctx context.Context, i int) (*redlock.Lock, error) {
			return rl.TryAcquire(ctx, fmt.Sprintf("%s-s%d", root, i), 2, 30*time.Second)
		},
	}
}

// TestFamilyCancelledLeavesNothing cancels acquisitions of every kind at
// random instants around their decision, with 30s TTLs; wins that stand
// are unlocked. Afterwards no key, intention record, readers entry or
// permit may be left on any node.
func TestFamilyCancelledLeavesNothing(t *testing.T) {
	_, clients := cluster(t, 5)
	rl := newClient(t, clients)
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	root := key(t)
	tries := 600
	if testing.Short() {
		tries = 150
	}
	var won, cut int64
	for name, op := range familyOps(rl, root) {
		w, c := cancelAround(t, rng, tries, name, func(ctx context.Context, i int) (*redlock.Lock, error) {
			return op(ctx, i%20)
		})
		won, cut = won+w, cut+c
	}
	t.Logf("seed %d: %d won, %d cut or refused", seed, won, cut)
	eventually(t, 5*time.Second, func() bool { return len(nodeKeys(t, clients, root)) == 0 },
		"seed %d: want nothing left on the nodes, got %v", seed, nodeKeys(t, clients, root))
}

// failReleases is a go-redis hook that fails the first n release
// requests without sending them: a release lost before it reaches the
// node, as under load with a tiny node timeout. A release is a script
// whose source says "compare-and-delete" (release.lua, release_one.lua):
// EVAL shows the source, and the SHA-1 of each such source seen names it
// in EVALSHA. A release never sent as EVAL through the hook is not cached
// on the node, so its EVALSHA fails with NOSCRIPT and is sent as EVAL.
type failReleases struct {
	shas sync.Map // SHA-1 (hex) of each release source seen -> true
	left atomic.Int64
}

func (f *failReleases) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failReleases) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.isRelease(cmd) && f.left.Add(-1) >= 0 {
			err := errors.New("test: release dropped before it reached the node")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (f *failReleases) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (f *failReleases) isRelease(cmd redis.Cmder) bool {
	a := cmd.Args()
	if len(a) < 2 {
		return false
	}
	name, _ := a[0].(string)
	arg, _ := a[1].(string)
	if strings.EqualFold(name, "eval") && strings.Contains(arg, "compare-and-delete") {
		sum := sha1.Sum([]byte(arg))
		f.shas.Store(hex.EncodeToString(sum[:]), true)
		return true
	}
	_, ok := f.shas.Load(arg)
	return ok && strings.EqualFold(name, "evalsha")
}

// leftKeys describes which of keys remain on which node, "" for none.
func leftKeys(t testing.TB, clients []redis.UniversalClient, keys []string) string {
	t.Helper()
	var out []string
	for i, c := range clients {
		for _, k := range keys {
			if v := get(t, c, k); v != "" {
				out = append(out, "node "+string(rune('0'+i))+": "+k+"="+v)
			}
		}
	}
	return strings.Join(out, "; ")
}

// nodeAnswer is an observer for one call's options (and the Lock it
// returns), and a channel that gets node i's first answer (or failure)
// to a request of op.
func nodeAnswer(i int, op string) (redlock.SharedOption, <-chan redlock.Event) {
	ch := make(chan redlock.Event, 1)
	var once sync.Once
	return redlock.WithObserver(func(e redlock.Event) {
		if e.Kind == "node" && e.Node == i && e.Op == op {
			once.Do(func() { ch <- e })
		}
	}), ch
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
