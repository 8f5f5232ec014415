package redlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
)

// TestConnectionsClosedUnderRequests: each server closes every client
// connection (CLIENT KILL, as a restart does) just before a lock's
// request to it goes out, while the leaders send on connections of their
// own, with RESP2 and RESP3 clients. The go-redis clients do not retry
// (MaxRetries -1), yet every node still votes and releases: a request
// that meets a connection closed under it is sent again on a live one,
// as the pool's health check would have picked a live one.
func TestConnectionsClosedUnderRequests(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) { connectionsClosedUnderRequests(t, proto) })
	}
}

func connectionsClosedUnderRequests(t *testing.T, proto int) {
	nodes := redistest.Nodes(t, 5)
	ctx := context.Background()
	clients := make([]redis.UniversalClient, len(nodes))
	hooks := make([]*killFirst, len(nodes))
	for i, nd := range nodes {
		hooks[i] = &killFirst{admin: redistest.Client(t, nd)}
		require.NoError(t, hooks[i].admin.Ping(ctx).Err())
		cl := redis.NewClient(&redis.Options{Addr: nd.Addr(), Protocol: proto, MaxRetries: -1,
			DialTimeout: 250 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
		t.Cleanup(func() { _ = cl.Close() })
		cl.AddHook(hooks[i])
		clients[i] = cl
	}
	c := newClient(t, clients)
	arm := func() {
		for _, h := range hooks {
			h.armed.Store(true)
		}
	}
	for round := range 3 {
		k := key(t)
		l, err := c.TryLock(ctx, key(t), 10*time.Second)
		require.NoError(t, err) // the leaders now hold connections
		require.NoError(t, l.Unlock(ctx))
		arm()
		l, err = c.TryLock(ctx, k, 10*time.Second)
		require.NoError(t, err, "round %d", round)
		// The last replies may come after the quorum's, and the kills
		// may cut our own GETs short.
		for i, cl := range clients {
			eventually(t, 2*time.Second, func() bool {
				v, err := cl.Get(ctx, k).Result()
				return err == nil && v == l.Token()
			}, "round %d: node %d: want our token", round, i)
		}
		arm()
		require.NoError(t, l.Unlock(ctx), "round %d", round)
		for i, cl := range clients {
			eventually(t, 2*time.Second, func() bool { return cl.Get(ctx, k).Err() == redis.Nil },
				"round %d: node %d: want the key released", round, i)
		}
	}
}

// killFirst is a go-redis hook that, when armed, has the server close
// every client connection but admin's before the next lock request
// (SET, EVALSHA) goes out, once.
type killFirst struct {
	admin *redis.Client
	armed atomic.Bool
}

func (h *killFirst) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *killFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); (n == "set" || n == "evalsha") && h.armed.CompareAndSwap(true, false) {
			// Not the admin's own connection (SKIPME yes).
			if err := h.admin.ClientKillByFilter(ctx, "TYPE", "normal").Err(); err != nil {
				return err
			}
		}
		return next(ctx, cmd)
	}
}

func (h *killFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestStoppedNodeBounded: SIGSTOPped nodes accept connections and never
// answer. TryLock still returns within the per-node timeout, although the
// go-redis clients have a 10s read timeout and ignore context deadlines.
func TestStoppedNodeBounded(t *testing.T) {
	nodes := redistest.Nodes(t, 5)
	clients := timeoutClients(t, nodes, 10*time.Second)
	const nodeTimeout = 100 * time.Millisecond
	const margin = 400 * time.Millisecond // generous for a loaded 2-core machine under -race
	c := newClient(t, clients, redlock.WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	// Make first contact (run_id) while every node answers.
	l, err := c.TryLock(ctx, key(t), time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))

	require.NoError(t, nodes[0].Pause())
	require.NoError(t, nodes[1].Pause())
	start := time.Now()
	l, err = c.TryLock(ctx, key(t), 5*time.Second)
	took := time.Since(start)
	require.NoError(t, err, "three answering nodes are a majority")
	require.Less(t, took, nodeTimeout+margin)
	start = time.Now()
	require.NoError(t, l.Unlock(ctx))
	require.Less(t, time.Since(start), nodeTimeout+margin, "Unlock does not wait for stopped nodes")

	require.NoError(t, nodes[2].Pause())
	start = time.Now()
	_, err = c.TryLock(ctx, key(t), 5*time.Second)
	took = time.Since(start)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrUnreachable)
	require.Less(t, took, nodeTimeout+margin)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	for i := 0; i < 3; i++ {
		require.Equal(t, "failed", qe.Nodes[i].Status, "node %d", i)
		require.ErrorIs(t, qe.Nodes[i].Err, node.ErrNodeTimeout, "node %d", i)
	}
	for _, n := range nodes[:3] {
		require.NoError(t, n.Resume())
	}
}

// TestStoppedNodeBeforeFirstContact: two of five nodes accept
// connections but never answer from the start. The client's first round
// waits for them at most max(node timeout, firstContactTimeout); later
// rounds, won by the three others, do not wait for them at all, although
// they were never identified.
func TestStoppedNodeBeforeFirstContact(t *testing.T) {
	nodes := redistest.Nodes(t, 5)
	clients := timeoutClients(t, nodes, 10*time.Second)
	require.NoError(t, nodes[0].Pause())
	require.NoError(t, nodes[1].Pause())
	t.Cleanup(func() {
		_ = nodes[0].Resume()
		_ = nodes[1].Resume()
	})
	const nodeTimeout = 300 * time.Millisecond
	const margin = 400 * time.Millisecond // generous for a loaded 2-core machine under -race
	c := newClient(t, clients, redlock.WithNodeTimeout(nodeTimeout))
	ctx := context.Background()

	start := time.Now()
	l, err := c.TryLock(ctx, key(t), 5*time.Second)
	require.NoError(t, err, "three answering nodes are a majority")
	require.Less(t, time.Since(start), max(nodeTimeout, firstContactTimeout)+margin)
	require.NoError(t, l.Unlock(ctx))

	for range 3 {
		start = time.Now()
		l, err = c.TryLock(ctx, key(t), 5*time.Second)
		took := time.Since(start)
		require.NoError(t, err)
		require.Less(t, took, nodeTimeout/2, "a won round waited for nodes that never answered")
		require.NoError(t, l.Unlock(ctx))
	}
}

