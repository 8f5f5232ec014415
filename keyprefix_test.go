package redlock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

const prefix = "app1:"

func TestKeyPrefixInvalid(t *testing.T) {
	_, cs := cluster(t, 1)
	for _, p := range []string{"{app1}:", "app1}", "a{"} {
		_, err := redlock.New(cs, redlock.WithKeyPrefix(p))
		require.ErrorIs(t, err, redlock.ErrInvalid, "prefix %q", p)
	}
	rl := newClient(t, cs, redlock.WithKeyPrefix(prefix))
	_, err := rl.TryLock(context.Background(), key(t), time.Second, redlock.WithKeyPrefix("other:"))
	require.ErrorIs(t, err, redlock.ErrInvalid, "a call may not change the prefix")
	l, err := rl.TryLock(context.Background(), key(t), time.Second, redlock.WithKeyPrefix(prefix))
	require.NoError(t, err, "a call may repeat the client's prefix")
	require.NoError(t, l.Unlock(context.Background()))
}

// TestKeyPrefixOnNodes: the nodes hold the prefixed key and fence
// counter; the API names the caller's key.
func TestKeyPrefixOnNodes(t *testing.T) {
	_, cs := cluster(t, 3)
	rl := newClient(t, cs, redlock.WithKeyPrefix(prefix), redlock.WithFencing())
	ctx := context.Background()
	k := key(t)

	l, err := rl.TryLock(ctx, k, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, k, l.Key())
	require.Equal(t, []string{k}, l.Keys())
	require.Positive(t, l.Fence())
	for i, c := range cs {
		eventually(t, 5*time.Second, func() bool { return get(t, c, prefix+k) == l.Token() },
			"node %d: want %q holding our token", i, prefix+k)
		eventually(t, 5*time.Second, func() bool {
			return get(t, c, redlock.FenceKey(prefix+k)) == strconv.FormatInt(l.Fence(), 10)
		}, "node %d: want the fence counter under %q", i, redlock.FenceKey(prefix+k))
		require.Empty(t, get(t, c, k), "node %d: the unprefixed key", i)
		require.Empty(t, get(t, c, redlock.FenceKey(k)), "node %d: the unprefixed counter", i)
	}
	require.NoError(t, l.Extend(ctx, 10*time.Second))
	require.NoError(t, l.Unlock(ctx))
	for i, c := range cs {
		eventually(t, 5*time.Second, func() bool { return get(t, c, prefix+k) == "" },
			"node %d: want %q deleted after Unlock", i, prefix+k)
	}

	// A contended attempt names the caller's key, and its clean-up
	// releases the prefixed key it won.
	holdForeign(t, cs[0], prefix+k, 10*time.Second)
	holdForeign(t, cs[1], prefix+k, 10*time.Second)
	_, err = rl.TryLock(ctx, k, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrContended)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, []string{k}, qe.Keys)
	eventually(t, 5*time.Second, func() bool { return get(t, cs[2], prefix+k) == "" },
		"node 2: want the lost attempt's grant released")

	// Several keys: every one is prefixed.
	ks := []string{key(t), key(t)}
	ml, err := rl.TryLockKeys(ctx, ks, 10*time.Second)
	require.NoError(t, err)
	for i, c := range cs {
		for _, k := range ks {
			eventually(t, 5*time.Second, func() bool { return get(t, c, prefix+k) == ml.Token() },
				"node %d: want %q holding our token", i, prefix+k)
		}
	}
	require.NoError(t, ml.Unlock(ctx))
}

// TestKeyPrefixHandoff: Unlock announces on prefix+ReleaseChannel(key),
// and a waiting Lock of a prefixed client wakes on it.
func TestKeyPrefixHandoff(t *testing.T) {
	_, cs := cluster(t, 3)
	handoff(t, newClient(t, cs, redlock.WithKeyPrefix(prefix)), cs, key(t))
}

