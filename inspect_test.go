package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
)

// TestMetadataLivesAndDiesWithTheLock pins where metadata is stored: in
// the lock's value, after its token and a NUL byte, kept by Extend and
// auto-extension, removed by Unlock, with no other key written.
func TestMetadataLivesAndDiesWithTheLock(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	k := key(t)
	const meta = "host-a pid 4242"
	l, err := rl.TryLock(ctx, k, 5*time.Second, redlock.WithMetadata(meta))
	require.NoError(t, err)
	require.NotContains(t, l.Token(), "\x00", "want Token without the metadata")
	// TryLock and Extend return at a quorum: the last node is waited for.
	for i, c := range clients {
		eventually(t, 5*time.Second, func() bool { return get(t, c, k) == l.Token()+"\x00"+meta },
			"node %d: want the token and the metadata", i+1)
		require.Equal(t, int64(1), c.DBSize(ctx).Val(), "node %d: want only the lock's key", i+1)
	}
	require.NoError(t, l.Extend(ctx, 6*time.Second))
	require.NoError(t, l.AutoExtend(ctx))
	for i, c := range clients {
		require.Equal(t, l.Token()+"\x00"+meta, get(t, c, k), "node %d after Extend", i+1)
	}
	require.NoError(t, l.Unlock(ctx))
	// Unlock returns at a quorum; the last node's release lands after.
	for i, c := range clients {
		eventually(t, 5*time.Second, func() bool { return c.DBSize(ctx).Val() == 0 }, "node %d: want nothing left after Unlock", i+1)
	}
}

// TestMetadataDefaultFromNewAndPerCall pins that New's WithMetadata is
// every lock's default and a call's replaces it, on every kind.
func TestMetadataDefaultFromNewAndPerCall(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients, redlock.WithMetadata("default"))
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		acquire func(k string, opts ...redlock.LockOption) (*redlock.Lock, error)
		inspect func(k string) string
	}{
		{"key", func(k string, o ...redlock.LockOption) (*redlock.Lock, error) {
			return rl.TryLock(ctx, k, time.Minute, o...)
		}, func(k string) string { return k }},
		{"read", func(k string, o ...redlock.LockOption) (*redlock.Lock, error) {
			return rl.TryRLock(ctx, k, time.Minute, o...)
		}, func(k string) string { return k }},
		{"permit", func(k string, o ...redlock.LockOption) (*redlock.Lock, error) {
			return rl.TryAcquire(ctx, k, 3, time.Minute, o...)
		}, func(k string) string { return k }},
		{"path", func(k string, o ...redlock.LockOption) (*redlock.Lock, error) {
			return rl.TryLockPath(ctx, k+"/a", time.Minute, o...)
		}, func(k string) string { return redlock.KeyName("path", k+"/a") }},
		{"fenced", func(k string, o ...redlock.LockOption) (*redlock.Lock, error) {
			return rl.TryLock(ctx, k, time.Minute, append(o, redlock.WithFencing())...)
		}, func(k string) string { return k }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, want := range []string{"default", "per call"} {
				k := key(t)
				var opts []redlock.LockOption
				if want != "default" {
					opts = append(opts, redlock.WithMetadata(want))
				}
				l, err := tc.acquire(k, opts...)
				require.NoError(t, err)
				h, err := rl.Inspect(ctx, tc.inspect(k))
				require.NoError(t, err)
				require.Equal(t, "held", h.State)
				require.Len(t, h.Holders, 1)
				require.Equal(t, want, h.Metadata)
				require.NoError(t, l.Unlock(ctx))
				h, err = rl.Inspect(ctx, tc.inspect(k))
				require.NoError(t, err)
				require.Equal(t, "free", h.State, "want free after Unlock")
			}
		})
	}
}