// TestDefaultNodeTimeoutBoundsRound: with no WithNodeTimeout, a round
// whose majority is stopped waits the default, ttl/20 clamped to
// [5ms, 200ms], and no longer. (The other tests' newClient sets a
// generous timeout; this one uses redlock.New as a user would.)
func TestDefaultNodeTimeoutBoundsRound(t *testing.T) {
	nodes := redistest.Nodes(t, 5)
	clients := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr(), ReadTimeout: 10 * time.Second, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = n.Resume()
		}
	})
	c, err := redlock.New(clients)
	require.NoError(t, err)
	ctx := context.Background()
	l, err := c.TryLock(ctx, key(t), time.Second) // first contact while every node answers
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	for _, n := range nodes[:3] {
		require.NoError(t, n.Pause())
	}
	const margin = 400 * time.Millisecond // generous for a loaded 2-core machine under -race
	for _, tc := range []struct {
		ttl, want time.Duration
	}{
		{10 * time.Second, 200 * time.Millisecond}, // ttl/20 = 500ms, clamped
		{4 * time.Second, 200 * time.Millisecond},
		{2 * time.Second, 100 * time.Millisecond},
	} {
		start := time.Now()
		_, err := c.TryLock(ctx, key(t), tc.ttl)
		took := time.Since(start)
		require.ErrorIs(t, err, redlock.ErrUnreachable, "ttl %v", tc.ttl)
		require.GreaterOrEqual(t, took, tc.want, "ttl %v: the round gave up before the default node timeout", tc.ttl)
		require.Less(t, took, tc.want+margin, "ttl %v: the round waited past the default node timeout", tc.ttl)
	}
}

// TestOwnConnFreshRESP3Clients: lock cycles on fresh RESP3 go-redis
// clients (maintenance notifications in auto mode, which Redis 7
// refuses), while other goroutines open connections of the same clients.
// go-redis writes its options when a connection meets the refusal; a
// leader that held its connection through a redis.Conn, which shares
// those options under a lock of its own, made that a data race (see
// leaderConn). A hook slows the refused handshake, so that connections
// opened over 30ms all meet it, and the leaders take theirs meanwhile.
// It is a test of what the race detector finds: it fails only under
// -race, and only in the rounds where the two writes overlap, hence the
// 15 rounds.
func TestOwnConnFreshRESP3Clients(t *testing.T) {
	nodes := redistest.Nodes(t, 3)
	ctx := context.Background()
	for round := range 15 {
		clients := make([]redis.UniversalClient, len(nodes))
		for i, nd := range nodes {
			cl := redis.NewClient(&redis.Options{Addr: nd.Addr(), Protocol: 3, MaxRetries: -1,
				DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
			t.Cleanup(func() { _ = cl.Close() })
			cl.AddHook(redistest.SlowHandshake(20 * time.Millisecond))
			clients[i] = cl
		}
		// Several lock clients on the same go-redis clients: their
		// leaders hold several connections, so some are new ones.
		// A per-node timeout no load reaches: fresh connections, each
		// with a slowed handshake, and the race detector on 2 cores.
		lcs := make([]*redlock.Client, 6)
		for i := range lcs {
			lcs[i] = newClient(t, clients, redlock.WithNodeTimeout(5*time.Second))
		}
		var wg sync.WaitGroup
		errs := make(chan error, 256)
		for g := range 15 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(g) * 2 * time.Millisecond) // staggered over 30ms
				if g%5 == 0 {
					for _, cl := range clients {
						errs <- cl.Ping(ctx).Err()
					}
					return
				}
				c := lcs[g%len(lcs)]
				for i := range 5 {
					l, err := c.TryLock(ctx, fmt.Sprintf("%s-%d-%d-%d", key(t), round, g, i), 10*time.Second)
					if err == nil {
						err = l.Unlock(ctx)
					}
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err, "round %d", round)
		}
	}
}

// TestDuplicateByRunID: one server reached under two addresses is caught
// by its run_id on first contact, and counted once.
func TestDuplicateByRunID(t *testing.T) {
	nodes, clients := cluster(t, 3)
	alias := redis.NewClient(&redis.Options{Addr: strings.Replace(nodes[0].Addr(), "127.0.0.1", "localhost", 1)})
	t.Cleanup(func() { _ = alias.Close() })
	c, err := redlock.New([]redis.UniversalClient{clients[0], clients[1], alias})
	require.NoError(t, err, "New does no I/O")
	k := key(t)
	_, err = c.TryLock(context.Background(), k, time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorContains(t, err, "same server (run_id")
	_, err = c.Lock(context.Background(), k, time.Second)
	require.ErrorIs(t, err, redlock.ErrInvalid, "the client stays refused")
	for _, cl := range clients {
		eventually(t, time.Second, func() bool { return get(t, cl, k) == "" }, "the refused attempt left a key")
	}
}

// A malformed reply must yield a node error, never a panic. The tests
// below put a fake server that speaks just enough RESP for go-redis to
// connect in place of a node, and make it answer one command with garbage.

// fakeRedis is a loopback TCP server answering each RESP command with
// whatever its reply function returns: nil closes the connection.
type fakeRedis struct {
	l     net.Listener
	reply func(cmd []string) []byte
	wg    sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// startFake starts a fake server; it is closed, and its goroutines ended,
// when the test ends.
func startFake(t testing.TB, reply func(cmd []string) []byte) *fakeRedis {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fakeRedis{l: l, reply: reply, conns: make(map[net.Conn]struct{})}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *fakeRedis) Addr() string { return f.l.Addr().String() }

func (f *fakeRedis) accept() {
	defer f.wg.Done()
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			_ = c.Close()
			return
		}
		f.conns[c] = struct{}{}
		f.wg.Add(1)
		f.mu.Unlock()
		go f.serve(c)
	}
}

