package redisnode

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// do sends one command and returns the first reply line (without CRLF), or
// the error, including a timeout after d.
func do(addr string, d time.Duration, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write(resp(args...)); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

func ping(addr string) (string, error) { return do(addr, 200*time.Millisecond, "PING") }

func start(t *testing.T, opts Options) *Node {
	t.Helper()
	n, err := Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func TestStartPing(t *testing.T) {
	n := start(t, Options{})
	require.True(t, n.Running())
	require.NotZero(t, n.PID())
	require.NotZero(t, n.Port())
	require.Equal(t, "127.0.0.1:"+strconv.Itoa(n.Port()), n.Addr())
	reply, err := ping(n.Addr())
	require.NoError(t, err)
	require.Equal(t, "+PONG", reply)
}

func TestKill(t *testing.T) {
	n := start(t, Options{})
	pid := n.PID()
	require.NoError(t, n.Kill())
	require.NoError(t, n.Kill(), "Kill is idempotent")
	require.False(t, n.Running())
	require.Zero(t, n.PID())
	_, err := net.DialTimeout("tcp", n.Addr(), 200*time.Millisecond)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH)
	require.Error(t, n.Pause(), "cannot pause a dead node")
}

func TestPauseResume(t *testing.T) {
	n := start(t, Options{})
	require.NoError(t, n.Pause())
	require.True(t, n.Running(), "a paused node is still running")
	_, err := ping(n.Addr())
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "PING to a paused node should time out, got %v", err)

	require.NoError(t, n.Resume())
	reply, err := ping(n.Addr())
	require.NoError(t, err)
	require.Equal(t, "+PONG", reply)
}

func TestDescribe(t *testing.T) {
	n := start(t, Options{})
	pid := n.PID()
	require.Contains(t, n.Describe(), fmt.Sprintf("running, pid %d", pid))
	// The server answers PING before its log line has crossed the pipe
	// into the tail: wait for it.
	require.Eventually(t, func() bool { return strings.Contains(n.Describe(), "Ready to accept connections") },
		10*time.Second, 10*time.Millisecond, "the log tail follows: %s", n.Describe())
	require.NoError(t, n.Pause())
	require.Contains(t, n.Describe(), fmt.Sprintf("paused, pid %d", pid))
	require.NoError(t, n.Resume())
	// A process that ends by itself (SHUTDOWN) is told apart from one
	// the harness killed.
	_, _ = do(n.Addr(), time.Second, "SHUTDOWN", "NOSAVE")
	require.Eventually(t, func() bool { return !n.Running() }, 5*time.Second, 10*time.Millisecond)
	require.Contains(t, n.Describe(), fmt.Sprintf("exited by itself, pid %d", pid))
	require.NoError(t, n.Kill())
	require.Contains(t, n.Describe(), "not running (killed")
}

func TestKillPaused(t *testing.T) {
	n := start(t, Options{})
	pid := n.PID()
	require.NoError(t, n.Pause())
	require.NoError(t, n.Kill())
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH)
	require.NoError(t, n.Restart())
	reply, err := ping(n.Addr())
	require.NoError(t, err)
	require.Equal(t, "+PONG", reply)
}

// TestKilledPortStaysDead: a killed node's address refuses connections,
// and the ports that new listeners are given (freePort's way) are never
// it, until Restart takes the port back; Close ends the reservation and
// leaves no descriptor behind.
func TestKilledPortStaysDead(t *testing.T) {
	fds := func() int {
		es, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return -1 // not Linux: nothing to count
		}
		return len(es)
	}
	_, err := freePort() // the poller's descriptors, made at first use
	require.NoError(t, err)
	before := fds()
	n, err := Start(Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	port := n.Port()
	require.NoError(t, n.Kill())
	require.NoError(t, n.Kill(), "a second Kill")
	_, err = net.DialTimeout("tcp", n.Addr(), time.Second)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	for range 2000 {
		p, err := freePort()
		require.NoError(t, err)
		require.NotEqual(t, port, p, "a new node would be given the killed node's port")
	}
	require.NoError(t, n.Restart())
	require.Equal(t, port, n.Port())
	reply, err := ping(n.Addr())
	require.NoError(t, err)
	require.Equal(t, "+PONG", reply)
	require.NoError(t, n.Kill())
	require.NoError(t, n.Close())
	_, err = net.DialTimeout("tcp", n.Addr(), time.Second)
	require.Error(t, err)
	if before >= 0 {
		require.Equal(t, before, fds(), "descriptors left after Close")
	}
}

func TestRestartLosesDataWithoutAOF(t *testing.T) {
	n := start(t, Options{})
	port, pid := n.Port(), n.PID()
	reply, err := do(n.Addr(), time.Second, "SET", "k", "v")
	require.NoError(t, err)
	require.Equal(t, "+OK", reply)

	require.NoError(t, n.Restart())
	require.Equal(t, port, n.Port())
	require.NotEqual(t, pid, n.PID())
	reply, err = do(n.Addr(), time.Second, "GET", "k")
	require.NoError(t, err)
	require.Equal(t, "$-1", reply, "data should be gone")
}

