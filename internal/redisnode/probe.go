package redisnode

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// probe sends (AUTH,) PING and INFO server, and succeeds only if the server
// answers +PONG and is the process pid (not some other server on the port).
func probe(addr, pass string, pid int, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	r := bufio.NewReader(c)
	if pass != "" {
		if _, err := c.Write(resp("AUTH", pass)); err != nil {
			return err
		}
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
			return fmt.Errorf("AUTH: %q %v", line, err)
		}
	}
	if _, err := c.Write([]byte("PING\r\nINFO server\r\n")); err != nil {
		return err
	}
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING: %q %v", line, err)
	}
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "$") {
		return fmt.Errorf("INFO: %q %v", line, err)
	}
	size, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || size < 0 {
		return fmt.Errorf("INFO: bad length %q", line)
	}
	body := make([]byte, size+2)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if !strings.Contains(string(body), "\nprocess_id:"+strconv.Itoa(pid)+"\r") {
		return fmt.Errorf("%s is served by another process", addr)
	}
	return nil
}

func resp(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	return b
}

func password(args []string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--requirepass" {
			return args[i+1]
		}
	}
	return ""
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail is an io.Writer keeping the last 8 KiB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - 8<<10; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