// TestMetadataBound pins the bound: MaxMetadata bytes of any value are
// kept exactly, one more is ErrInvalid; a token with a NUL byte is
// ErrInvalid.
func TestMetadataBound(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	odd := make([]byte, 4096)
	for i := range odd {
		odd[i] = byte(i * 7) // NUL, high bytes, invalid UTF-8
	}
	k := key(t)
	l, err := rl.TryLock(ctx, k, time.Minute, redlock.WithMetadata(string(odd)))
	require.NoError(t, err)
	h, err := rl.Inspect(ctx, k)
	require.NoError(t, err)
	require.Equal(t, string(odd), h.Metadata)
	require.NoError(t, l.Extend(ctx, time.Minute), "want Extend to see its own value with NUL bytes in its metadata")

	_, err = rl.TryLock(ctx, key(t), time.Minute, redlock.WithMetadata(string(odd)+"x"))
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = redlock.New(clients, redlock.WithMetadata(string(odd)+"x"))
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = rl.TryLock(ctx, key(t), time.Minute, redlock.WithToken("0123456789abcdef\x00x"))
	require.ErrorIs(t, err, redlock.ErrInvalid)

	// Another holder is refused and told who holds the key, even in odd
	// bytes.
	_, err = rl.TryLock(ctx, k, time.Minute)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	meta, _, ok := holderOf(qe)
	require.True(t, ok)
	require.Equal(t, string(odd), meta)
	require.NoError(t, l.Unlock(ctx))
}

// TestContentionErrorSaysWho pins that an acquisition lost to contention
// names the holder's metadata and its remaining TTL, for TryLock, a
// fenced TryLock, and Lock giving up at its deadline.
func TestContentionErrorSaysWho(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	for _, fenced := range []bool{false, true} {
		t.Run(fmt.Sprintf("fenced=%v", fenced), func(t *testing.T) {
			var opts []redlock.LockOption
			if fenced {
				opts = append(opts, redlock.WithFencing())
			}
			k := key(t)
			const ttl = 20 * time.Second
			l, err := rl.TryLock(ctx, k, ttl, append(opts, redlock.WithMetadata("host-a pid 4242"))...)
			require.NoError(t, err)
			defer func() { require.NoError(t, l.Unlock(ctx)) }()

			_, err = rl.TryLock(ctx, k, ttl, opts...)
			require.ErrorIs(t, err, redlock.ErrContended)
			require.Contains(t, err.Error(), "held by host-a pid 4242 for another ")
			var qe *redlock.QuorumError
			require.ErrorAs(t, err, &qe)
			meta, left, ok := holderOf(qe)
			require.True(t, ok)
			require.Equal(t, "host-a pid 4242", meta)
			require.True(t, left > 0 && left <= ttl, "want 0 < TTL <= %v, got %v", ttl, left)
			for _, n := range qe.Nodes {
				require.NotContains(t, fmt.Sprint(n), l.Token(), "want no token in a node's result")
			}
			require.NotContains(t, err.Error(), l.Token())

			wctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
			defer cancel()
			_, err = rl.Lock(wctx, k, ttl, opts...)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Contains(t, err.Error(), "held by host-a pid 4242 for another ")
		})
	}
	// A read lock refused by a writer, a path by an ancestor's holder:
	// the same.
	k := key(t)
	w, err := rl.TryLock(ctx, k, time.Minute, redlock.WithMetadata("writer w"))
	require.NoError(t, err)
	_, err = rl.TryRLock(ctx, k, time.Minute)
	require.ErrorIs(t, err, redlock.ErrContended)
	require.Contains(t, err.Error(), "held by writer w for another ")
	require.NoError(t, w.Unlock(ctx))
	p := key(t)
	a, err := rl.TryLockPath(ctx, p, time.Minute, redlock.WithMetadata("folder owner"))
	require.NoError(t, err)
	_, err = rl.TryLockPath(ctx, p+"/sub", time.Minute)
	require.ErrorIs(t, err, redlock.ErrContended)
	require.Contains(t, err.Error(), "held by folder owner for another ")
	require.NoError(t, a.Unlock(ctx))

	// No metadata: the holder is "another owner", with its TTL.
	k = key(t)
	holdForeign(t, clients[0], k, time.Minute)
	holdForeign(t, clients[1], k, time.Minute)
	_, err = rl.TryLock(ctx, k, time.Second)
	require.ErrorIs(t, err, redlock.ErrContended)
	require.Contains(t, err.Error(), "held by another owner for another ")
}