func TestRestartKeepsDataWithAOF(t *testing.T) {
	n := start(t, Options{AppendOnly: true})
	reply, err := do(n.Addr(), time.Second, "SET", "k", "v")
	require.NoError(t, err)
	require.Equal(t, "+OK", reply)

	require.NoError(t, n.Kill()) // SIGKILL: only fsynced AOF survives
	require.NoError(t, n.Restart())
	reply, err = do(n.Addr(), time.Second, "GET", "k")
	require.NoError(t, err)
	require.Equal(t, "$1", reply, "key should survive restart")
}

func TestCloseRemovesDirAndProcess(t *testing.T) {
	n, err := Start(Options{})
	require.NoError(t, err)
	pid, dir := n.PID(), n.Dir()
	require.DirExists(t, dir)
	require.NoError(t, n.Pause())
	require.NoError(t, n.Close())
	require.NoError(t, n.Close(), "Close is idempotent")
	require.NoDirExists(t, dir)
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH)
	require.False(t, n.Running())
	require.Error(t, n.Restart(), "cannot restart a closed node")
}

func TestCloseKeepsCallerDir(t *testing.T) {
	dir := t.TempDir()
	n, err := Start(Options{Dir: dir, AppendOnly: true})
	require.NoError(t, err)
	require.NoError(t, n.Close())
	require.DirExists(t, dir)
}

func TestFixedPortAndArgs(t *testing.T) {
	a := start(t, Options{Args: []string{"--requirepass", "s3cret"}})
	require.Equal(t, "s3cret", a.Password())
	reply, err := ping(a.Addr())
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(reply, "-NOAUTH"), reply)

	// A second node on a port that stays busy fails with a useful message.
	defer func(d time.Duration) { rebindWait = d }(rebindWait)
	rebindWait = 300 * time.Millisecond
	_, err = Start(Options{Port: a.Port()})
	require.Error(t, err)
	require.Contains(t, err.Error(), strconv.Itoa(a.Port()))
	require.True(t, errors.Is(err, errPortBusy), err.Error())
}

func TestStartN(t *testing.T) {
	nodes, err := StartN(5, Options{})
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, n := range nodes {
		require.False(t, seen[n.Port()], "duplicate port")
		seen[n.Port()] = true
		reply, err := ping(n.Addr())
		require.NoError(t, err)
		require.Equal(t, "+PONG", reply)
	}
	for _, n := range nodes {
		require.NoError(t, n.Close())
	}
}

func TestConcurrentControl(t *testing.T) {
	n := start(t, Options{})
	done := make(chan struct{})
	for i := 0; i < 4; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for j := 0; j < 3; j++ {
				_ = n.Pause()
				_ = n.Resume()
				_ = n.Kill()
				_ = n.Restart()
				_ = n.PID()
			}
		}()
	}
	for i := 0; i < 4; i++ {
		<-done
	}
	require.NoError(t, n.Restart())
	reply, err := ping(n.Addr())
	require.NoError(t, err)
	require.Equal(t, "+PONG", reply)
}

func TestLookPath(t *testing.T) {
	p, err := LookPath()
	require.NoError(t, err)
	_, err = os.Stat(p)
	require.NoError(t, err)
}

// REDLOCK_SERVER chooses the binary: a name missing everywhere or a path
// that is not an executable fails with an error naming the variable, not
// with a fallback to redis-server.
func TestLookPathServerEnv(t *testing.T) {
	t.Setenv(ServerEnv, "no-such-server-binary")
	_, err := LookPath()
	require.ErrorContains(t, err, ServerEnv+"=no-such-server-binary")
	t.Setenv(ServerEnv, t.TempDir())
	_, err = LookPath()
	require.ErrorContains(t, err, "not an executable file")
	_, err = Start(Options{})
	require.ErrorContains(t, err, "not an executable file")
}

// The node started is the server REDLOCK_SERVER chose: INFO server
// names Valkey (server_name:valkey) exactly when the binary is
// valkey-server.
func TestStartRunsChosenServer(t *testing.T) {
	bin, err := LookPath()
	require.NoError(t, err)
	n := start(t, Options{})
	info, err := infoServer(n.Addr())
	require.NoError(t, err)
	valkey := strings.Contains(info, "\nserver_name:valkey\r")
	require.Equal(t, strings.HasPrefix(filepath.Base(bin), "valkey"), valkey, "binary %s, INFO server:\n%s", bin, info)
	require.Contains(t, n.Describe(), filepath.Base(bin)+" on port")
}

// infoServer returns the body of INFO server.
func infoServer(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(resp("INFO", "server")); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "$") {
		return "", fmt.Errorf("INFO: %q %v", line, err)
	}
	size, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return "", err
	}
	body := make([]byte, size+2)
	_, err = io.ReadFull(r, body)
	return string(body), err
}

func TestSentinel(t *testing.T) {
	m := start(t, Options{})
	s := start(t, Options{Sentinel: true, Config: fmt.Sprintf("sentinel monitor m 127.0.0.1 %d 1", m.Port())})
	// CKQUORUM answers an error for a master the Sentinel does not watch.
	reply, err := do(s.Addr(), time.Second, "SENTINEL", "CKQUORUM", "m")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(reply, "+OK"), "want the master of its Config watched, got %q", reply)
	// Sentinel rewrote its file; a restart keeps what it wrote.
	require.NoError(t, s.Restart())
	reply, err = do(s.Addr(), time.Second, "SENTINEL", "CKQUORUM", "m")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(reply, "+OK"), "after a restart: want the master watched, got %q", reply)
}
