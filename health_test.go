package redlock_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

// TestHealthReportsEachNode: every node's server, identity, persistence,
// eviction and role are reported, and three answering masters are a
// quorum.
func TestHealthReportsEachNode(t *testing.T) {
	_, rl := threeNodes(t)
	h, err := rl.Health(context.Background())
	require.NoError(t, err)
	require.Len(t, h.Nodes, 3)
	require.True(t, h.Quorum)
	require.Equal(t, 3, h.Healthy)
	ids := map[string]bool{}
	for i, n := range h.Nodes {
		require.Equal(t, i, n.Node)
		require.NoError(t, n.Err)
		require.True(t, n.Healthy, "node %d", i+1)
		require.Equal(t, "redis", n.Server)
		require.NotEmpty(t, n.Version)
		require.Len(t, n.RunID, 40)
		ids[n.RunID] = true
		require.GreaterOrEqual(t, n.Uptime, time.Duration(0))
		require.Equal(t, "master", n.Role)
		require.Zero(t, n.Replicas)
		require.False(t, n.AOF)
		require.Equal(t, "", n.Save) // redistest starts nodes with --save ""
		require.Equal(t, "noeviction", n.MaxMemoryPolicy)
		require.Empty(t, n.SameAs)
	}
	require.Len(t, ids, 3)
	// No persistence and no restart guard: one line a node.
	require.Len(t, h.Warnings, 3, "want one warning per node, got %q", h.Warnings)
	for _, w := range h.Warnings {
		require.Contains(t, w, "no persistence")
	}
}

// TestHealthPersistence: appendonly, RDB save rules or the restart
// guard each answer the persistence warning.
func TestHealthPersistence(t *testing.T) {
	ctx := context.Background()
	t.Run("appendonly", func(t *testing.T) {
		nodes := redistest.NodesWith(t, 3, redisnode.Options{AppendOnly: true})
		h, err := newClient(t, redistest.Clients(t, nodes)).Health(ctx)
		require.NoError(t, err)
		require.Empty(t, h.Warnings)
		require.True(t, h.Nodes[0].AOF)
	})
	t.Run("rdb", func(t *testing.T) {
		nodes := redistest.NodesWith(t, 3, redisnode.Options{Args: []string{"--save", "3600 1"}})
		h, err := newClient(t, redistest.Clients(t, nodes)).Health(ctx)
		require.NoError(t, err)
		require.Empty(t, h.Warnings)
		require.Equal(t, "3600 1", h.Nodes[0].Save)
	})
	t.Run("restart guard", func(t *testing.T) {
		_, rl := threeNodes(t, redlock.WithRestartGuard(time.Millisecond))
		h, err := rl.Health(ctx)
		require.NoError(t, err)
		require.Empty(t, h.Warnings)
	})
	t.Run("CONFIG renamed", func(t *testing.T) {
		// CONFIG GET fails: the rules are unknown, and that is no error
		// of the report, nor a warning of no persistence.
		nodes := redistest.NodesWith(t, 3, redisnode.Options{Args: []string{"--rename-command", "CONFIG", ""}})
		h, err := newClient(t, redistest.Clients(t, nodes)).Health(ctx)
		require.NoError(t, err)
		require.True(t, h.Quorum)
		for _, n := range h.Nodes {
			require.NoError(t, n.Err)
			require.Equal(t, "unknown", n.Save)
		}
		require.Empty(t, h.Warnings)
	})
}

// TestHealthINFORefused: an ACL user without INFO and CONFIG gets a
// report of a node that answers, with what it could not read unknown and
// one warning, never an error of the whole report.
func TestHealthINFORefused(t *testing.T) {
	nodes, admins := cluster(t, 3)
	aclSetUser(t, admins, "lim", "on", ">pw", "~*", "&*", "+@all", "-info", "-config")
	h, err := newClient(t, userClients(t, nodes, "lim", "pw")).Health(context.Background())
	require.NoError(t, err)
	require.True(t, h.Quorum)
	require.Equal(t, 3, h.Healthy)
	for _, n := range h.Nodes {
		require.NoError(t, n.Err)
		require.Equal(t, "", n.Server)
		require.Equal(t, "", n.Role)
		require.Equal(t, "unknown", n.Save)
	}
	require.Len(t, h.Warnings, 3, "want one line a node, got %q", h.Warnings)
	require.Contains(t, h.Warnings[0], "INFO refused")
}

