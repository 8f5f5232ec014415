//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"
)

// rawFloor is a reference, not a lock library: what a Redlock cycle costs
// with nothing between the caller and the sockets. One goroutine writes
// SET NX PX to all 5 nodes with write(2), waits with ppoll(2) until the
// first 3 replied (the quorum), then does the same with a compare-and-
// delete script. A node's late reply is read before its next request. No
// go-redis, no goroutine per node, no netpoller: a library cannot work
// like this (ppoll blocks an OS thread per caller, and there is no
// timeout, reconnection, TLS or error handling), which is why it is a
// floor. It shows how much of a cycle is the same for every client: the
// loopback writes and the servers' work.
func rawFloor(name string) maker {
	return maker{name: name, nodes: 5, new: func(name string, cs []redis.UniversalClient) (impl, error) {
		r := &rawNodes{}
		if err := dialEach(cs, r.dial); err != nil {
			r.close()
			return impl{}, fmt.Errorf("raw floor: %w", err)
		}
		sha, err := r.loadScript(floorRelease)
		if err != nil {
			r.close()
			return impl{}, err
		}
		return impl{name: name, cycle: respCycle(sha, r.round), closer: r.close}, nil
	}}
}

type rawNode struct {
	conn    net.Conn // kept, so that the fd stays open
	fd      int
	in      []byte // read, not yet consumed
	pending int    // replies not read yet
}

type rawNodes struct {
	n  []*rawNode
	pf []pollFd
}

type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

const pollIn = 0x1

func (r *rawNodes) dial(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	sc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		_ = c.Close()
		return err
	}
	nd := &rawNode{conn: c}
	_ = sc.Control(func(fd uintptr) { nd.fd = int(fd) })
	r.n = append(r.n, nd)
	r.pf = append(r.pf, pollFd{})
	return nil
}

func (r *rawNodes) close() {
	for _, nd := range r.n {
		_ = nd.conn.Close()
	}
}

// loadScript loads src on every node and returns its SHA.
func (r *rawNodes) loadScript(src string) (string, error) {
	cmd := fmt.Appendf(nil, "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$%d\r\n%s\r\n", len(src), src)
	var sha string
	for i, nd := range r.n {
		if err := r.write(nd, cmd); err != nil {
			return "", err
		}
		// "$40\r\n<sha>\r\n": two lines.
		if _, err := r.line(i, time.Second); err != nil {
			return "", err
		}
		l, err := r.line(i, time.Second)
		if err != nil {
			return "", err
		}
		sha = l
	}
	return sha, nil
}

func (r *rawNodes) write(nd *rawNode, b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Write(nd.fd, b)
		if err == syscall.EAGAIN {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// line returns node i's next reply line, waiting up to d.
func (r *rawNodes) line(i int, d time.Duration) (string, error) {
	nd := r.n[i]
	for {
		if k := bytes.Index(nd.in, []byte("\r\n")); k >= 0 {
			l := string(nd.in[:k])
			nd.in = nd.in[k+2:]
			return l, nil
		}
		pf := []pollFd{{fd: int32(nd.fd), events: pollIn}}
		if err := poll(pf, d); err != nil {
			return "", err
		}
		if err := r.fill(nd); err != nil {
			return "", err
		}
	}
}

func (r *rawNodes) fill(nd *rawNode) error {
	var tmp [512]byte
	n, err := syscall.Read(nd.fd, tmp[:])
	if err == syscall.EAGAIN {
		return nil
	}
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("raw floor: connection closed")
	}
	nd.in = append(nd.in, tmp[:n]...)
	return nil
}

// round sends cmd to every node and returns once 3 replied want.
func (r *rawNodes) round(cmd []byte, want string) error {
	for i, nd := range r.n {
		for ; nd.pending > 0; nd.pending-- { // the previous round's late reply
			if _, err := r.line(i, time.Second); err != nil {
				return err
			}
		}
		if err := r.write(nd, cmd); err != nil {
			return err
		}
		nd.pending = 1
	}
	ok := 0
	for ok < 3 {
		for i, nd := range r.n {
			for nd.pending > 0 {
				k := bytes.Index(nd.in, []byte("\r\n"))
				if k < 0 {
					break
				}
				l := string(nd.in[:k])
				nd.in = nd.in[k+2:]
				nd.pending--
				if l != want {
					return fmt.Errorf("raw floor: node %d replied %q", i, l)
				}
				ok++
			}
		}
		if ok >= 3 {
			break
		}
		for i, nd := range r.n {
			r.pf[i] = pollFd{fd: -1}
			if nd.pending > 0 {
				r.pf[i] = pollFd{fd: int32(nd.fd), events: pollIn}
			}
		}
		if err := poll(r.pf, time.Second); err != nil {
			return err
		}
		for i, nd := range r.n {
			if r.pf[i].revents != 0 {
				if err := r.fill(nd); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// poll waits up to d for one of pf to be readable (ppoll(2), which
// every Linux architecture has).
func poll(pf []pollFd, d time.Duration) error {
	for {
		ts := syscall.NsecToTimespec(d.Nanoseconds())
		n, _, e := syscall.RawSyscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pf[0])), uintptr(len(pf)),
			uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		if n == 0 {
			return errors.New("raw floor: no reply within " + d.String())
		}
		return nil
	}
}
