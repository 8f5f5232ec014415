// Package redisproc starts throwaway redis-server processes on loopback
// for the benchmarks. It is a minimal copy of the ideas of the library's
// internal/redisnode, which another module cannot import: a free port, no
// persistence, wait for PING, kill by PID, and on Linux a parent-death
// signal so that no server outlives the benchmark.
package redisproc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is one redis-server process.
type Server struct {
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

// Bin finds redis-server: PATH first, then /usr/sbin and /usr/bin.
func Bin() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/redis-server", "/usr/bin/redis-server"} {
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("redis-server not found (make redis installs it)")
}

// Version returns the first line of `redis-server --version`.
func Version() string {
	bin, err := Bin()
	if err != nil {
		return "unknown"
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// StartN starts n servers concurrently; on failure the started ones are closed.
func StartN(n int) ([]*Server, error) {
	out := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for try := 0; try < 5; try++ { // a free port can be taken before we bind it
				if out[i], errs[i] = Start(); errs[i] == nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		CloseAll(out)
		return nil, err
	}
	return out, nil
}

// CloseAll closes every non-nil server.
func CloseAll(servers []*Server) {
	for _, s := range servers {
		if s != nil {
			s.Close()
		}
	}
}

// Start starts one server on a free loopback port and waits for PING.
func Start() (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--protected-mode", "no", "--logfile", "")
	cmd.Dir = os.TempDir()
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for ping(s.Addr, cmd.Process.Pid) != nil {
		select {
		case <-s.done:
			return nil, fmt.Errorf("redis-server on port %d exited during startup", port)
		default:
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("redis-server on port %d did not answer PING", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s, nil
}

// Close kills the process by its PID and reaps it. It is idempotent.
func (s *Server) Close() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
}

// ping succeeds when the server on addr answers PING and is process pid
// (not another server that took the port first).
func ping(addr string, pid int) error {
	c, err := net.DialTimeout("tcp", addr, 250*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(250 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\nINFO server\r\n")); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING %s: %q %v", addr, line, err)
	}
	if line, err = r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "$") {
		return fmt.Errorf("INFO %s: %q %v", addr, line, err)
	}
	size, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || size < 0 {
		return fmt.Errorf("INFO %s: bad length %q", addr, line)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if !strings.Contains(string(body), "\nprocess_id:"+strconv.Itoa(pid)+"\r") {
		return fmt.Errorf("%s is served by another process", addr)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