// handoff checks, with rl as holder and waiter, that a Lock waiting for k
// wakes on the holder's Unlock long before its retry delay, and that the
// release is announced on prefix+ReleaseChannel(k). admins subscribe.
func handoff(t *testing.T, rl *redlock.Client, admins []redis.UniversalClient, k string) {
	t.Helper()
	ctx := context.Background()
	sub := admins[0].(*redis.Client).Subscribe(ctx, prefix+redlock.ReleaseChannel(k))
	t.Cleanup(func() { _ = sub.Close() })
	_, err := sub.Receive(ctx) // the subscription's confirmation
	require.NoError(t, err)

	a, err := rl.TryLock(ctx, k, 30*time.Second)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		// Only the hand-off can wake it within the test's bounds.
		b, err := rl.Lock(lctx, k, 10*time.Second, redlock.WithRetryDelay(time.Minute))
		if err == nil {
			err = b.Unlock(ctx)
		}
		got <- err
	}()
	for i, c := range admins {
		eventually(t, 5*time.Second, func() bool {
			n, err := c.PubSubNumPat(ctx).Result()
			return err == nil && n > 0
		}, "node %d: want the waiter's pattern subscription", i)
	}
	require.NoError(t, a.Unlock(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("want the waiter woken by the release")
	}
	msg, err := sub.ReceiveTimeout(ctx, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, prefix+redlock.ReleaseChannel(k), msg.(*redis.Message).Channel)
}

// TestKeyPrefixACL: a user confined to the prefix (~app1:* &app1:*)
// locks and unlocks; with &app1:redlock:release:*, which a pattern
// subscription needs literally, the hand-off works too.
func TestKeyPrefixACL(t *testing.T) {
	nodes := redistest.NodesWith(t, 3, redisnode.Options{Args: []string{"--requirepass", "admin-pw"}})
	admins := redistest.Clients(t, nodes)
	cmds := []string{"-@all", "+evalsha", "+eval", "+get", "+set", "+pexpire", "+del", "+publish", "+psubscribe", "+punsubscribe", "+ping"}
	aclSetUser(t, admins, "app1", append([]string{"on", ">secret", "~app1:*", "resetchannels", "&app1:*"}, cmds...)...)
	aclSetUser(t, admins, "app1sub", append([]string{"on", ">secret", "~app1:*", "resetchannels", "&app1:redlock:release:*"}, cmds...)...)
	ctx := context.Background()

	t.Run("lock and unlock", func(t *testing.T) {
		cs := userClients(t, nodes, "app1", "secret")
		rl := newClient(t, cs, redlock.WithKeyPrefix(prefix), redlock.WithFencing())
		k := key(t)
		for range 2 {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			l, err := rl.Lock(lctx, k, 10*time.Second)
			cancel()
			require.NoError(t, err)
			require.NoError(t, l.Extend(ctx, 10*time.Second))
			require.NoError(t, l.Unlock(ctx))
		}
		// The same user without the prefix may not touch the key.
		_, err := newClient(t, cs).TryLock(ctx, k, 10*time.Second)
		requireAllFailed(t, err, "NOPERM")
	})

	t.Run("hand-off", func(t *testing.T) {
		cs := userClients(t, nodes, "app1sub", "secret")
		handoff(t, newClient(t, cs, redlock.WithKeyPrefix(prefix)), admins, key(t))
	})
}

// TestFamilyKeyPrefix: with WithKeyPrefix every key the family writes
// is under the prefix, and hand-off still wakes waiters.
func TestFamilyKeyPrefix(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients, redlock.WithKeyPrefix("app1:"))
	ctx := context.Background()
	root := key(t)
	var held []*redlock.Lock
	for _, op := range familyOps(rl, root) {
		l, err := op(ctx, 0)
		require.NoError(t, err)
		held = append(held, l)
	}
	for _, k := range nodeKeys(t, clients, root) {
		_, name, _ := strings.Cut(k, ": ")
		require.True(t, strings.HasPrefix(name, "app1:"), "want every key under the prefix, got %q", name)
	}
	// A writer waiting on the read lock wakes on the reader's release.
	r := held[0]
	for _, l := range held {
		if strings.HasSuffix(l.Key(), "-r0") {
			r = l
		}
	}
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		w, err := rl.Lock(wctx, r.Key(), time.Second, redlock.WithRetryDelay(5*time.Second))
		if err == nil {
			err = w.Unlock(ctx)
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	for _, l := range held {
		require.NoError(t, l.Unlock(ctx))
	}
	require.NoError(t, <-got)
	require.Less(t, time.Since(start), 2*time.Second, "want the writer woken by the release under the prefix")
	eventually(t, 2*time.Second, func() bool { return len(nodeKeys(t, clients, root)) == 0 },
		"want nothing left on the nodes, got %v", nodeKeys(t, clients, root))
}
