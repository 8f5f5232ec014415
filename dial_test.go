package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
)

// TestDialLocksAndCloseClosesClients: a Client made by Dial locks and
// unlocks on real nodes, a URL's settings reach its go-redis clients, and
// its Close closes them.
func TestDialLocksAndCloseClosesClients(t *testing.T) {
	nodes, direct := cluster(t, 3)
	name := fmt.Sprintf("dial-test-%d", time.Now().UnixNano())
	urls := urlsOf(nodes[0].Addr(), nodes[1].Addr(), nodes[2].Addr())
	for i := range urls {
		urls[i] += "?client_name=" + name
	}
	c, err := redlock.Dial(urls)
	require.NoError(t, err)
	ctx := context.Background()
	k := key(t)
	l, err := c.Lock(ctx, k, 10*time.Second)
	require.NoError(t, err)
	for i, d := range direct {
		require.Equal(t, l.Token(), get(t, d, k), "node %d", i+1)
		require.Positive(t, connsNamed(t, d, name), "node %d: want the Dial's connections named by the URL", i+1)
	}
	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, c.Close())
	for i, d := range direct {
		eventually(t, 5*time.Second, func() bool { return connsNamed(t, d, name) == 0 },
			"node %d: want the Dial's go-redis clients closed by Close", i+1)
	}
	_, err = c.TryLock(ctx, k, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrClosed)
}

