package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
)

// The restart guard (WithRestartGuard).
//
// A node that restarts without fsync-always persistence forgets the locks
// it granted, and can grant them again: with 5 nodes, A holding {0,1,2}
// and node 0 restarted empty, B wins {0,3,4} while A's lock is valid. The
// Redlock spec's remedy is to keep a crashed node down for longer than
// the largest TTL. The guard enforces it from the client: a node whose
// current incarnation started less than d ago does not count as a vote.
//
// What we know of a node is a snapshot from INFO server: the run_id and
// S = (time INFO's reply arrived) - uptime_in_seconds + 1s, on our
// monotonic clock. uptime_in_seconds is the difference of two
// whole-second wall-clock readings (the start's and the node's cached
// clock), so it overstates the real uptime by up to a second: a node
// started at x.85s reports 1s of uptime at (x+1).15s. The added second
// covers that, and the reply arrives after the command ran, so S is no
// earlier than the incarnation's real start: a conservative (late)
// estimate. A node therefore votes again between d and d+1s after it
// restarted. When the run_id differs from the previous snapshot's, the
// node was replaced since, at an instant we do not know, and its
// uptime_in_seconds cannot be trusted to date it (a node restarted with
// its wall clock stepped forward reports hours of uptime); so S is raised
// to no earlier than the time the change was seen, the arrival of the
// reply that showed the new run_id: a changed run_id refuses the node
// for d from when the change is seen. A grant sent at time t counts only
// if t - S >= d.
//
// The snapshot is cached, so the hot path costs two atomic loads. The
// question is when a cached snapshot may judge a grant: it must describe
// the incarnation that granted it, or an earlier-started one never. The
// argument rests on three facts: (i) a reply on a TCP connection comes
// from the server process that accepted that connection, which is alive
// from the accept until the reply; (ii) incarnations of a node follow one
// another in time, so a later one started later; (iii) a dial hook,
// installed on each *redis.Client before our first INFO, counts every
// connection the client establishes, after the dial succeeds and before
// the connection is used.
//
// A snapshot read D = dial count before sending INFO at time s. A grant's
// reply arrives at v on connection k. The snapshot may judge the grant if
// either:
//
//   - s >= v: INFO ran after the grant, on the incarnation alive then,
//     which by (ii) started no earlier than the one that granted; or
//   - the dial count read after v still equals D: by (iii) k was counted
//     before D was read, so it connected before s; by (i) its incarnation
//     was alive from before s until v; INFO ran within [s, v] or later,
//     so on that incarnation or a later one.
//
// Otherwise (some connection was dialled since, as after every restart:
// go-redis discards the dead connections and dials anew), the grant waits
// for a fresh INFO, sent after v, before it counts; concurrent grants
// share one in-flight INFO per node. So a restart is caught on the very
// first grant after it, whether or not anything failed, without periodic
// polling: a snapshot never needs refreshing for the passage of time,
// since S is a fixed instant, and every way to reach a new incarnation
// goes through a new connection. A grant from a node known to be young is
// refused before it is sent.
//
// Limits: the guard sees the dials of the *redis.Client given to New,
// through its hooks. A clone made by WithTimeout shares its parent's
// pools, whose dials run the parent's hooks and never the clone's, so
// (iii) fails for it: New tries a dial on each node's pools and refuses
// (ErrInvalid) a client whose hooks do not see it (seesDials). Nor does
// the guard see the dials of a proxy in front of the server, so pass
// plain clients to the servers themselves. uptime_in_seconds is the node's
// wall-clock difference; a clock stepped forward right after a restart
// that we did not witness makes the node look older. FLUSHALL and
// DEBUG RELOAD lose data without a restart and are not detected. The
// guard needs INFO to be allowed (ACL); a node that refuses it never
// votes. The pub/sub hand-off dials too, so a waiting Lock costs one INFO
// per node at the next grant.

// guard is the restart guard's state for one node.
type guard struct {
	d     time.Duration
	dials *dialCounter
	snap  atomic.Pointer[guardSnap] // latest INFO by sending time; nil before the first

	mu     sync.Mutex
	flight *guardFlight // the INFO in progress, if any
}

