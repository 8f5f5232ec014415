// Package redisnode starts and controls real redis-server processes bound to
// the loopback interface. It is used by tests, chaos tests and benchmarks.
//
// The server binary is redis-server unless the environment variable
// REDLOCK_SERVER names another (see LookPath): valkey-server takes the same
// flags and answers PING and INFO server alike, so `make test` runs a
// subset of the tests against Valkey with REDLOCK_SERVER=valkey-server.
//
// Every process is started in its own process group and, on Linux, with a
// parent-death signal, so no redis-server outlives the process that started it.
package redisnode

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	readyTimeout = 10 * time.Second // how long Start/Restart wait for PING
	startTries   = 5                // fresh ports tried when Options.Port == 0
)

// rebindWait is how long a fixed port (Options.Port, Restart) is retried while busy.
var rebindWait = 5 * time.Second

// Options configures a node.
type Options struct {
	Dir        string   // working dir; "" = a fresh os.MkdirTemp dir that Close removes
	AppendOnly bool     // true: --appendonly yes --appendfsync always (data survives Restart); false: --save "" --appendonly no
	Args       []string // extra redis-server args (appended last, so they win), e.g. "--requirepass", "x"
	Port       int      // 0 = pick a free loopback port
	// Sentinel runs `redis-server <dir>/sentinel.conf --sentinel`: a
	// Sentinel, whose configuration file (which it rewrites) starts with
	// Config. AppendOnly does not apply.
	Sentinel bool
	Config   string // Sentinel's configuration lines, e.g. "sentinel monitor m 127.0.0.1 6379 2"
}

// Node is one redis-server process. All methods are safe for concurrent use.
type Node struct {
	mu     sync.Mutex
	bin    string
	opts   Options
	dir    string
	ownDir bool
	port   int
	cmd    *exec.Cmd
	done   chan struct{} // closed once cmd has been reaped
	log    *tail
	paused bool
	closed bool
	// unreserve ends the reservation of port (reservePort) that Kill
	// makes, until Restart or Close; nil when there is none.
	unreserve func()
}

// errPortBusy marks a start that failed because the port was already bound.
var errPortBusy = errors.New("address already in use")

// ServerEnv is the environment variable that chooses the server binary:
// a name looked up like redis-server (valkey-server), or a path
// (/usr/bin/valkey-server). Unset or empty, it is redis-server.
const ServerEnv = "REDLOCK_SERVER"

// LookPath finds the server binary: REDLOCK_SERVER's value if it is a
// path, else that name (default redis-server) on PATH, then in /usr/sbin
// and /usr/bin. It fails with an error saying how to install it.
func LookPath() (string, error) {
	name := os.Getenv(ServerEnv)
	if name == "" {
		name = "redis-server"
	}
	if strings.ContainsRune(name, '/') {
		if isExec(name) {
			return name, nil
		}
		return "", fmt.Errorf("%s=%s: not an executable file", ServerEnv, name)
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin/", "/usr/bin/"} {
		if isExec(dir + name) {
			return dir + name, nil
		}
	}
	if name == "redis-server" {
		return "", errors.New("redis-server not found: run `make test` (installs Debian's redis-server), or `apt-get install redis-server`")
	}
	return "", fmt.Errorf("%s=%s: %s not found on PATH, in /usr/sbin or /usr/bin (for valkey-server, run bash .ci/ensure-valkey.sh)", ServerEnv, name, name)
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// Start starts a redis-server on 127.0.0.1 and waits until it answers PING.
func Start(opts Options) (*Node, error) {
	bin, err := LookPath()
	if err != nil {
		return nil, err
	}
	n := &Node{bin: bin, opts: opts, dir: opts.Dir}
	n.opts.Args = append([]string(nil), opts.Args...)
	if n.dir == "" {
		if n.dir, err = os.MkdirTemp("", "redisnode-*"); err != nil {
			return nil, err
		}
		n.ownDir = true
	}
	if opts.Port != 0 {
		n.port = opts.Port
		err = n.startRetrying(rebindWait)
	} else {
		for try := 0; try < startTries; try++ {
			if n.port, err = freePort(); err != nil {
				break
			}
			if err = n.startLocked(); !errors.Is(err, errPortBusy) {
				break
			}
		}
	}
	if err != nil {
		if n.ownDir {
			_ = os.RemoveAll(n.dir)
		}
		return nil, err
	}
	return n, nil
}

// StartN starts n nodes concurrently. On any failure the started ones are closed.
func StartN(n int, opts Options) ([]*Node, error) {
	nodes := make([]*Node, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts
			if opts.Dir != "" && n > 1 { // never share one data dir between nodes
				o.Dir = fmt.Sprintf("%s/node%d", opts.Dir, i)
				if errs[i] = os.MkdirAll(o.Dir, 0o755); errs[i] != nil {
					return
				}
			}
			nodes[i], errs[i] = Start(o)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, nd := range nodes {
			if nd != nil {
				_ = nd.Close()
			}
		}
		return nil, err
	}
	return nodes, nil
}

// Addr returns "127.0.0.1:PORT".
func (n *Node) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// Port returns the TCP port; it never changes, even across Restart.
func (n *Node) Port() int { return n.port }

// Dir returns the working (data) directory.
func (n *Node) Dir() string { return n.dir }

// Password returns the value of a "--requirepass" in Options.Args, or "".
func (n *Node) Password() string { return password(n.opts.Args) }

// PID returns the process id, or 0 when not running.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.runningLocked() {
		return 0
	}
	return n.cmd.Process.Pid
}

