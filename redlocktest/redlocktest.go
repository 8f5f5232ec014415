// Package redlocktest starts real redis-server processes on the loopback
// interface, for the tests of code that takes locks: each node is an
// independent Redis master, as Redlock wants, and a test can kill,
// restart or pause one to see what its code does when a node fails.
//
// The redis-server binary is looked up in PATH, then in /usr/sbin and
// /usr/bin. Each node listens on a free port of 127.0.0.1, keeps no data
// on disk, and runs in a process group of its own: it is killed by its
// process ID when the test ends (or Close is called), and, on Linux,
// when the process that started it dies, so none outlives the tests.
package redlocktest

import (
	"fmt"
	"testing"

	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// Node is one redis-server process. Its methods are safe for concurrent
// use.
type Node struct {
	n *redisnode.Node
}

// Start starts n nodes side by side and returns them once each answers
// PING; they are killed and their files removed when t ends (t.Cleanup).
// It fails t (t.Fatal) if redis-server is missing or a node does not
// start within 10 seconds.
func Start(t testing.TB, n int) []*Node {
	t.Helper()
	nodes, err := StartNodes(n)
	if err != nil {
		t.Fatalf("redlocktest: %v", err)
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			if err := nd.Close(); err != nil {
				t.Errorf("redlocktest: closing %s: %v", nd.Addr(), err)
			}
		}
	})
	return nodes
}

// StartNodes is Start for code that has no testing.TB, such as an
// example or a TestMain: the caller closes each node (Close). On an
// error no node is left running: redis-server is missing, n is below 1,
// or a node did not start within 10 seconds.
func StartNodes(n int) ([]*Node, error) {
	if n < 1 {
		return nil, fmt.Errorf("redlocktest: want at least 1 node, got %d", n)
	}
	started, err := redisnode.StartN(n, redisnode.Options{})
	if err != nil {
		return nil, fmt.Errorf("redlocktest: starting %d redis-server node(s): %w", n, err)
	}
	nodes := make([]*Node, n)
	for i, nd := range started {
		nodes[i] = &Node{n: nd}
	}
	return nodes, nil
}

// URLs returns the URL of each node, in order, as redlock.Dial and
// redlock.NewClients take them.
func URLs(nodes []*Node) []string {
	urls := make([]string, len(nodes))
	for i, nd := range nodes {
		urls[i] = nd.URL()
	}
	return urls
}

// Addr returns the node's address, "127.0.0.1:PORT". The port stays the
// same across Restart.
func (n *Node) Addr() string { return n.n.Addr() }

// URL returns "redis://127.0.0.1:PORT".
func (n *Node) URL() string { return "redis://" + n.n.Addr() }

// Kill kills the process (SIGKILL): its connections close and its keys
// are gone. Killing a killed node does nothing.
func (n *Node) Kill() error { return n.n.Kill() }

// Restart kills the process if it runs and starts it again, empty, on
// the same port; it returns once the node answers PING. Its error says
// why the node did not start (for example, the port was taken meanwhile
// by another process), or that the node was closed.
func (n *Node) Restart() error { return n.n.Restart() }

// Pause stops the process (SIGSTOP): its connections stay open but it
// answers nothing, as a stalled or partitioned server would, until
// Resume.
func (n *Node) Pause() error { return n.n.Pause() }

// Resume continues a paused process (SIGCONT).
func (n *Node) Resume() error { return n.n.Resume() }

// Close kills the process, paused or not, and removes its files. It is
// idempotent; Start's cleanup calls it.
func (n *Node) Close() error { return n.n.Close() }
