package node

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// keyBatch is a batch extending the key locks keys[k] under tokens[k],
// each reported to rd as item k.
func keyBatch(rd *recRound, keys, tokens []string) *Batch {
	b := &Batch{Timeout: time.Second}
	locks := make([]wire.BatchLock, len(keys))
	for k := range keys {
		locks[k] = wire.BatchLock{Kind: wire.KindLetter(wire.KindKey, false), Keys: []string{keys[k]}, TTL: 10 * time.Second, Token: tokens[k]}
		b.Items = append(b.Items, BatchItem{R: &itemRound{rd, k}, Req: &wire.Request{Op: wire.OpExtend}})
	}
	b.Argv = wire.BatchArgv(len(locks), func(k int) *wire.BatchLock { return &locks[k] })
	return b
}

// itemRound reports to rd under the item's index rather than the node's.
type itemRound struct {
	rd *recRound
	k  int
}

func (r *itemRound) Report(_ int, rep wire.Reply) { r.rd.Report(r.k, rep) }
func (r *itemRound) Lost() bool                   { return false }

// TestExecBatchPerItem: one batch on a real node reports each lock on its
// own: extended where the node holds its token, taken where another
// holds the key, absent (and healed) where the key is gone; the same
// after the node lost its scripts (EVALSHA, then EVAL), on a node not yet
// identified (INFO server first), and every item failed when go-redis's
// client is closed.
func TestExecBatchPerItem(t *testing.T) {
	t.Parallel()
	rc := redistest.Client(t, redistest.Nodes(t, 1)[0])
	ctx := context.Background()
	keys := []string{"ours", "theirs", "gone"}
	tokens := []string{"tok-a", "tok-b", "tok-c"}
	run := func(nd *Node) map[int]wire.Reply {
		t.Helper()
		require.NoError(t, rc.Set(ctx, "ours", "tok-a", time.Second).Err())
		require.NoError(t, rc.Set(ctx, "theirs", "someone-else", time.Minute).Err())
		require.NoError(t, rc.Del(ctx, "gone").Err())
		rd := &recRound{reps: map[int]wire.Reply{}}
		nd.execBatch(keyBatch(rd, keys, tokens))
		require.Len(t, rd.reps, len(keys), "every item reported")
		return rd.reps
	}
	check := func(name string, reps map[int]wire.Reply) {
		t.Helper()
		require.Equal(t, wire.StatusOK, reps[0].St, "%s: ours: %v", name, reps[0].Err)
		ttl, err := rc.PTTL(ctx, "ours").Result()
		require.NoError(t, err)
		require.Greater(t, ttl, 5*time.Second, "%s: ours not extended", name)
		require.Equal(t, wire.StatusTaken, reps[1].St, "%s: theirs", name)
		v, err := rc.Get(ctx, "theirs").Result()
		require.NoError(t, err)
		require.Equal(t, "someone-else", v, "%s: another holder's key changed", name)
		require.Equal(t, wire.StatusAbsent, reps[2].St, "%s: gone", name)
	}

	nd, _ := newTestNode(t, rc)
	check("identified", run(nd))
	require.NoError(t, rc.ScriptFlush(ctx).Err())
	check("scripts flushed", run(nd))

	fresh, _ := newUnidentifiedNode(t, rc)
	check("first contact", run(fresh))
	require.True(t, fresh.identified.Load(), "the first contact identified the node")

	closed := redis.NewClient(&redis.Options{Addr: rc.Options().Addr})
	require.NoError(t, closed.Close())
	reps := run(New(0, closed, &Host{}))
	for k := range keys {
		require.Equal(t, wire.StatusFailed, reps[k].St, "item %d on a closed client", k)
		require.Error(t, reps[k].Err)
	}
}