// guardSnap is what one INFO told us.
type guardSnap struct {
	dials uint64    // dial count read before INFO was sent
	sent  time.Time // when INFO was sent
	start time.Time // no earlier than the incarnation's start
	runID string
}

// guardFlight is an INFO in progress, shared by the grants that wait.
type guardFlight struct {
	sent time.Time
	done chan struct{}
	snap *guardSnap
	err  error
}

// InstallGuard attaches a restart guard of d to n. n must be a
// *redis.Client whose connections are dialled through its own hooks
// (seesDials), as the guard counts them there. The error, a plain one,
// says why not; the host wraps it.
func (n *Node) InstallGuard(d time.Duration) error {
	rc, ok := n.C.(*redis.Client)
	if !ok {
		return fmt.Errorf("WithRestartGuard needs *redis.Client nodes (it watches their dials); node %d is a %T", n.Idx+1, n.C)
	}
	dials := dialCounterOf(rc)
	if err := dials.seesDials(rc); err != nil {
		return fmt.Errorf("WithRestartGuard cannot watch the dials of node %d (%s): %v; pass the *redis.Client made by redis.NewClient, not a clone made by WithTimeout, which dials through its parent's hooks", n.Idx+1, rc.Options().Addr, err)
	}
	n.guard = &guard{d: d, dials: dials}
	return nil
}

// ErrNodeRestarted is the error of a node whose vote the restart guard
// refused; the root re-exports it.
var ErrNodeRestarted = errors.New("redlock: node restarted recently")

// errDialProbe stops seesDials' dial in the counter's hook, before any
// connection is attempted.
var errDialProbe = errors.New("redlock: restart guard: dial probe")

// dialProbeKey marks the context of seesDials' dial with the counter
// that must see it.
type dialProbeKey struct{}

// seesDials reports (nil) whether the connections rc's pools establish
// go through d's hook on rc. A *redis.Client made by redis.NewClient
// dials through its own hooks. A clone made by WithTimeout shares its
// parent's pools, which dial through the parent's hooks: a hook added to
// the clone never runs, its count never moves, and a snapshot would
// judge every later grant, including a restarted node's. There is no
// public way to tell a clone apart, so this tries: it asks rc's pub/sub
// pool (dialled like its main pool, through the hooks of the client that
// made both) for a connection, with a cancelled context marked for d.
// d's hook, if it runs, returns errDialProbe before dialling; otherwise
// the dial is attempted with the cancelled context and fails without
// connecting. No connection is made either way, and nothing is sent.
func (d *dialCounter) seesDials(rc *redis.Client) error {
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), dialProbeKey{}, d))
	cancel()
	ps := rc.Subscribe(ctx) // no channel: nothing is dialled yet
	err := ps.Ping(ctx)
	_ = ps.Close()
	switch {
	case errors.Is(err, errDialProbe):
		return nil
	case err == nil:
		return errors.New("a probe dial was not seen by the client's hooks")
	}
	return fmt.Errorf("a probe dial was not seen by the client's hooks (%w)", err)
}

// young refuses, before anything is sent, a node whose cached snapshot
// already shows it restarted less than d before now. A newer incarnation
// would be younger still, so no freshness is needed for a refusal.
func (g *guard) young(now time.Time) error {
	if s := g.snap.Load(); s != nil && now.Sub(s.start) < g.d {
		return g.restarted(s, now)
	}
	return nil
}

// admit decides whether a grant sent at sent, whose reply has just
// arrived, counts. It may wait for a fresh INFO (bounded by ctx).
func (g *guard) admit(ctx context.Context, nd *Node, sent time.Time) error {
	replied := time.Now()
	s := g.snap.Load()
	if s == nil || (s.sent.Before(replied) && g.dials.n.Load() != s.dials) {
		var err error
		if s, err = g.refresh(ctx, nd, replied); err != nil {
			return err
		}
	}
	if sent.Sub(s.start) < g.d {
		return g.restarted(s, sent)
	}
	return nil
}

func (g *guard) restarted(s *guardSnap, at time.Time) error {
	return fmt.Errorf("%w: up at most %v, guard %v (run_id %s)", ErrNodeRestarted, max(at.Sub(s.start), 0).Truncate(time.Millisecond), g.d, s.runID)
}