func (f *fakeRedis) serve(c net.Conn) {
	defer f.wg.Done()
	defer func() {
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
		_ = c.Close()
	}()
	r := bufio.NewReader(c)
	for {
		cmd, err := readCommand(r)
		if err != nil {
			return
		}
		out := f.reply(cmd)
		if out == nil {
			return
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func (f *fakeRedis) close() {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	_ = f.l.Close()
	f.wg.Wait()
}

// readCommand reads one command: an array of bulk strings, as go-redis
// sends them.
func readCommand(r *bufio.Reader) ([]string, error) {
	n, err := readLen(r, '*')
	if err != nil {
		return nil, err
	}
	if n < 1 || n > 1024 {
		return nil, fmt.Errorf("fake: command of %d arguments", n)
	}
	cmd := make([]string, n)
	for i := range cmd {
		size, err := readLen(r, '$')
		if err != nil {
			return nil, err
		}
		if size < 0 || size > 1<<20 {
			return nil, fmt.Errorf("fake: argument of %d bytes", size)
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		cmd[i] = string(b[:size])
	}
	return cmd, nil
}

func readLen(r *bufio.Reader, prefix byte) (int, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	line = strings.TrimRight(line, "\r\n")
	if len(line) < 2 || line[0] != prefix {
		return 0, fmt.Errorf("fake: want %q, got %q", prefix, line)
	}
	return strconv.Atoi(line[1:])
}

// replyPlan says which command gets the garbage; every other command gets
// a plausible answer. resp3 makes the fake accept HELLO 3, so that go-redis
// reads the replies as RESP3 (with push and attribute frames).
type replyPlan struct {
	// "HELLO", "INFO", "SET" (an acquire of one key), "EVALSHA" or "EVAL"
	// (EVALSHA then answers NOSCRIPT). SET otherwise answers a refusal,
	// so that the acquire script runs.
	target  string
	garbage []byte // nil: close the connection instead of answering
	resp3   bool
	runID   string
}

func (p replyPlan) reply(cmd []string) []byte {
	name := strings.ToUpper(cmd[0])
	if name == p.target {
		return p.garbage
	}
	switch name {
	case "HELLO":
		if p.resp3 {
			return []byte("%3\r\n+server\r\n+redis\r\n+version\r\n+7.0.15\r\n+proto\r\n:3\r\n")
		}
		return []byte("-ERR unknown command 'HELLO'\r\n")
	case "CLIENT", "AUTH", "SELECT", "PING":
		return []byte("+OK\r\n")
	case "INFO":
		info := "# Server\r\nredis_version:7.0.15\r\nrun_id:" + p.runID + "\r\nuptime_in_seconds:86400\r\n"
		return []byte("$" + strconv.Itoa(len(info)) + "\r\n" + info + "\r\n")
	case "SET":
		return []byte("$-1\r\n")
	case "EVALSHA":
		if p.target == "EVAL" {
			return []byte("-NOSCRIPT No matching script. Please use EVAL.\r\n")
		}
	}
	return []byte("-ERR the fake runs no scripts\r\n")
}

// namedReply is a reply a fake node gives, named for its subtest.
type namedReply struct {
	name  string
	reply []byte
}

// malformed are replies no script of ours returns. Each is given whole;
// the connection stays open after it unless noted.
var malformed = []namedReply{
	{"status OK", []byte("+OK\r\n")},
	{"integer 42", []byte(":42\r\n")},
	{"integer -7", []byte(":-7\r\n")},
	{"integer overflow", []byte(":99999999999999999999999\r\n")},
	{"null bulk", []byte("$-1\r\n")},
	{"null array", []byte("*-1\r\n")},
	{"bulk string", []byte("$3\r\nabc\r\n")},
	{"bulk of digits", []byte("$1\r\n1\r\n")},
	{"array of ones", []byte("*2\r\n:1\r\n:1\r\n")},
	{"nested array", []byte("*1\r\n*1\r\n*1\r\n:1\r\n")},
	{"error", []byte("-ERR boom\r\n")},
	{"error without text", []byte("-\r\n")},
	{"NOSCRIPT loop", []byte("-NOSCRIPT No matching script.\r\n")},
	{"invalid bytes", []byte("\x00\xff\xfe garbage \x7f\r\n")},
	{"unknown type", []byte("?1\r\n")},
	{"no CRLF", []byte("+OK\n")},
	{"empty line", []byte("\r\n")},
	{"negative bulk length", []byte("$-5\r\n")},
	{"bad bulk length", []byte("$x\r\n")},
	{"bulk shorter than said", []byte("$10\r\nabc\r\n")}, // then silence
	{"truncated line", []byte(":1")},                     // then silence
	{"large bulk length", []byte("$1000000\r\n")},        // then silence
	{"RESP3 null", []byte("_\r\n")},
	{"RESP3 double", []byte(",1.0\r\n")},
	{"RESP3 boolean", []byte("#t\r\n")},
	{"RESP3 big number", []byte("(1\r\n")},
	{"RESP3 map", []byte("%1\r\n:1\r\n:1\r\n")},
	{"RESP3 map with array key", []byte("%1\r\n*0\r\n:1\r\n")},
	{"RESP3 set", []byte("~1\r\n:1\r\n")},
	{"RESP3 verbatim", []byte("=5\r\ntxt:1\r\n")},
	{"RESP3 short verbatim", []byte("=1\r\n1\r\n")},
	{"RESP3 blob error", []byte("!4\r\nboom\r\n")},
	{"RESP3 attribute", []byte("|1\r\n+a\r\n+b\r\n")},
	{"RESP3 push", []byte(">2\r\n+message\r\n+x\r\n")},
	{"closed connection", nil},
}

// fencedMalformed are replies to a fenced acquire, which returns {1, f}
// with f > 0 or {0, 0}, that its parser must refuse.
var fencedMalformed = []namedReply{
	{"vote with zero fence", []byte("*2\r\n:1\r\n:0\r\n")},
	{"vote with negative fence", []byte("*2\r\n:1\r\n:-3\r\n")},
	{"fence as bulk", []byte("*2\r\n:1\r\n$1\r\n1\r\n")},
	{"vote as bulk", []byte("*2\r\n$1\r\n1\r\n:5\r\n")},
	{"null fence", []byte("*2\r\n:1\r\n$-1\r\n")},
	{"three elements", []byte("*3\r\n:1\r\n:1\r\n:1\r\n")},
	{"one element", []byte("*1\r\n:1\r\n")},
	{"empty array", []byte("*0\r\n")},
	{"bare vote", []byte(":1\r\n")},
	{"refusal with a fence", []byte("*2\r\n:0\r\n:5\r\n")},
	{"taken marker", []byte("*2\r\n:-1\r\n:1\r\n")},
	{"nested vote", []byte("*2\r\n*1\r\n:1\r\n:1\r\n")},
	{"RESP3 map", []byte("%1\r\n:1\r\n:1\r\n")},
}

// hugeLengths make go-redis itself panic ("makeslice: len out of range")
// while it reads the reply, on the goroutine that sent the command. They
// run in a child process, so that a panic fails one test, not the run.
var hugeLengths = []namedReply{
	{"enormous bulk length", []byte("$9223372036854775807\r\n")},
	{"enormous array length", []byte("*9223372036854775807\r\n")},
	{"enormous map length", []byte("%4611686018427387904\r\n")},
}

var replyTargets = []string{"SET", "EVALSHA", "EVAL", "INFO", "HELLO"}

// grants are the malformed replies that are a grant to target: +OK to
// SET NX PX.
func grants(target, reply string) bool {
	return target == "SET" && reply == "+OK\r\n"
}

// fakeClient returns a client for the fake with one connection and no
// retries.
func fakeClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:          addr,
		DialTimeout:   time.Second,
		ReadTimeout:   time.Second,
		WriteTimeout:  time.Second,
		MaxRetries:    -1,
		DialerRetries: 1,
		PoolSize:      2,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// replyNodeTimeout bounds each request to the fake: replies that stop
// short make go-redis wait for the rest.
const replyNodeTimeout = 300 * time.Millisecond

// tryFake makes one lock attempt on a set whose only node is the fake.
func tryFake(t testing.TB, plan replyPlan) error {
	t.Helper()
	f := startFake(t, plan.reply)
	rl, err := redlock.New([]redis.UniversalClient{fakeClient(t, f.Addr())}, redlock.WithNodeTimeout(replyNodeTimeout))
	require.NoError(t, err)
	l, err := rl.TryLock(context.Background(), key(t), 10*time.Second)
	if err == nil {
		t.Fatalf("want the garbage node's vote refused, got the lock %v", l.Token())
	}
	return err
}

// requireNodeFailed checks that err is a failed acquisition whose every
// node failed with an error.
func requireNodeFailed(t testing.TB, err error) {
	t.Helper()
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrUnreachable)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	for _, n := range qe.Nodes {
		if n.Status != "failed" || n.Err == nil {
			t.Fatalf("node %d: want failed with an error, got %v", n.Node, n)
		}
	}
}

// TestReplyMalformed answers each command of a lock attempt with each kind
// of garbage, on a single-node set: the node fails with an error (but for
// +OK to SET NX PX, which is a grant).
func TestReplyMalformed(t *testing.T) {
	for _, target := range replyTargets {
		for _, resp3 := range []bool{false, true} {
			for i, m := range malformed {
				if grants(target, string(m.reply)) {
					continue
				}
				name := fmt.Sprintf("%s/resp3=%v/%s", target, resp3, m.name)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					err := tryFake(t, replyPlan{target: target, garbage: m.reply, resp3: resp3, runID: fmt.Sprintf("fake%036d", i)})
					requireNodeFailed(t, err)
				})
			}
		}
	}
}

// TestReplyMalformedFenced answers a fenced acquire with replies its
// parser must refuse: the node fails with an error, on the first contact
// (EVAL, pipelined with INFO) and on the next (EVALSHA, or EVAL after
// NOSCRIPT).
func TestReplyMalformedFenced(t *testing.T) {
	for _, target := range []string{"EVALSHA", "EVAL"} {
		for _, resp3 := range []bool{false, true} {
			for i, m := range fencedMalformed {
				name := fmt.Sprintf("%s/resp3=%v/%s", target, resp3, m.name)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					plan := replyPlan{target: target, garbage: m.reply, resp3: resp3, runID: fmt.Sprintf("fenced%034d", i)}
					f := startFake(t, plan.reply)
					rl, err := redlock.New([]redis.UniversalClient{fakeClient(t, f.Addr())},
						redlock.WithNodeTimeout(replyNodeTimeout), redlock.WithFencing())
					require.NoError(t, err)
					for attempt := range 2 {
						l, err := rl.TryLock(context.Background(), key(t), 10*time.Second)
						if err == nil {
							t.Fatalf("attempt %d: want the garbage node's vote refused, got the lock with fence %d", attempt, l.Fence())
						}
						requireNodeFailed(t, err)
					}
				})
			}
		}
	}
}