// TestInspectFreeHeldAndFence pins Inspect's summary of a key lock: free,
// then held with its metadata, a TTL no longer than a quorum guarantees,
// and the fencing token, never the token.
func TestInspectFreeHeldAndFence(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	k := key(t)
	h, err := rl.Inspect(ctx, k)
	require.NoError(t, err)
	require.Equal(t, "free", h.State)
	require.Empty(t, h.Holders)
	require.Len(t, h.Nodes, 3)

	const ttl = 10 * time.Second
	l, err := rl.TryLock(ctx, k, ttl, redlock.WithFencing(), redlock.WithMetadata("job 7"))
	require.NoError(t, err)
	h, err = rl.Inspect(ctx, k)
	require.NoError(t, err)
	require.Equal(t, "held", h.State)
	require.Equal(t, "job 7", h.Metadata)
	require.Equal(t, l.Fence(), h.Fence)
	require.True(t, h.TTL > 0 && h.TTL <= ttl, "want 0 < TTL <= %v, got %v", ttl, h.TTL)
	for _, n := range h.Nodes {
		require.Equal(t, "key", n.Kind)
		require.NoError(t, n.Err)
	}
	require.NotContains(t, fmt.Sprintf("%+v", *h), l.Token(), "want no token in Inspect's result")
	require.NoError(t, l.Unlock(ctx))

	_, err = rl.Inspect(ctx, "")
	require.ErrorIs(t, err, redlock.ErrInvalid)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = rl.Inspect(cctx, k)
	require.ErrorIs(t, err, context.Canceled)
	var nilClient *redlock.Client
	_, err = nilClient.Inspect(ctx, k)
	require.ErrorIs(t, err, redlock.ErrInvalid)
}

// TestInspectNodesThatDisagree pins Inspect on five nodes that disagree:
// three hold the lock, one holds a stale key of another holder, one is
// down: held, by the quorum's holder, with each node's own answer. With
// too few answers, or a split, it says unknown or free.
func TestInspectNodesThatDisagree(t *testing.T) {
	nodes, clients := cluster(t, 5)
	rl := newClient(t, clients)
	ctx := context.Background()
	k := key(t)
	holdForeign(t, clients[3], k, 300*time.Millisecond) // a stale key, expiring
	require.NoError(t, nodes[4].Kill())
	l, err := rl.TryLock(ctx, k, time.Minute, redlock.WithMetadata("ours"))
	require.NoError(t, err)
	h, err := rl.Inspect(ctx, k)
	require.NoError(t, err)
	require.Equal(t, "held", h.State)
	require.Equal(t, "ours", h.Metadata)
	require.Len(t, h.Holders, 1)
	for i := range 3 {
		require.Len(t, h.Nodes[i].Holders, 1)
		require.Equal(t, h.Holders[0].ID, h.Nodes[i].Holders[0].ID, "node %d", i+1)
	}
	require.Len(t, h.Nodes[3].Holders, 1)
	require.NotEqual(t, h.Holders[0].ID, h.Nodes[3].Holders[0].ID, "want node 4's other holder")
	require.Error(t, h.Nodes[4].Err, "want node 5 down")

	// Lose one holding node's key: two of five hold it, one is down,
	// one another holder's: nobody is on a quorum, and the down node
	// could make ours three: unknown.
	require.NoError(t, clients[2].Del(ctx, k).Err())
	h, err = rl.Inspect(ctx, k)
	require.NoError(t, err)
	require.Equal(t, "unknown", h.State)
	require.Empty(t, h.Holders)

	// Lose another: one of five and one down: free.
	require.NoError(t, clients[1].Del(ctx, k).Err())
	h, err = rl.Inspect(ctx, k)
	require.NoError(t, err)
	require.Equal(t, "free", h.State)
	_ = l.Unlock(ctx)
}

