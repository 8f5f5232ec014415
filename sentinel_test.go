package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

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
	// No delay before the full sync (7.0 waits 5s for more replicas).
	m := redistest.NodesWith(t, 1, redisnode.Options{Args: []string{"--repl-diskless-sync-delay", "0"}})[0]
	r := redistest.NodesWith(t, 1, redisnode.Options{Args: []string{
		"--replicaof", "127.0.0.1", strconv.Itoa(m.Port()),
		"--replica-read-only", "no",
	}})[0]
	rn := &replicatedNode{name: name, master: m, replica: r, mClient: redistest.Client(t, m), rClient: redistest.Client(t, r)}
	waitFor(t, 15*time.Second, func() bool {
		info, err := rn.rClient.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, "replica %s of %s: want the replication link up", r.Addr(), m.Addr())
	return rn
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
			time.Sleep(50 * time.Millisecond)
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
		if !errors.Is(err, redlock.ErrDuplicateNode) {
			t.Fatalf("want ErrDuplicateNode, got %v", err)
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
		require.NoError(t, a.AutoExtend(ctx))
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
			time.Sleep(50 * time.Millisecond)
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
		alone, err := newClient(t, nodes[:1], append(opts, redlock.WithRestartGuard(ttl))...).TryLock(ctx, k, ttl)
		if err != nil {
			t.Fatalf("node 0 alone, restart guard on: want its (wrong) vote for a key a holds, got %v", err)
		}
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