// TestReplyMalformedAmongRealNodes puts a garbage node in a set of four
// (quorum 3) with three real ones: with the real nodes free the lock is won
// and released; with one real node held by another owner the garbage
// node's vote is not counted, the attempt fails, and what it took on the
// real nodes is released.
func TestReplyMalformedAmongRealNodes(t *testing.T) {
	_, real := cluster(t, 3)
	ctx := context.Background()
	for i, m := range malformed {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			plan := replyPlan{target: "EVALSHA", garbage: m.reply, runID: fmt.Sprintf("fake%036d", i)}
			f := startFake(t, plan.reply)
			nodes := append(append([]redis.UniversalClient(nil), real...), fakeClient(t, f.Addr()))
			rl := newClient(t, nodes, redlock.WithNodeTimeout(replyNodeTimeout))

			k := key(t)
			l, err := rl.TryLock(ctx, k, 10*time.Second)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(ctx))

			k = key(t)
			holdForeign(t, real[2], k, 10*time.Second)
			_, err = rl.TryLock(ctx, k, 10*time.Second)
			require.ErrorIs(t, err, redlock.ErrNotObtained)
			var qe *redlock.QuorumError
			require.ErrorAs(t, err, &qe)
			if st := qe.Nodes[2].Status; st != "taken" {
				t.Fatalf("node 2: want taken, got %v", qe.Nodes[2])
			}
			if n := qe.Nodes[3]; n.Status != "failed" || n.Err == nil {
				if n.Status != "pending" { // the round may decide without it
					t.Fatalf("node 3 (garbage): want failed with an error, got %v", n)
				}
			}
			if qe.OK > 2 {
				t.Fatalf("want at most 2 votes (the free real nodes), got %d", qe.OK)
			}
			for j, c := range real[:2] {
				eventually(t, 5*time.Second, func() bool { return get(t, c, k) == "" },
					"node %d: want the lost attempt released", j)
			}
			if got := get(t, real[2], k); got != foreignToken {
				t.Fatalf("node 2: want the other owner's token kept, got %q", got)
			}
		})
	}
}

// replyChildEnv names the case a child process of TestReplyHugeLength runs.
const replyChildEnv = "REDLOCK_REPLY_CHILD"

// TestReplyHugeLength answers with lengths so large that go-redis panics
// while reading them. The library must turn that into a node error. Each
// case runs in a child process; a panic there fails this test with the
// child's stack instead of killing the whole test binary.
func TestReplyHugeLength(t *testing.T) {
	if name := os.Getenv(replyChildEnv); name != "" {
		for _, h := range hugeLengths {
			for _, target := range replyTargets {
				if h.name+"/"+target == name {
					requireNodeFailed(t, tryFake(t, replyPlan{target: target, garbage: h.reply, runID: "fake-huge"}))
					return
				}
			}
		}
		t.Fatalf("unknown case %q", name)
	}
	for _, h := range hugeLengths {
		for _, target := range replyTargets {
			name := h.name + "/" + target
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestReplyHugeLength$", "-test.count=1", "-test.timeout=50s")
				cmd.Env = append(os.Environ(), replyChildEnv+"="+name)
				out, err := cmd.CombinedOutput()
				if err == nil {
					return
				}
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("running the child: %v", err)
				}
				if i := strings.Index(string(out), "panic: "); i >= 0 {
					t.Fatalf("reply %q to %s: want a node error, got a panic that kills the process:\n%s", h.reply, target, firstLines(string(out[i:]), 16))
				}
				t.Fatalf("reply %q to %s: child failed (%v):\n%s", h.reply, target, err, out)
			})
		}
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// burst calls f(0) .. f(n-1) at once, each on a goroutine of its own,
// and returns their errors and the longest call.
func burst(n int, f func(i int) error) ([]error, time.Duration) {
	errs := make([]error, n)
	took := make([]time.Duration, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			errs[i] = f(i)
			took[i] = time.Since(t0)
		}()
	}
	close(start)
	wg.Wait()
	return errs, slices.Max(took)
}