// Describe says whether the process runs (its pid, paused or not) or
// how it ended, followed by the tail of its log (its last 8 KiB of
// output): for a test to print when it fails on a node it thought was up.
func (n *Node) Describe() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var st string
	switch {
	case n.cmd == nil:
		st = "not running (killed, or never started)"
	case n.runningLocked() && n.paused:
		st = fmt.Sprintf("paused, pid %d", n.cmd.Process.Pid)
	case n.runningLocked():
		st = fmt.Sprintf("running, pid %d", n.cmd.Process.Pid)
	default:
		st = fmt.Sprintf("exited by itself, pid %d: %s", n.cmd.Process.Pid, n.cmd.ProcessState)
	}
	log := ""
	if n.log != nil {
		log = n.log.String()
	}
	return fmt.Sprintf("%s on port %d: %s; log tail:\n%s", filepath.Base(n.bin), n.port, st, log)
}

// Running reports whether the process is alive (a paused process is running).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.runningLocked()
}

// Kill sends SIGKILL to the process (group) and reaps it. It is idempotent and
// works on paused processes. Until Restart or Close, the port stays
// reserved (reservePort): connections to it are refused, and no other
// node started meanwhile, by this process or another, is given it.
func (n *Node) Kill() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.killLocked(); err != nil {
		return err
	}
	if n.unreserve == nil && !n.closed {
		n.unreserve = reservePort(n.port)
	}
	return nil
}

// releaseLocked ends the port's reservation, if any.
func (n *Node) releaseLocked() {
	if n.unreserve != nil {
		n.unreserve()
		n.unreserve = nil
	}
}

// Pause stops the process with SIGSTOP: connections stay open but nothing is answered.
func (n *Node) Pause() error { return n.signal(true) }

// Resume continues a paused process with SIGCONT.
func (n *Node) Resume() error { return n.signal(false) }

// Restart kills the process if running and starts it again on the same port,
// dir and args. Data is lost unless Options.AppendOnly.
func (n *Node) Restart() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("redisnode %s: closed", n.Addr())
	}
	if err := n.killLocked(); err != nil {
		return err
	}
	n.releaseLocked()
	return n.startRetrying(rebindWait)
}

// Close resumes and kills the process and removes the dir if Start created it.
// It is idempotent.
func (n *Node) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	err := n.killLocked()
	n.releaseLocked()
	if n.ownDir {
		err = errors.Join(err, os.RemoveAll(n.dir))
	}
	return err
}

func (n *Node) signal(stop bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.runningLocked() {
		return fmt.Errorf("redisnode %s: not running", n.Addr())
	}
	var err error
	if stop {
		err = stopGroup(n.cmd.Process.Pid)
	} else {
		err = contGroup(n.cmd.Process.Pid)
	}
	if err == nil {
		n.paused = stop
	}
	return err
}

func (n *Node) runningLocked() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

func (n *Node) killLocked() error {
	if n.cmd == nil {
		return nil
	}
	if n.runningLocked() {
		pid := n.cmd.Process.Pid
		_ = contGroup(pid) // let stopped fork children (AOF rewrite) die promptly too
		if err := killGroup(pid); err != nil {
			if err2 := n.cmd.Process.Kill(); err2 != nil && !errors.Is(err2, os.ErrProcessDone) {
				return fmt.Errorf("redisnode %s: kill %d: %w", n.Addr(), pid, errors.Join(err, err2))
			}
		}
	}
	<-n.done
	n.cmd, n.paused = nil, false
	return nil
}

// startRetrying starts on the fixed n.port, retrying for up to d while it is busy.
func (n *Node) startRetrying(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := n.startLocked()
		if !errors.Is(err, errPortBusy) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startLocked starts the process on n.port and waits for it to answer PING.
func (n *Node) startLocked() error {
	args := []string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(n.port), "--dir", n.dir,
		"--daemonize", "no", "--logfile", "", "--protected-mode", "no",
	}
	if n.opts.Sentinel {
		// Sentinel needs a writable configuration file; after a restart
		// it keeps what Sentinel wrote into it.
		conf := filepath.Join(n.dir, "sentinel.conf")
		if _, err := os.Stat(conf); err != nil {
			if err := os.WriteFile(conf, []byte(n.opts.Config+"\n"), 0o600); err != nil {
				return fmt.Errorf("redisnode: sentinel config: %w", err)
			}
		}
		args = append([]string{conf, "--sentinel"}, args...)
	} else if n.opts.AppendOnly {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--save", "", "--appendonly", "no")
	}
	args = append(args, n.opts.Args...)
	cmd := exec.Command(n.bin, args...)
	cmd.Dir = n.dir
	cmd.SysProcAttr = sysProcAttr()
	n.log = &tail{}
	cmd.Stdout, cmd.Stderr = n.log, n.log
	cmd.WaitDelay = time.Second // don't hang on a pipe held open by a stray child
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redisnode: start %s on port %d: %w", n.bin, n.port, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.cmd, n.done, n.paused = cmd, done, false

	pid, pass := cmd.Process.Pid, password(n.opts.Args)
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-done:
			n.cmd = nil
			out := n.log.String()
			err := fmt.Errorf("redisnode: %s on port %d exited during startup (%s); log tail:\n%s",
				filepath.Base(n.bin), n.port, cmd.ProcessState, out)
			if strings.Contains(out, "already in use") {
				err = fmt.Errorf("%w: %w", errPortBusy, err)
			}
			return err
		default:
		}
		if probe(n.Addr(), pass, pid, 250*time.Millisecond) == nil {
			return nil
		}
		if time.Now().After(deadline) {
			_ = n.killLocked()
			return fmt.Errorf("redisnode: %s on port %d did not answer PING within %s; log tail:\n%s",
				filepath.Base(n.bin), n.port, readyTimeout, n.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