// dialLog records go-redis's log lines while a test runs.
type dialLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *dialLog) Printf(_ context.Context, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *dialLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestDialRefusedNodeSaysConnectionRefused: a node whose port refuses
// connections fails each round with the dial's error, not with
// ErrNodeTimeout, even with a per-node timeout shorter than go-redis's
// dial and command retries would take; the rounds fail (ErrUnreachable)
// only when the quorum is lost. go-redis dials it once per request, not
// five times.
func TestDialRefusedNodeSaysConnectionRefused(t *testing.T) {
	nodes, _ := cluster(t, 3)
	log := new(dialLog)
	redis.SetLogger(log)
	t.Cleanup(func() { redis.SetLogger(quietLogger{}) })
	require.NoError(t, nodes[2].Kill())
	ctx := context.Background()

	c, err := redlock.Dial(urlsOf(nodes[0].Addr(), nodes[1].Addr(), nodes[2].Addr()), redlock.WithNodeTimeout(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	for range 3 {
		l, err := c.TryLock(ctx, key(t), 10*time.Second)
		require.NoError(t, err, "2 of 3 nodes answer: a quorum")
		require.NoError(t, l.Unlock(ctx))
	}

	require.NoError(t, nodes[1].Kill())
	for range 3 {
		_, err := c.TryLock(ctx, key(t), 10*time.Second)
		require.ErrorIs(t, err, redlock.ErrUnreachable)
		require.NotErrorIs(t, err, redlock.ErrContended)
		var qe *redlock.QuorumError
		require.ErrorAs(t, err, &qe)
		for _, n := range qe.Nodes[1:] {
			require.Equal(t, "failed", n.Status, "%v", err)
			require.NotErrorIs(t, n.Err, node.ErrNodeTimeout, "want the dial's error, got %v", err)
			require.Contains(t, n.Err.Error(), "connection refused", "%v", err)
		}
	}
	require.NotContains(t, log.String(), "after 5 attempts", "want one dial attempt per request")
}

// TestDialRejectsBadInput: bad URLs and misplaced options are refused
// with ErrInvalid, naming the URL without its password; a server given
// twice is a duplicate-node ErrInvalid. Nothing is dialed.
func TestDialRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		urls []string
		want []string
	}{
		{"no URLs", nil, []string{"no node URLs"}},
		{"empty URL", []string{"redis://a:1", ""}, []string{"node 2 of 2: empty URL"}},
		{"bad scheme", []string{"http://u:pw@a:1"}, []string{`node 1 "http://u:xxxxx@a:1"`, `scheme "http"`}},
		{"no scheme", []string{"localhost:6379"}, []string{"no scheme"}},
		{"bad db", []string{"redis://u:pw@a:1/x"}, []string{`"redis://u:xxxxx@a:1/x"`, "database number"}},
		{"negative pool", []string{"redis://a:1?pool_size=-1"}, []string{"pool_size=-1"}},
		{"sentinel without master", []string{"redis+sentinel://:pw@s:26379"}, []string{"master_name"}},
		{"duplicate", []string{"redis://a:1", "redis://:pw@a:1/0"}, []string{`node 2 "redis://:xxxxx@a:1/0" is node 1 again`}},
		{"duplicate cluster", []string{"redis+cluster://h:1?addr=h:2", "redis+cluster://h:2?addr=h:1"}, []string{"is node 1 again"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redlock.Dial(tc.urls)
			require.ErrorIs(t, err, redlock.ErrInvalid)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			require.NotContains(t, err.Error(), "pw@")
			if strings.HasPrefix(tc.name, "duplicate") {
				require.ErrorIs(t, err, redlock.ErrInvalid)
			}
			_, err = redlock.NewClients(tc.urls...)
			require.ErrorIs(t, err, redlock.ErrInvalid)
		})
	}

	_, err := redlock.Dial([]string{"redis://a:1"}, redlock.WithDriftFactor(2))
	require.ErrorIs(t, err, redlock.ErrInvalid, "New's options are checked")

}

// TestNewClientsForNew: NewClients' clients work with New, whose Close
// leaves them open for their owner.
func TestNewClientsForNew(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	clients, err := redlock.NewClients(urlsOf(nodes[0].Addr(), nodes[1].Addr(), nodes[2].Addr())...)
	require.NoError(t, err)
	defer func() {
		for _, rc := range clients {
			require.NoError(t, rc.Close())
		}
	}()
	c, err := redlock.New(clients)
	require.NoError(t, err)
	ctx := context.Background()
	l, err := c.TryLock(ctx, key(t), 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, c.Close())
	require.NoError(t, clients[0].Ping(ctx).Err(), "New's Close leaves the clients open")
}

// FuzzURL builds nodes from node URLs as go-redis parses them: New never
// panics, accepts one node, and refuses one URL given twice as a
// duplicate node, whatever the URL says.
func FuzzURL(f *testing.F) {
	for _, u := range []string{
		"redis://127.0.0.1:6379", "rediss://user:pass@127.0.0.1:6380/2",
		"redis://:secret@localhost/15?dial_timeout=1s&pool_size=2", "unix:///tmp/redis.sock?db=3",
		"redis://[::1]:6379/0", "redis://h:0", "redis://h:99999", "redis://h/-1", "redis:///",
		"rediss://h?skip_verify=true", "redis://user@h?protocol=2&client_name=x", "redis://h?max_retries=-1",
		"redis://h?pool_size=-1", "redis://h?read_timeout=-1", "http://h", "", "redis://%zz",
	} {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, u string) {
		o1, err := redis.ParseURL(u)
		if err != nil {
			return
		}
		o2, err := redis.ParseURL(u)
		if err != nil {
			t.Fatalf("ParseURL(%q) succeeded once then failed: %v", u, err)
		}
		if o1.Addr == "FailoverClient" { // go-redis's placeholder; see docs/sentinel.md
			return
		}
		c1, c2, ok := newClientPair(o1, o2)
		if !ok {
			return // go-redis refuses these options by panicking (pool_size=-1)
		}
		defer c1.Close()
		defer c2.Close()
		if _, err := redlock.New([]redis.UniversalClient{c1}); err != nil {
			t.Fatalf("New(%q): want a client, got %v", u, err)
		}
		_, err = redlock.New([]redis.UniversalClient{c1, c2})
		if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(fmt.Sprint(err), "duplicate node") {
			t.Fatalf("New(%q twice): want a duplicate-node ErrInvalid, got %v", u, err)
		}
	})
}

// urlsOf returns a redis:// URL per address.
func urlsOf(addrs ...string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = "redis://" + a
	}
	return out
}

// connsNamed returns how many connections named name c's server has.
func connsNamed(t *testing.T, c redis.UniversalClient, name string) int {
	t.Helper()
	list, err := c.ClientList(context.Background()).Result()
	require.NoError(t, err)
	return strings.Count(list, " name="+name+" ")
}

// newClientPair builds two clients, or reports false when go-redis panics
// on the options: building clients is the caller's part, not the
// library's.
func newClientPair(o1, o2 *redis.Options) (c1, c2 *redis.Client, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return redis.NewClient(o1), redis.NewClient(o2), true
}