// countErrs returns how many of errs are not nil, and the first.
func countErrs(errs []error) (int, error) {
	n := 0
	var first error
	for _, err := range errs {
		if err != nil {
			if n++; n == 1 {
				first = err
			}
		}
	}
	return n, first
}

// TestBurstOnBusyNodesSucceeds: 10 000 TryLocks at once on distinct
// keys, then 10 000 Unlocks at once, on 3 healthy nodes with a 20s
// per-node timeout: every call succeeds, and no key is left. A node
// that answers, however many requests wait for it, never counts as
// failed: a request that finds thousands of others queued for its node
// waits its turn rather than failing at once as if the node were down
// (which would fail TryLock with ErrUnreachable and Unlock with
// ErrNotHeld).
func TestBurstOnBusyNodesSucceeds(t *testing.T) {
	const n = 10000
	// go-redis's own timeouts as long as the per-node timeout: a socket
	// that a loaded node drains slowly is not a failed node either.
	clients := patientClients(t, redistest.Nodes(t, 3))
	rl := newClient(t, clients, redlock.WithNodeTimeout(20*time.Second))
	ctx := context.Background()
	warm, err := rl.TryLock(ctx, key(t), 10*time.Second) // dial and identify the nodes first
	require.NoError(t, err)
	require.NoError(t, warm.Unlock(ctx))

	prefix := key(t)
	locks := make([]*redlock.Lock, n)
	errs, took := burst(n, func(i int) error {
		var err error
		locks[i], err = rl.TryLock(ctx, fmt.Sprintf("%s-%d", prefix, i), time.Minute)
		return err
	})
	failed, first := countErrs(errs)
	t.Logf("TryLock burst: %d failed, longest call %v", failed, took)
	require.Zero(t, failed, "want every TryLock of the burst won (first error: %v)", first)

	errs, took = burst(n, func(i int) error { return locks[i].Unlock(ctx) })
	failed, first = countErrs(errs)
	t.Logf("Unlock burst: %d failed, longest call %v", failed, took)
	require.Zero(t, failed, "want every Unlock of the burst to succeed (first error: %v)", first)
	for i, c := range clients {
		eventually(t, 10*time.Second, func() bool { return c.DBSize(ctx).Val() == 0 },
			"want no key left on node %d, got %d", i+1, c.DBSize(ctx).Val())
	}
}

// TestSilentNodeFailsWithinNodeTimeout: a node stopped (SIGSTOP) behind
// a go-redis client with no read timeout never answers, so its queue
// fills. Waiting for room in it must not turn a silent node into a
// hang: with 1 of 3 nodes stopped, a burst of 10 000 TryLocks is won on
// the other two, each call as soon as they answered, not after the
// per-node timeout; with 2 of 3 stopped, each call of a second burst
// ends with ErrUnreachable within about the per-node timeout.
func TestSilentNodeFailsWithinNodeTimeout(t *testing.T) {
	const n = 10000
	// Long enough for the two nodes that answer to answer a burst of
	// 10 000 under -race on a loaded machine.
	const nodeTimeout = 3 * time.Second
	nodes := redistest.Nodes(t, 3)
	clients := unboundedClients(t, nodes)
	rl := newClient(t, clients, redlock.WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	warm, err := rl.TryLock(ctx, key(t), 10*time.Second) // dial and identify the nodes first
	require.NoError(t, err)
	require.NoError(t, warm.Unlock(ctx))

	for _, nd := range nodes[1:] {
		t.Cleanup(func() { _ = nd.Resume() }) // before Close (cleanups run last first)
	}
	require.NoError(t, nodes[2].Pause())
	prefix := key(t)
	errs, took := burst(n, func(i int) error {
		_, err := rl.TryLock(ctx, fmt.Sprintf("%s-a%d", prefix, i), time.Minute)
		return err
	})
	failed, first := countErrs(errs)
	t.Logf("1 of 3 stopped: %d failed, longest call %v", failed, took)
	require.Zero(t, failed, "want every TryLock won on the 2 nodes that answer (first error: %v)", first)
	require.Less(t, took, nodeTimeout, "want each TryLock decided by the nodes that answer, not waiting for the stopped one")

	require.NoError(t, nodes[1].Pause())
	errs, took = burst(n, func(i int) error {
		_, err := rl.TryLock(ctx, fmt.Sprintf("%s-b%d", prefix, i), time.Minute)
		return err
	})
	t.Logf("2 of 3 stopped: longest call %v", took)
	for i, err := range errs {
		require.ErrorIs(t, err, redlock.ErrUnreachable, "TryLock %d with 2 of 3 nodes stopped", i)
	}
	// A call waits nodeTimeout for the stopped nodes, and its lost
	// round's clean-up release of the node that granted up to as long
	// again; the rest is a loaded machine running 10 000 goroutines
	// under -race.
	require.Less(t, took, 2*nodeTimeout+3*time.Second, "want each TryLock bounded by its per-node timeout")
}

// restartedNodes returns the indexes of the nodes refused by the restart
// guard in err.
func restartedNodes(err error) []int {
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return nil
	}
	var out []int
	for _, r := range qe.Nodes {
		if errors.Is(r.Err, node.ErrNodeRestarted) {
			out = append(out, r.Node)
		}
	}
	return out
}

// requireVotes waits until c wins a lock that only the given nodes can
// grant: the others hold the key for someone else.
func requireVotes(t *testing.T, c *redlock.Client, clients []redis.UniversalClient, wait time.Duration, nodes ...int) {
	t.Helper()
	ctx := context.Background()
	eventually(t, wait, func() bool {
		k := key(t)
		for i, cl := range clients {
			if !slices.Contains(nodes, i) {
				holdForeign(t, cl, k, time.Minute)
			}
		}
		l, err := c.TryLock(ctx, k, 10*time.Second)
		if err != nil {
			return false
		}
		require.NoError(t, l.Unlock(ctx))
		return true
	}, "nodes %v never voted together", nodes)
}

