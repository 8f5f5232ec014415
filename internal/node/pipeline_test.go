package node

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// recRound records the replies a batch reports.
type recRound struct {
	mu   sync.Mutex
	reps map[int]wire.Reply
}

func (r *recRound) Report(i int, rep wire.Reply) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reps[i] = rep
}

func (r *recRound) Lost() bool { return false }

// TestBatchNoScriptSameToken: a batch holding two requests of one lock
// (an Extend and an Unlock racing) on a node without the scripts cached.
// When both answer NOSCRIPT, neither ran, so both run again with EVAL in
// their order: the Unlock succeeds whichever came first. When the later
// one ran (its script was cached), the earlier one is not run after it,
// and is reported failed.
func TestBatchNoScriptSameToken(t *testing.T) {
	rc := redistest.Client(t, redistest.Nodes(t, 1)[0])
	nd := New(0, rc, &Host{})
	nd.SetIdentified("test")
	ctx := context.Background()
	const key, token = "k", "tok"
	req := func(op wire.Op) *wire.Request {
		r := &wire.Request{Op: op, Token: token, TTL: 10 * time.Second}
		r.Prepare(1, []string{key}, wire.Announce{})
		return r
	}
	run := func(ops ...wire.Op) []wire.Reply {
		t.Helper()
		rd := &recRound{reps: map[int]wire.Reply{}}
		jobs := make([]Job, len(ops))
		for i, op := range ops {
			jobs[i] = Job{R: rd, Req: req(op), I: i, Ctx: ctx, Timeout: time.Second}
		}
		nd.runBatch(&leaderConn{off: true}, jobs)
		out := make([]wire.Reply, len(ops))
		for i := range ops {
			rep, ok := rd.reps[i]
			require.True(t, ok, "request %d not reported", i)
			out[i] = rep
		}
		return out
	}
	hold := func() {
		t.Helper()
		require.NoError(t, rc.Set(ctx, key, token, 10*time.Second).Err())
		require.NoError(t, rc.ScriptFlush(ctx).Err())
	}
	held := func() bool {
		t.Helper()
		n, err := rc.Exists(ctx, key).Result()
		require.NoError(t, err)
		return n == 1
	}

	t.Run("unlock then extend, neither cached", func(t *testing.T) {
		hold()
		reps := run(wire.OpRelease, wire.OpExtend)
		require.Equal(t, wire.StatusOK, reps[0].St, "unlock: %v", reps[0].Err)
		// An extension that finds the key missing puts it back (a heal),
		// reported apart: the root releases it again once the lock is
		// over (round.undoHeal). Healed shows it ran after the unlock.
		require.Equal(t, wire.StatusAbsent, reps[1].St, "extend after the unlock: %+v", reps[1])
		require.True(t, reps[1].Healed, "the extend ran before the unlock: %+v", reps[1])
		require.True(t, held(), "want the extend's heal on the node, got no key")
	})
	t.Run("extend then unlock, neither cached", func(t *testing.T) {
		hold()
		reps := run(wire.OpExtend, wire.OpRelease)
		require.Equal(t, wire.StatusOK, reps[0].St, "extend: %v", reps[0].Err)
		require.Equal(t, wire.StatusOK, reps[1].St, "unlock: %v", reps[1].Err)
		require.False(t, held())
	})
	t.Run("extend not cached, the later unlock ran", func(t *testing.T) {
		hold()
		require.NoError(t, rc.ScriptLoad(ctx, wire.ScriptReleaseOne.Src.(string)).Err())
		reps := run(wire.OpExtend, wire.OpRelease)
		require.Equal(t, wire.StatusFailed, reps[0].St, "an extend run after its unlock: %+v", reps[0])
		require.True(t, wire.IsNoScript(reps[0].Err), "%v", reps[0].Err)
		require.Equal(t, wire.StatusOK, reps[1].St, "unlock: %v", reps[1].Err)
		require.False(t, held(), "the extend ran after the unlock and set the key again")
	})
	t.Run("proclaim not cached, the later unlock ran", func(t *testing.T) {
		// A Proclaim changes only a key holding its token: run after
		// the unlock, it finds nothing, which is its true answer.
		hold()
		require.NoError(t, rc.ScriptLoad(ctx, wire.ScriptReleaseOne.Src.(string)).Err())
		rd := &recRound{reps: map[int]wire.Reply{}}
		p := &wire.Proclaim{Key: key, Old: token, Value: token + ":new"}
		jobs := []Job{
			{R: rd, Req: p.Request(1, token), I: 0, Ctx: ctx, Timeout: time.Second},
			{R: rd, Req: req(wire.OpRelease), I: 1, Ctx: ctx, Timeout: time.Second},
		}
		nd.runBatch(&leaderConn{off: true}, jobs)
		require.Equal(t, wire.StatusAbsent, rd.reps[0].St, "a proclaim after its unlock: %+v", rd.reps[0])
		require.Equal(t, wire.StatusOK, rd.reps[1].St, "unlock: %v", rd.reps[1].Err)
		require.False(t, held(), "the proclaim ran after the unlock and set the key again")
	})
}