// TestInspectReadersAndPermits pins Inspect of a read lock (its readers)
// and a semaphore (its permits, not its limit record).
func TestInspectReadersAndPermits(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	k := key(t)
	var locks []*redlock.Lock
	for _, who := range []string{"reader 1", "reader 2"} {
		l, err := rl.TryRLock(ctx, k, time.Minute, redlock.WithMetadata(who))
		require.NoError(t, err)
		locks = append(locks, l)
	}
	s := key(t)
	for _, who := range []string{"permit 1", "permit 2", "permit 3"} {
		l, err := rl.TryAcquire(ctx, s, 5, time.Minute, redlock.WithMetadata(who))
		require.NoError(t, err)
		locks = append(locks, l)
	}
	metas := func(h *redlock.Holding) []string {
		var out []string
		for _, x := range h.Holders {
			out = append(out, x.Metadata)
		}
		return out
	}
	h, err := rl.Inspect(ctx, k)
	require.NoError(t, err)
	require.Equal(t, "held", h.State)
	require.Equal(t, "read", h.Nodes[0].Kind)
	require.ElementsMatch(t, []string{"reader 1", "reader 2"}, metas(h))
	h, err = rl.Inspect(ctx, s)
	require.NoError(t, err)
	require.Equal(t, "held", h.State)
	require.Equal(t, "sem", h.Nodes[0].Kind)
	require.ElementsMatch(t, []string{"permit 1", "permit 2", "permit 3"}, metas(h))
	for _, l := range locks {
		require.NoError(t, l.Unlock(ctx))
	}
	for _, kk := range []string{k, s} {
		h, err = rl.Inspect(ctx, kk)
		require.NoError(t, err)
		require.Equal(t, "free", h.State)
	}
}

// TestInspectForeignValue pins that a value none of the library's kinds
// writes is reported as "other", held by nobody.
func TestInspectForeignValue(t *testing.T) {
	_, clients := cluster(t, 3)
	rl := newClient(t, clients)
	ctx := context.Background()
	k := key(t)
	for _, c := range clients {
		require.NoError(t, c.HSet(ctx, k, "f", "v").Err())
	}
	h, err := rl.Inspect(ctx, k)
	require.NoError(t, err)
	require.Equal(t, "other", h.Nodes[0].Kind)
	require.NotEqual(t, "held", h.State)
	require.False(t, strings.Contains(fmt.Sprint(h.State), "held"))
}

// BenchmarkInspect is one Inspect of a held key on 3 nodes: compare with
// BenchmarkTryLockUnlock (one acquire and one release round) and
// BenchmarkTryLockContended (an acquire refused, which now reads the
// holder's metadata and TTL).
func BenchmarkInspect(b *testing.B) {
	rl, keys := benchHeldKey(b)
	ctx := context.Background()
	inspect := func(k string) error {
		h, err := rl.Inspect(ctx, k)
		if err == nil && h.State != "held" {
			err = fmt.Errorf("want held, got %v", h.State)
		}
		return err
	}
	benchWarm(b, keys, inspect)
	benchLoop(b, keys, inspect)
}

// BenchmarkTryLockContended is one TryLock refused by a holder with
// metadata, on 3 nodes.
func BenchmarkTryLockContended(b *testing.B) {
	rl, keys := benchHeldKey(b)
	ctx := context.Background()
	try := func(k string) error {
		if _, err := rl.TryLock(ctx, k, benchTTL); !errors.Is(err, redlock.ErrContended) {
			return fmt.Errorf("want ErrContended, got %v", err)
		}
		return nil
	}
	benchWarm(b, keys, try)
	benchLoop(b, keys, try)
}