// TestRestartGuard is the scenario. A holds the lock on nodes
// {0,1,2} of 5; node 0 is killed and restarted at once with empty memory.
// Without the guard B wins on {0,3,4} while A's lock is still valid: two
// holders. With the guard node 0's vote does not count and B cannot win,
// even for a client that knew node 0 from before the restart and has
// seen no error since. Once node 0 has been up for the guard's duration
// it votes again.
func TestRestartGuard(t *testing.T) {
	t.Parallel()
	nodes, clients := cluster(t, 5)
	ctx := context.Background()
	const guard = 1500 * time.Millisecond
	guarded := newClient(t, clients, redlock.WithRestartGuard(guard))

	// The nodes have just started: none may vote yet.
	_, err := guarded.TryLock(ctx, key(t), 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrUnreachable)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	for _, r := range qe.Nodes {
		if r.Status != "pending" { // the round stops at 3 refusals
			require.ErrorIs(t, r.Err, node.ErrNodeRestarted, "fresh nodes are refused: %v", r)
		}
	}
	require.GreaterOrEqual(t, len(restartedNodes(err)), 3)

	// Once they are old enough the guarded client locks on {0,1,2} and
	// on {2,3,4}: it has seen every node as old.
	requireVotes(t, guarded, clients, guard+3*time.Second, 0, 1, 2)
	requireVotes(t, guarded, clients, guard+3*time.Second, 2, 3, 4)

	// A wins on {0,1,2}: nodes 3 and 4 are busy during its attempt.
	k := key(t)
	holdForeign(t, clients[3], k, time.Minute)
	holdForeign(t, clients[4], k, time.Minute)
	a, err := newClient(t, clients).TryLock(ctx, k, 30*time.Second)
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		require.Equal(t, a.Token(), get(t, clients[i], k), "node %d", i)
	}
	for _, cl := range clients[3:] {
		require.NoError(t, cl.Del(ctx, k).Err())
	}

	require.NoError(t, nodes[0].Restart())
	require.Empty(t, get(t, clients[0], k), "node 0 forgot A's key")

	// With the guard: node 0 does not count, so B gets 2 votes of 3.
	_, err = guarded.TryLock(ctx, k, 30*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained, "B won while A holds the lock")
	require.Equal(t, []int{0}, restartedNodes(err), "%v", err)
	require.Positive(t, a.Validity())
	// TryLock returns once the round is decided; the lost attempt's
	// grants (nodes 0, 3 and 4) are released after.
	eventually(t, 2*time.Second, func() bool {
		return get(t, clients[0], k) == "" && get(t, clients[3], k) == "" && get(t, clients[4], k) == ""
	}, "the lost attempt's grants on nodes 0, 3 and 4 were not released")

	// Without the guard: B wins on {0,3,4} while A's lock is valid.
	b, err := newClient(t, clients).TryLock(ctx, k, 30*time.Second)
	require.NoError(t, err, "the violation the guard prevents")
	require.Positive(t, a.Validity())
	require.Positive(t, b.Validity())
	require.Equal(t, b.Token(), get(t, clients[0], k))
	require.Equal(t, a.Token(), get(t, clients[1], k), "A still holds node 1: two holders")
	require.NoError(t, b.Unlock(ctx))

	// The guard is time-bound: once node 0 has been up for the guard's
	// duration, it votes again.
	requireVotes(t, guarded, clients, guard+3*time.Second, 0, 3, 4)
	require.ErrorIs(t, a.Unlock(ctx), redlock.ErrNotHeld, "A lost its majority with node 0's memory")
}

// TestRestartGuardExtend: an Extend does not count a node that restarted
// since the lock was taken either.
func TestRestartGuardExtend(t *testing.T) {
	t.Parallel()
	nodes, clients := cluster(t, 3)
	ctx := context.Background()
	const guard = time.Second
	c := newClient(t, clients, redlock.WithRestartGuard(guard))
	requireVotes(t, c, clients, guard+3*time.Second, 0, 1)
	requireVotes(t, c, clients, guard+3*time.Second, 1, 2)
	l, err := c.TryLock(ctx, key(t), 30*time.Second)
	require.NoError(t, err)
	require.NoError(t, nodes[0].Restart())
	// Re-create the key on node 0, as a grant by its new incarnation
	// would: only the guard can refuse it.
	require.NoError(t, clients[0].Set(ctx, l.Key(), l.Token(), 30*time.Second).Err())
	require.NoError(t, nodes[1].Kill())
	err = l.Extend(ctx, 30*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	require.Equal(t, []int{0}, restartedNodes(err), "%v", err)
}

// TestRestartGuardOptions: the guard needs plain *redis.Client nodes, and
// a non-negative duration.
func TestRestartGuardOptions(t *testing.T) {
	_, clients := cluster(t, 1)
	type wrapped struct{ *redis.Client }
	_, err := redlock.New([]redis.UniversalClient{wrapped{clients[0].(*redis.Client)}}, redlock.WithRestartGuard(time.Second))
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = redlock.New(clients, redlock.WithRestartGuard(-time.Second))
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = redlock.New(clients, redlock.WithRestartGuard(0))
	require.NoError(t, err, "0 turns the guard off")
}

// TestRestartGuardRefusesWithTimeoutClone: a go-redis WithTimeout clone
// shares its parent's pools, whose dials run the parent's hooks, so the
// guard's dial count on the clone never moves and a node restarted a
// moment before would vote. New refuses such a node (ErrInvalid, naming
// it), whether or not the parent is guarded itself, without connecting
// anywhere; the plain client is accepted and refuses the restarted node.
func TestRestartGuardRefusesWithTimeoutClone(t *testing.T) {
	t.Parallel()
	nodes, clients := cluster(t, 3)
	ctx := context.Background()
	const guard = time.Second
	plain := clients[1].(*redis.Client)
	connections := func() string {
		info, err := plain.Info(ctx, "stats").Result()
		require.NoError(t, err)
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(line, "total_connections_received:"); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatalf("INFO stats has no total_connections_received")
		return ""
	}

	refused := func(nodes []redis.UniversalClient, node string) {
		t.Helper()
		_, err := redlock.New(nodes, redlock.WithRestartGuard(guard))
		require.ErrorIs(t, err, redlock.ErrInvalid, "a clone's dials are not seen by its hooks")
		require.ErrorContains(t, err, node)
		require.ErrorContains(t, err, "WithTimeout")
	}
	before := connections()
	refused([]redis.UniversalClient{clients[0], plain.WithTimeout(time.Second), clients[2]}, "node 2 ")
	refused([]redis.UniversalClient{plain.WithTimeout(time.Second).WithTimeout(2 * time.Second)}, "node 1 ")

	// The plain client passes, and its guard works through the probe.
	c := newClient(t, []redis.UniversalClient{plain}, redlock.WithRestartGuard(guard))
	require.Equal(t, before, connections(), "New connected to the node")
	// A clone made after the parent's hook was installed is refused too.
	refused([]redis.UniversalClient{clients[0], plain.WithTimeout(time.Second), clients[2]}, "node 2 ")
	require.NoError(t, plain.WithTimeout(time.Second).Ping(ctx).Err(), "the clone works after the probe")

	requireVotes(t, c, []redis.UniversalClient{plain}, guard+3*time.Second, 0)
	require.NoError(t, nodes[1].Restart())
	_, err := c.TryLock(ctx, key(t), 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotObtained, "a node restarted a moment ago voted")
	require.Equal(t, []int{0}, restartedNodes(err), "%v", err)
}

// A node given to the library may itself be replicated: a master with a
// replica, managed by Sentinel, reached through go-redis's FailoverClient.
// See docs/sentinel.md for what a failover inside one node means for
// safety.

// replicatedNode is a master and its replica on loopback.
type replicatedNode struct {
	name             string // the Sentinel master name
	master, replica  *redisnode.Node
	mClient, rClient *redis.Client
}

// startReplicated starts a master and a replica of it (which accepts
// writes, so that a test can remove a key from it alone to stand for a
// write that replication had not carried over yet), and waits until the
// replica is in sync.
func startReplicated(t testing.TB, name string) *replicatedNode {
	t.Helper()
	m := redistest.Nodes(t, 1)[0]
	r := redistest.Replica(t, m, "--replica-read-only", "no")
	return &replicatedNode{name: name, master: m, replica: r, mClient: redistest.Client(t, m), rClient: redistest.Client(t, r)}
}

// waitFor polls cond every 50ms until it holds or wait passes; it is the
// harness's eventually at a pace that does not flood a sentinel.
func waitFor(t testing.TB, wait time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	poll(t, wait, 50*time.Millisecond, cond, format, args...)
}

// startSentinel starts a Sentinel watching the masters with quorum 1, a
// 1s down-after and a 3s failover timeout, and returns its address once it
// knows every master and its replica. The process is killed when the test
// ends.
func startSentinel(t testing.TB, nodes ...*replicatedNode) string {
	t.Helper()
	bin, err := redisnode.LookPath()
	require.NoError(t, err)
	dir := t.TempDir()
	var lastErr error
	for range 3 { // the port may be taken between freeLoopbackPort and bind
		port := freeLoopbackPort(t)
		var conf strings.Builder
		fmt.Fprintf(&conf, "port %d\nbind 127.0.0.1\ndaemonize no\nlogfile \"\"\ndir %s\n", port, dir)
		for _, n := range nodes {
			fmt.Fprintf(&conf, "sentinel monitor %s 127.0.0.1 %d 1\n", n.name, n.master.Port())
			fmt.Fprintf(&conf, "sentinel down-after-milliseconds %s 1000\n", n.name)
			fmt.Fprintf(&conf, "sentinel failover-timeout %s 3000\n", n.name)
		}
		// Sentinel rewrites its configuration file: it must be writable.
		file := filepath.Join(dir, "sentinel.conf")
		require.NoError(t, os.WriteFile(file, []byte(conf.String()), 0o600))
		var log strings.Builder
		cmd := exec.Command(bin, file, "--sentinel")
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = &lockedWriter{w: &log}, nil
		cmd.Stderr = cmd.Stdout
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cmd.WaitDelay = time.Second
		require.NoError(t, cmd.Start())
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop := func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: 200 * time.Millisecond})
		ready := func() bool {
			for _, n := range nodes {
				rs, err := sc.Replicas(context.Background(), n.name).Result()
				if err != nil || len(rs) == 0 {
					return false
				}
			}
			return true
		}
		deadline := time.Now().Add(20 * time.Second)
		ok := false
	wait:
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				break wait
			default:
			}
			if ok = ready(); ok {
				break
			}
			time.Sleep(50 * time.Millisecond) // polling the sentinel's view
		}
		_ = sc.Close()
		if ok {
			t.Cleanup(stop)
			return addr
		}
		stop()
		lastErr = fmt.Errorf("sentinel on port %d did not come up knowing every master and replica; log:\n%s", port, log.String())
	}
	t.Fatal(lastErr)
	return ""
}