// startLog is a logger for New and Dial, and a wait for their probe's
// end ("nodes probed").
type startLog struct {
	buf syncBuffer
	l   *slog.Logger
}

func newStartLog() *startLog {
	s := &startLog{}
	s.l = slog.New(slog.NewTextHandler(&s.buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return s
}

// probed waits for the probe's last line and returns the Warn lines.
func (s *startLog) probed(t *testing.T) []string {
	t.Helper()
	eventually(t, 10*time.Second, func() bool { return strings.Contains(s.buf.String(), "nodes probed") },
		"want the probe's end logged, got %q", s.buf.String())
	var warns []string
	for line := range strings.SplitSeq(s.buf.String(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			warns = append(warns, line)
		}
	}
	return warns
}

// urlOf is a node's redis:// URL.
func urlOf(nd *redisnode.Node) string { return "redis://" + nd.Addr() }

// TestStartWarnings: Dial and New log each configuration that weakens
// safety, one line for it, and nothing for a good configuration.
func TestStartWarnings(t *testing.T) {
	good := redistest.NodesWith(t, 3, redisnode.Options{AppendOnly: true})
	goodURLs := []string{urlOf(good[0]), urlOf(good[1]), urlOf(good[2])}
	dial := func(t *testing.T, urls []string, opts ...redlock.Option) []string {
		t.Helper()
		s := newStartLog()
		c, err := redlock.Dial(urls, append(opts, redlock.WithLogger(s.l))...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return s.probed(t)
	}
	one := func(t *testing.T, warns []string, want string) {
		t.Helper()
		require.Len(t, warns, 1, "want one line, got %q", warns)
		require.Contains(t, warns[0], want)
	}

	t.Run("good", func(t *testing.T) {
		require.Empty(t, dial(t, goodURLs))
	})
	t.Run("no persistence, guard on", func(t *testing.T) {
		nodes := redistest.Nodes(t, 3)
		require.Empty(t, dial(t, []string{urlOf(nodes[0]), urlOf(nodes[1]), urlOf(nodes[2])}, redlock.WithRestartGuard(time.Millisecond)))
	})
	t.Run("no persistence, no guard", func(t *testing.T) {
		bare := redistest.Nodes(t, 1)
		one(t, dial(t, []string{goodURLs[0], goodURLs[1], urlOf(bare[0])}), "no persistence")
	})
	t.Run("two nodes", func(t *testing.T) {
		one(t, dial(t, goodURLs[:2]), "only 2 node(s)")
	})
	t.Run("one node", func(t *testing.T) {
		one(t, dial(t, goodURLs[:1]), "only 1 node(s)")
	})
	t.Run("evicting policy", func(t *testing.T) {
		ev := redistest.NodesWith(t, 1, redisnode.Options{AppendOnly: true, Args: []string{"--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"}})
		w := dial(t, []string{goodURLs[0], goodURLs[1], urlOf(ev[0])})
		one(t, w, "maxmemory-policy allkeys-lru")
		require.Contains(t, w[0], "node 3 (127.0.0.1:")
		require.Contains(t, w[0], "node=2") // 0-based in the log's attributes
	})
	t.Run("replica taking writes", func(t *testing.T) {
		rep := redistest.NodesWith(t, 1, redisnode.Options{AppendOnly: true,
			Args: []string{"--replicaof", "127.0.0.1", fmt.Sprint(good[0].Port()), "--replica-read-only", "no"}})
		one(t, dial(t, []string{goodURLs[1], goodURLs[2], urlOf(rep[0])}), "a replica that takes writes")
	})
	t.Run("unreachable host", func(t *testing.T) {
		w := dial(t, []string{goodURLs[0], goodURLs[1], "redis://" + closedAddr(t)})
		one(t, w, "does not answer")
		require.Contains(t, w[0], "connection refused")
	})
	t.Run("misspelt host", func(t *testing.T) {
		w := dial(t, []string{goodURLs[0], goodURLs[1], "redis://no-such-host.invalid:6379"})
		one(t, w, "does not answer")
	})
	t.Run("database index beyond databases", func(t *testing.T) {
		w := dial(t, []string{goodURLs[0], goodURLs[1], urlOf(good[2]) + "/99"})
		one(t, w, "database index is beyond the server's databases setting")
	})
	t.Run("same server twice", func(t *testing.T) {
		// localhost and 127.0.0.1: two names, one run_id. The line is
		// the duplicate's error, logged once.
		p := good[0].Port()
		w := dial(t, []string{goodURLs[1], fmt.Sprintf("redis://127.0.0.1:%d", p), fmt.Sprintf("redis://localhost:%d", p)})
		one(t, w, "two nodes are one server")
	})
	t.Run("New", func(t *testing.T) {
		s := newStartLog()
		rl := newClient(t, redistest.Clients(t, redistest.Nodes(t, 2)), redlock.WithLogger(s.l))
		w := s.probed(t)
		require.Len(t, w, 3, "want the count and one line per node, got %q", w)
		require.Contains(t, w[0], "only 2 node(s)")
		require.Equal(t, 2, strings.Count(strings.Join(w, "\n"), "no persistence"))
		require.NoError(t, rl.Close())
	})
}

// TestStartProbeNeverBlocks: New returns at once with a logger however
// the nodes stall, and Close ends the probe without logging it.
func TestStartProbeNeverBlocks(t *testing.T) {
	nodes, cs := cluster(t, 3)
	for _, nd := range nodes {
		require.NoError(t, nd.Pause())
		t.Cleanup(func() { _ = nd.Resume() })
	}
	s := newStartLog()
	var c *redlock.Client
	within(t, 200*time.Millisecond, "New with paused nodes", func() {
		var err error
		c, err = redlock.New(cs, redlock.WithLogger(s.l))
		require.NoError(t, err)
	})
	within(t, 2*time.Second, "Close during the probe", func() { require.NoError(t, c.Close()) })
	require.NotContains(t, s.buf.String(), "level=WARN")
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// TestHealthUnansweredNodes: a node that is down, or whose URL names a
// database the server does not have, is reported with its error, and
// the report still decides the quorum.
func TestHealthUnansweredNodes(t *testing.T) {
	nodes, _ := cluster(t, 3)
	rl, err := redlock.Dial([]string{urlOf(nodes[0]), urlOf(nodes[1]) + "/99", "redis://" + closedAddr(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rl.Close() })
	h, err := rl.Health(context.Background())
	require.NoError(t, err)
	require.NoError(t, h.Nodes[0].Err)
	require.ErrorContains(t, h.Nodes[1].Err, "DB index is out of range")
	require.ErrorContains(t, h.Nodes[2].Err, "connection refused")
	require.Equal(t, 1, h.Healthy)
	require.False(t, h.Quorum)
	all := strings.Join(h.Warnings, "\n")
	require.Contains(t, all, "node 2 (127.0.0.1:")
	require.Contains(t, all, "database index is beyond")
	require.Contains(t, all, "1 of 3 nodes healthy, fewer than the quorum of 2")
}

// TestHealthFindsSameServer: one server under two names is reported on
// both entries, counts once, and makes the client refuse locks.
func TestHealthFindsSameServer(t *testing.T) {
	nodes, _ := cluster(t, 2)
	p := nodes[0].Port()
	rl, err := redlock.Dial([]string{fmt.Sprintf("redis://127.0.0.1:%d", p), urlOf(nodes[1]), fmt.Sprintf("redis://localhost:%d", p)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rl.Close() })
	h, err := rl.Health(context.Background())
	require.NoError(t, err)
	require.Equal(t, []int{2}, h.Nodes[0].SameAs)
	require.Equal(t, []int{0}, h.Nodes[2].SameAs)
	require.Empty(t, h.Nodes[1].SameAs)
	require.True(t, h.Nodes[0].Healthy)
	require.False(t, h.Nodes[2].Healthy)
	require.Equal(t, 2, h.Healthy)
	require.Contains(t, strings.Join(h.Warnings, "\n"), "node 3 (localhost:")
	_, err = rl.TryLock(context.Background(), key(t), time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorContains(t, err, "duplicate node")
}

// TestHealthReplica: a read-only replica is reported with its role, is
// not healthy, and its master counts its replica.
func TestHealthReplica(t *testing.T) {
	masters := redistest.NodesWith(t, 2, redisnode.Options{AppendOnly: true})
	rep := redistest.NodesWith(t, 1, redisnode.Options{AppendOnly: true,
		Args: []string{"--replicaof", "127.0.0.1", fmt.Sprint(masters[0].Port())}})
	rl := newClient(t, redistest.Clients(t, append(masters, rep...)))
	var h redlock.Health
	eventually(t, 10*time.Second, func() bool {
		var err error
		h, err = rl.Health(context.Background())
		require.NoError(t, err)
		return h.Nodes[0].Replicas == 1
	}, "want the replica connected to its master")
	require.Equal(t, "replica", h.Nodes[2].Role)
	require.False(t, h.Nodes[2].ReplicaWrites)
	require.False(t, h.Nodes[2].Healthy)
	require.Equal(t, 2, h.Healthy)
	require.True(t, h.Quorum)
	require.Len(t, h.Warnings, 1, "got %q", h.Warnings)
	require.Contains(t, h.Warnings[0], "a replica: it refuses lock writes")
}

// TestHealthBadCalls: a nil, zero or closed Client and a nil ctx are
// clear errors, never a panic.
func TestHealthBadCalls(t *testing.T) {
	ctx := context.Background()
	var nilc *redlock.Client
	_, err := nilc.Health(ctx)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	var zero redlock.Client
	_, err = zero.Health(ctx)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorContains(t, err, "zero Client")
	_, rl := threeNodes(t)
	var nilCtx context.Context
	_, err = rl.Health(nilCtx)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.NoError(t, rl.Close())
	_, err = rl.Health(ctx)
	require.ErrorIs(t, err, redlock.ErrClosed)
}

// TestHealthShortDeadline: a 1ms deadline, or a node that stalls,
// returns promptly with ctx's error and the report so far.
func TestHealthShortDeadline(t *testing.T) {
	nodes, cs := cluster(t, 3)
	rl := newClient(t, cs)
	within(t, 2*time.Second, "Health with 1ms", func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		h, err := rl.Health(ctx)
		if err != nil { // the nodes may answer within 1ms
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}
		require.Len(t, h.Nodes, 3)
	})
	within(t, 2*time.Second, "Health with a deadline passed", func() {
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		h, err := rl.Health(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Len(t, h.Nodes, 3)
		require.False(t, h.Quorum)
		for _, n := range h.Nodes {
			require.ErrorIs(t, n.Err, context.DeadlineExceeded)
		}
	})
	require.NoError(t, nodes[2].Pause())
	t.Cleanup(func() { _ = nodes[2].Resume() })
	within(t, 3*time.Second, "Health with a stalled node", func() {
		h, err := rl.Health(context.Background()) // 1s a node
		require.NoError(t, err)
		// ErrNodeTimeout, or the client's read timeout (500ms) first.
		require.Error(t, h.Nodes[2].Err)
		require.True(t, h.Quorum)
		require.Equal(t, 2, h.Healthy)
	})
}

// TestHealthConcurrent: Health calls at once on one Client, while locks
// are taken, all report the same healthy nodes.
func TestHealthConcurrent(t *testing.T) {
	nodes := redistest.NodesWith(t, 3, redisnode.Options{AppendOnly: true})
	rl := newClient(t, redistest.Clients(t, nodes))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 16 {
		wg.Go(func() {
			if i%4 == 0 {
				l, err := rl.TryLock(context.Background(), key(t), 10*time.Second)
				if err == nil {
					err = l.Unlock(context.Background())
				}
				if err != nil {
					errs <- err
				}
				return
			}
			h, err := rl.Health(context.Background())
			switch {
			case err != nil:
				errs <- err
			case h.Healthy != 3 || len(h.Warnings) != 0:
				errs <- fmt.Errorf("want 3 healthy nodes and no warning, got %d and %q", h.Healthy, h.Warnings)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
