package chaos

import (
	"context"
	"errors"
	"fmt"

	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// ErrBackend is matched by errors of a Backend that cannot start or
// control its nodes (no redis-server binary, no Docker engine).
var ErrBackend = errors.New("chaos: backend unavailable")

// NodeOptions configures a node started by a Backend.
type NodeOptions struct {
	// AppendOnly keeps the data across Restart: appendonly with
	// appendfsync always. Default: false, memory only (a restart loses
	// every key).
	AppendOnly bool
}

// Backend starts Redis nodes that faults can be injected into. Local is
// the default; Docker is used where a Docker engine answers.
type Backend interface {
	// Name is a short name for reports: "local" or "docker".
	Name() string
	// Start starts one node and waits until it answers.
	Start(ctx context.Context, opts NodeOptions) (Node, error)
}

// Node is one Redis server under a Backend's control. Its methods are the
// process-level faults; the network-level ones (latency, partition) and
// clock skew are the Cluster's, in front of the node.
type Node interface {
	// Addr is the node's "host:port"; it does not change across Restart.
	Addr() string
	// Kill kills the server with SIGKILL (kill -9). It is idempotent.
	Kill() error
	// Pause stops the server with SIGSTOP: connections stay open and
	// nothing is answered until Resume.
	Pause() error
	// Resume continues a paused server (SIGCONT).
	Resume() error
	// Restart kills the server if it runs and starts it again on the same
	// address. Its data is lost unless it was started AppendOnly.
	Restart() error
	// Close kills the server for good and removes what Start created.
	Close() error
}

// Local is the default Backend: redis-server processes on the loopback
// interface, each in its own temporary directory (internal/redisnode).
// Every process is killed when the Node is closed, and by the kernel
// (parent-death signal) if this process dies first.
type Local struct{}

var _ Backend = Local{}

// Name returns "local".
func (Local) Name() string { return "local" }

// Start starts a redis-server. It returns an error matching ErrBackend
// when no redis-server binary is found.
func (Local) Start(ctx context.Context, opts NodeOptions) (Node, error) {
	if _, err := redisnode.LookPath(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBackend, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n, err := redisnode.Start(redisnode.Options{AppendOnly: opts.AppendOnly})
	if err != nil {
		return nil, err
	}
	return localNode{n}, nil
}

// localNode adapts *redisnode.Node, whose methods are Node's already.
type localNode struct{ *redisnode.Node }

var _ Node = localNode{}