// lockedWriter serialises writes to w (the process writes from one
// goroutine, the test reads the log from another).
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// failoverClient returns a FailoverClient for the master name via the
// sentinel, with fail-fast settings like the harness's clients.
func failoverClient(t testing.TB, sentinel, name string) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    name,
		SentinelAddrs: []string{sentinel},
		DialTimeout:   250 * time.Millisecond,
		ReadTimeout:   500 * time.Millisecond,
		WriteTimeout:  500 * time.Millisecond,
		MaxRetries:    -1,
		DialerRetries: 1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestSentinel(t *testing.T) {
	t.Parallel()
	n0, n1 := startReplicated(t, "node0"), startReplicated(t, "node1")
	sentinel := startSentinel(t, n0, n1)
	plain := redistest.Clients(t, redistest.Nodes(t, 2))
	ctx := context.Background()
	// A failover client dials the sentinel first, then the master.
	opts := []redlock.Option{redlock.WithNodeTimeout(time.Second)}

	t.Run("one Sentinel-managed node", func(t *testing.T) {
		fo := failoverClient(t, sentinel, n0.name)
		nodes := []redis.UniversalClient{fo, plain[0], plain[1]}
		rl := newClient(t, nodes, opts...)
		k := key(t)
		// Hold the key on one plain node: the lock can only be won with
		// the failover node's vote.
		holdForeign(t, plain[1], k, 10*time.Second)
		l, err := rl.TryLock(ctx, k, 10*time.Second)
		require.NoError(t, err)
		if got := get(t, n0.mClient, k); got != l.Token() {
			t.Fatalf("master %s: want our token, got %q", n0.master.Addr(), got)
		}
		waitFor(t, 5*time.Second, func() bool { return get(t, n0.rClient, k) == l.Token() },
			"replica %s: want our token replicated", n0.replica.Addr())
		require.NoError(t, l.Extend(ctx, 10*time.Second))
		require.NoError(t, l.Unlock(ctx))
		if got := get(t, n0.mClient, k); got != "" {
			t.Fatalf("master: want the key released, got %q", got)
		}
	})

	t.Run("two Sentinel-managed nodes", func(t *testing.T) {
		// Two FailoverClients over different masters are different nodes;
		// go-redis gives both the placeholder address "FailoverClient".
		nodes := []redis.UniversalClient{failoverClient(t, sentinel, n0.name), failoverClient(t, sentinel, n1.name), plain[0]}
		rl, err := redlock.New(nodes, opts...)
		if err != nil {
			t.Fatalf("New over two FailoverClients of different masters: want a client, got %v", err)
		}
		k := key(t)
		holdForeign(t, plain[0], k, 10*time.Second)
		l, err := rl.TryLock(ctx, k, 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(ctx))
	})

	t.Run("the same Sentinel-managed node twice", func(t *testing.T) {
		// Caught by run_id on first contact, like two addresses of one server.
		nodes := []redis.UniversalClient{failoverClient(t, sentinel, n1.name), failoverClient(t, sentinel, n1.name), plain[0]}
		rl, err := redlock.New(nodes, opts...)
		if err == nil {
			_, err = rl.TryLock(ctx, key(t), 10*time.Second)
		}
		if !errors.Is(err, redlock.ErrInvalid) {
			t.Fatalf("want a duplicate-node ErrInvalid, got %v", err)
		}
	})

	// Last: it kills node0's master.
	t.Run("failover", func(t *testing.T) {
		fo := failoverClient(t, sentinel, n0.name)
		nodes := []redis.UniversalClient{fo, plain[0], plain[1]}
		rl := newClient(t, nodes, opts...)
		// a holds a short lease through the failover by auto-extension.
		const ttl = 3 * time.Second
		a, err := rl.TryLock(ctx, key(t), ttl)
		require.NoError(t, err)
		actx, stopExtending := context.WithCancel(ctx)
		defer stopExtending()
		require.NoError(t, a.AutoExtend(actx))
		k := a.Key()
		waitFor(t, 5*time.Second, func() bool { return get(t, n0.rClient, k) == a.Token() },
			"replica: want our token replicated")
		// Stand for asynchronous replication losing the write: the
		// replica, about to be promoted, never got it.
		require.NoError(t, n0.rClient.Del(ctx, k).Err())

		require.NoError(t, n0.master.Kill())
		sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel, MaxRetries: -1})
		defer sc.Close()
		waitFor(t, 30*time.Second, func() bool {
			addr, err := sc.GetMasterAddrByName(ctx, n0.name).Result()
			return err == nil && len(addr) == 2 && addr[1] == strconv.Itoa(n0.replica.Port())
		}, "sentinel: want %s promoted to master of %s", n0.replica.Addr(), n0.name)

		// The node works again through the same client ...
		k2 := key(t)
		holdForeign(t, plain[1], k2, 10*time.Second)
		deadline := time.Now().Add(15 * time.Second)
		for {
			l, err := rl.TryLock(ctx, k2, 10*time.Second)
			if err == nil {
				require.NoError(t, l.Unlock(ctx))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 15s: want a lock needing the failed-over node's vote, got %v", err)
			}
			time.Sleep(50 * time.Millisecond) // polling: the interval between tries
		}

		// ... but it forgot a's key: it votes for a second holder while a
		// still holds the lock, and the restart guard (d >= ttl) does not
		// refuse the vote: the new master is no young process. The other
		// two nodes outvote it.
		waitFor(t, 10*time.Second, func() bool {
			info, err := n0.rClient.Info(ctx, "server").Result()
			up, _ := strconv.Atoi(strings.TrimSpace(infoValue(info, "uptime_in_seconds")))
			return err == nil && up >= 5
		}, "replica: want an uptime above the guard's 3s")
		// a's extensions have put its key back on the new master by now
		// (a heal): the forgotten lock is remembered again at the next
		// extension. The window before it is what a failover opens:
		// with a's auto-extension stopped after a last Extend, the new
		// master forgets the key again.
		// An extension that returned at a quorum (or one of the stopped
		// auto-extension, in flight) may still heal node 0 after the
		// key is deleted there: delete it again until node 0 votes.
		stopExtending()
		require.NoError(t, a.Extend(ctx, 10*time.Second))
		aloneRL := newClient(t, nodes[:1], append(opts, redlock.WithRestartGuard(ttl))...)
		var alone *redlock.Lock
		waitFor(t, 5*time.Second, func() bool {
			require.NoError(t, n0.rClient.Del(ctx, k).Err())
			alone, err = aloneRL.TryLock(ctx, k, ttl)
			return err == nil
		}, "node 0 alone, restart guard on: want its (wrong) vote for a key a holds")
		require.NoError(t, alone.Unlock(ctx))
		b, err := newClient(t, nodes, append(opts, redlock.WithRestartGuard(ttl))...).TryLock(ctx, k, ttl)
		if err == nil {
			t.Fatalf("want a's lock kept by the majority, got a second holder %q", b.Token())
		}
		require.ErrorIs(t, err, redlock.ErrContended)
		if err := a.Err(); err != nil {
			t.Fatalf("a: want still held, got %v", err)
		}
		require.NoError(t, a.Unlock(ctx))
	})
}