// refresh returns a snapshot from an INFO sent no earlier than after,
// joining one in flight when it qualifies.
func (g *guard) refresh(ctx context.Context, nd *Node, after time.Time) (*guardSnap, error) {
	g.mu.Lock()
	if f := g.flight; f != nil && !f.sent.Before(after) {
		g.mu.Unlock()
		select {
		case <-f.done:
			return f.snap, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f := &guardFlight{done: make(chan struct{})}
	dials := g.dials.n.Load()
	f.sent = time.Now()
	g.flight = f
	g.mu.Unlock()

	info, err := infoServer(ctx, nd.C)
	recv := time.Now()
	var s *guardSnap
	if err != nil {
		err = fmt.Errorf("redlock: restart guard: INFO: %w", err)
	} else {
		s, err = parseGuardInfo(info, dials, f.sent, recv)
	}

	g.mu.Lock()
	if s != nil {
		prev := g.snap.Load()
		s.start = mergeStart(prev, s, recv)
		if prev == nil || prev.sent.Before(s.sent) {
			g.snap.Store(s)
		}
	}
	if g.flight == f {
		g.flight = nil
	}
	f.snap, f.err = s, err
	close(f.done)
	g.mu.Unlock()
	return s, err
}

// parseGuardInfo builds a snapshot from an INFO server reply.
func parseGuardInfo(info string, dials uint64, sent, recv time.Time) (*guardSnap, error) {
	up, err := strconv.ParseInt(InfoField(info, "uptime_in_seconds"), 10, 64)
	if err != nil || up < 0 {
		return nil, fmt.Errorf("redlock: restart guard: INFO has no valid uptime_in_seconds")
	}
	return &guardSnap{
		dials: dials,
		sent:  sent,
		// +1s: uptime_in_seconds may overstate the real uptime by up to
		// a second (see the comment at the top of this file).
		start: recv.Add(time.Second - time.Duration(up)*time.Second),
		runID: InfoField(info, "run_id"),
	}, nil
}

// mergeStart returns the start estimate of s, a snapshot whose INFO
// reply arrived at recv, given prev, the snapshot cached before it (nil
// for none). The same run_id keeps the later of the two estimates. A
// changed run_id means a restart seen at recv, whatever the new
// incarnation's uptime_in_seconds says: the estimate is no earlier than
// recv (nor than prev's sending, in case prev was sent after recv), so
// the node is refused for d from when the change is seen.
func mergeStart(prev, s *guardSnap, recv time.Time) time.Time {
	switch {
	case prev == nil:
		return s.start
	case prev.runID == s.runID:
		return later(s.start, prev.start)
	}
	return later(s.start, later(prev.sent, recv))
}

func later(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// dialCounter is a go-redis hook that counts established connections.
// There is one per *redis.Client, shared by every Client that guards it,
// so that hooks do not pile up on a client reused by many Clients.
type dialCounter struct{ n atomic.Uint64 }

var _ redis.Hook = (*dialCounter)(nil)

// DialHook counts a connection once it is established, before go-redis
// uses it.
func (d *dialCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p, _ := ctx.Value(dialProbeKey{}).(*dialCounter); p == d {
			return nil, errDialProbe
		}
		conn, err := next(ctx, network, addr)
		if err == nil {
			d.n.Add(1)
		}
		return conn, err
	}
}

// ProcessHook passes commands through.
func (d *dialCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook passes pipelines through.
func (d *dialCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

var (
	dialMu       sync.Mutex
	dialCounters = map[weak.Pointer[redis.Client]]*dialCounter{}
)

// dialCounterOf returns rc's dial counter, installing the hook on first
// use. The entry goes when rc is garbage collected.
func dialCounterOf(rc *redis.Client) *dialCounter {
	k := weak.Make(rc)
	dialMu.Lock()
	defer dialMu.Unlock()
	if d := dialCounters[k]; d != nil {
		return d
	}
	d := new(dialCounter)
	rc.AddHook(d) // before anyone reads the counter: no dial goes unseen
	dialCounters[k] = d
	runtime.AddCleanup(rc, func(k weak.Pointer[redis.Client]) {
		dialMu.Lock()
		delete(dialCounters, k)
		dialMu.Unlock()
	}, k)
	return d
}
