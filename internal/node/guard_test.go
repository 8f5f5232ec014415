package node

import (
	"context"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock/internal/redistest"
)

// TestMergeStart: the restart guard's start estimate after a refresh. A
// changed run_id dates the new incarnation no earlier than the reply that
// showed it, whatever its uptime says.
func TestMergeStart(t *testing.T) {
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for _, tc := range []struct {
		name string
		prev *guardSnap
		s    *guardSnap
		recv time.Time
		want time.Time
	}{
		{"first snapshot", nil, &guardSnap{start: at(-time.Hour), runID: "a"}, t0, at(-time.Hour)},
		{"same run_id keeps the later", &guardSnap{sent: at(-time.Hour), start: at(-time.Minute), runID: "a"},
			&guardSnap{start: at(-2 * time.Hour), runID: "a"}, t0, at(-time.Minute)},
		{"same run_id, new estimate later", &guardSnap{sent: at(-time.Hour), start: at(-2 * time.Hour), runID: "a"},
			&guardSnap{start: at(-time.Minute), runID: "a"}, t0, at(-time.Minute)},
		{"changed run_id, old prev, huge uptime", &guardSnap{sent: at(-time.Hour), start: at(-48 * time.Hour), runID: "a"},
			&guardSnap{start: at(-24 * time.Hour), runID: "b"}, t0, t0},
		{"changed run_id, uptime says younger", &guardSnap{sent: at(-time.Hour), runID: "a"},
			&guardSnap{start: at(time.Second), runID: "b"}, t0, at(time.Second)},
		{"changed run_id, prev sent after recv", &guardSnap{sent: at(time.Millisecond), runID: "a"},
			&guardSnap{start: at(-time.Hour), runID: "b"}, t0, at(time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mergeStart(tc.prev, tc.s, tc.recv)
			if !got.Equal(tc.want) {
				t.Fatalf("want start %v, got %v", tc.want.Sub(t0), got.Sub(t0))
			}
		})
	}
}

// infoRewriter is a go-redis hook that makes INFO report another run_id
// and a huge uptime: a restart of a node whose wall clock was stepped
// forward.
type infoRewriter struct{ runID atomic.Value }

var (
	runIDLine  = regexp.MustCompile(`run_id:[0-9a-zA-Z]*`)
	uptimeLine = regexp.MustCompile(`uptime_in_seconds:[0-9]+`)
)

func (h *infoRewriter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *infoRewriter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if sc, ok := cmd.(*redis.StringCmd); ok && err == nil && cmd.Name() == "info" {
			v := runIDLine.ReplaceAllString(sc.Val(), "run_id:"+h.runID.Load().(string))
			sc.SetVal(uptimeLine.ReplaceAllString(v, "uptime_in_seconds:31536000"))
		}
		return err
	}
}

func (h *infoRewriter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestGuardRunIDChangeRefusesFromSeen drives a refresh against a real
// redis-server whose INFO claims a year of uptime under a new run_id,
// while the cached snapshot is an hour old: the node is refused for d
// from when the change was seen, not voting at once.
func TestGuardRunIDChangeRefusesFromSeen(t *testing.T) {
	rc := redistest.Client(t, redistest.Nodes(t, 1)[0])
	h := &infoRewriter{}
	h.runID.Store("0000000000000000000000000000000000000new")
	rc.AddHook(h)
	const d = time.Minute
	nd := &Node{C: rc, Addr: rc.Options().Addr}
	g := &guard{d: d, dials: dialCounterOf(rc)}
	nd.guard = g
	ctx := context.Background()

	hourAgo := time.Now().Add(-time.Hour)
	g.snap.Store(&guardSnap{sent: hourAgo, start: hourAgo.Add(-24 * time.Hour), runID: "0000000000000000000000000000000000000old"})
	seen := time.Now()
	s, err := g.refresh(ctx, nd, seen)
	require.NoError(t, err)
	if s.start.Before(seen) {
		t.Fatalf("want the start estimate no earlier than the change was seen, got %v before", seen.Sub(s.start))
	}
	require.ErrorIs(t, g.young(time.Now()), ErrNodeRestarted)
	require.ErrorIs(t, g.admit(ctx, nd, time.Now()), ErrNodeRestarted, "a grant right after the change")

	// A later INFO of the same incarnation keeps the node refused.
	s, err = g.refresh(ctx, nd, time.Now())
	require.NoError(t, err)
	require.False(t, s.start.Before(seen), "want the estimate kept, got it moved %v earlier", seen.Sub(s.start))
	require.ErrorIs(t, g.young(time.Now()), ErrNodeRestarted)

	// Without a witnessed change the uptime is all we know: the node votes.
	g2 := &guard{d: d, dials: g.dials}
	_, err = g2.refresh(ctx, nd, time.Now())
	require.NoError(t, err)
	require.NoError(t, g2.young(time.Now()))
}