// infoValue returns field's value in an INFO reply, or "".
func infoValue(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// replyPlans holds the plan FuzzReply's one fake server follows now.
type replyPlans struct{ p atomic.Pointer[replyPlan] }

func (r *replyPlans) reply(cmd []string) []byte { return r.p.Load().reply(cmd) }

// FuzzReply answers one command of a lock attempt with arbitrary bytes. It
// must never panic. A lost attempt says why, in the node's result. The
// target's high bit makes the attempt fenced (WithFencing), whose replies
// go through the fenced parser.
func FuzzReply(f *testing.F) {
	for ti := range replyTargets {
		for _, m := range malformed {
			if m.reply != nil {
				f.Add(m.reply, uint8(ti), ti%2 == 0)
			}
		}
	}
	f.Add([]byte(":1\r\n"), uint8(0), false) // a real vote
	f.Add([]byte(":0\r\n"), uint8(0), true)  // a real refusal
	f.Add([]byte(":1\r\n:1\r\n+OK\r\n"), uint8(1), false)
	f.Add([]byte{}, uint8(0), false) // silence
	for _, m := range fencedMalformed {
		f.Add(m.reply, uint8(0x80|1), false) // fenced, EVAL
	}
	f.Add([]byte("*2\r\n:1\r\n:7\r\n"), uint8(0x80|1), false) // a real fenced vote
	f.Add([]byte("*2\r\n:0\r\n:0\r\n"), uint8(0x80|1), true)  // a real fenced refusal

	plans := &replyPlans{}
	fake := startFake(f, plans.reply)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, reply []byte, target uint8, resp3 bool) {
		plans.p.Store(&replyPlan{target: replyTargets[int(target)%len(replyTargets)], garbage: reply, resp3: resp3, runID: "fuzz-fake"})
		c := redis.NewClient(&redis.Options{
			Addr: fake.Addr(), MaxRetries: -1, DialerRetries: 1, PoolSize: 2,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		})
		defer c.Close()
		opts := []redlock.Option{redlock.WithNodeTimeout(100 * time.Millisecond)}
		if target&0x80 != 0 {
			opts = append(opts, redlock.WithFencing())
		}
		rl, err := redlock.New([]redis.UniversalClient{c}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		l, err := rl.TryLock(ctx, "fuzz-reply", 10*time.Second)
		if err == nil {
			_ = l.Extend(ctx, 10*time.Second)
			_ = l.Unlock(ctx)
			return
		}
		if !errors.Is(err, redlock.ErrNotObtained) {
			t.Fatalf("want ErrNotObtained, got %v", err)
		}
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) {
			t.Fatalf("want a *QuorumError, got %T: %v", err, err)
		}
		switch n := qe.Nodes[0]; n.Status {
		case "failed":
			if n.Err == nil {
				t.Fatalf("want the node's error, got %v", n)
			}
		case "taken":
		default:
			t.Fatalf("want failed or taken, got %v", n)
		}
	})
}
