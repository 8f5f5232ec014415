package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// prepared returns a request of op on key for one node.
func prepared(op wire.Op, key, token string) *wire.Request {
	r := &wire.Request{Op: op, Token: token, TTL: 10 * time.Second}
	r.Prepare(1, []string{key}, wire.Announce{})
	return r
}

// TestExecOutcomes: Exec on a real node classifies what the node did: a
// grant, a refusal, a release; a release still runs when the node has
// lost its scripts (EVALSHA's NOSCRIPT, then EVAL); a cancelled ctx
// fails the request with ctx's error, and takes nothing.
func TestExecOutcomes(t *testing.T) {
	t.Parallel()
	rc := redistest.Client(t, redistest.Nodes(t, 1)[0])
	nd, _ := newTestNode(t, rc)
	ctx := context.Background()
	value := func(k string) string {
		v, err := rc.Get(ctx, k).Result()
		if err == redis.Nil {
			return ""
		}
		require.NoError(t, err)
		return v
	}

	rep := nd.Exec(ctx, prepared(wire.OpAcquire, "k", "tok-a"))
	require.Equal(t, wire.StatusOK, rep.St, "%v", rep.Err)
	require.True(t, strings.HasPrefix(value("k"), "tok-a"))

	rep = nd.Exec(ctx, prepared(wire.OpAcquire, "k", "tok-b"))
	require.Equal(t, wire.StatusTaken, rep.St, "%v", rep.Err)
	require.True(t, strings.HasPrefix(value("k"), "tok-a"), "a refused acquire changed the key")

	require.NoError(t, rc.ScriptFlush(ctx).Err())
	rep = nd.Exec(ctx, prepared(wire.OpRelease, "k", "tok-a"))
	require.Equal(t, wire.StatusOK, rep.St, "a release on a node without its script: %v", rep.Err)
	require.Empty(t, value("k"))

	done, cancel := context.WithCancel(ctx)
	cancel()
	rep = nd.Exec(done, prepared(wire.OpAcquire, "c", "tok-c"))
	require.Equal(t, wire.StatusFailed, rep.St)
	require.ErrorIs(t, rep.Err, context.Canceled)
	require.Empty(t, value("c"), "a cancelled acquire took the key")
}

// TestExecPausedNodeFailsAtReadTimeout: on a node that stops answering,
// Exec returns failed once go-redis's read timeout passes. Its ctx's
// deadline may not end the wait (go-redis without ContextTimeoutEnabled,
// doc.go): the callers bound their own waits (the round's timer, a
// goroutine of the Client's group), and this bound is what they rely on
// to get their goroutine back.
func TestExecPausedNodeFailsAtReadTimeout(t *testing.T) {
	t.Parallel()
	node := redistest.Nodes(t, 1)[0]
	rc := redis.NewClient(&redis.Options{Addr: node.Addr(), ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	nd, _ := newTestNode(t, rc)
	require.Equal(t, wire.StatusOK, nd.Exec(context.Background(), prepared(wire.OpAcquire, "warm", "tok")).St)
	require.NoError(t, node.Pause())
	t.Cleanup(func() { _ = node.Resume() })
	start := time.Now()
	rep := nd.Exec(context.Background(), prepared(wire.OpAcquire, "p", "tok"))
	require.Less(t, time.Since(start), 10*time.Second, "Exec waited on a paused node past go-redis's read timeout")
	require.Equal(t, wire.StatusFailed, rep.St)
	require.Error(t, rep.Err)
}

// panicHook panics in go-redis's processing of every command, as a bug
// in its reply parsing would.
type panicHook struct{}

func (panicHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (panicHook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(context.Context, redis.Cmder) error { panic("malformed") }
}
func (panicHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestExecGoRedisPanicIsNodeFailure: a panic inside go-redis is a failed
// request of that node, with the reason, never a crash of the caller.
func TestExecGoRedisPanicIsNodeFailure(t *testing.T) {
	t.Parallel()
	rc := redistest.Client(t, redistest.Nodes(t, 1)[0])
	rc.AddHook(panicHook{})
	nd, _ := newTestNode(t, rc)
	rep := nd.Exec(context.Background(), prepared(wire.OpAcquire, "k", "tok"))
	require.Equal(t, wire.StatusFailed, rep.St)
	require.ErrorContains(t, rep.Err, "go-redis panicked")
}
