package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// Replica sync (the root's WithReplicas). Redis replicates
// asynchronously: a master acknowledges a lock's SET before any replica
// has it, and a failover in that window promotes a replica that never
// saw the key. With replica sync on, every request that writes a lock's
// state (an acquire, an extension, a fence's counters, a leadership's
// value) is followed by WAIT numreplicas timeout on the same connection,
// in the same go-redis pipeline: WAIT waits for the replication offset of
// the connection's last write, so it must follow the write on the
// connection that made it. A reply that grants (StatusOK) counts only
// when WAIT reports at least numreplicas; otherwise it is a failure of
// the node for that round (ErrNotReplicated), possibly landed like any
// failure, so a lost attempt releases it.
//
// WAIT covers every earlier write of the connection, so one WAIT at the
// end of a batch (sendBatch) covers every request in it, another lock's
// included. A request that needs a second command (EVAL after NOSCRIPT,
// the acquire script after a refused SET NX) sends its own WAIT with it,
// as that command may go through another connection of the pool; the
// last WAIT sent for a request is the one that counts for it, since the
// last command is the one whose reply it takes. WAIT is not allowed
// inside a script, hence the pipeline.
//
// go-redis reads a pipeline's replies within the client's ReadTimeout,
// whatever a command's own timeout: InstallReplicas refuses a WAIT
// timeout that is not below it. The direct path (direct.go) bounds its
// reads by a fraction of the per-node timeout, so a node with replica
// sync stays on its leader.

// ErrNotReplicated is the error of a node whose write was acknowledged by
// fewer replicas than WithReplicas asks within its timeout: the node does
// not count for that round. The root re-exports it.
var ErrNotReplicated = errors.New("redlock: write not acknowledged by enough replicas")

// replicaSync is a node's WithReplicas setting.
type replicaSync struct {
	n       int
	timeout time.Duration // whole milliseconds, at least 1
}

// InstallReplicas turns replica sync on for n: each write of a lock's
// state waits for num replicas for up to timeout (rounded up to a whole
// millisecond). It refuses clients whose pipelines do not go to one
// master (a Cluster client, a Ring), and a timeout that the client's
// ReadTimeout would cut short.
func (n *Node) InstallReplicas(num int, timeout time.Duration) error {
	rc, ok := n.C.(*redis.Client)
	if !ok {
		return fmt.Errorf("WithReplicas needs nodes that are one master each (a *redis.Client, or a FailoverClient); node %d is a %T", n.Idx+1, n.C)
	}
	if r := timeout % time.Millisecond; r != 0 || timeout <= 0 {
		// WAIT counts whole ms, and 0 would block forever.
		timeout += time.Millisecond - r
	}
	if rt := rc.Options().ReadTimeout; rt > 0 && timeout >= rt {
		return fmt.Errorf("WithReplicas timeout %v is not below node %d's ReadTimeout %v: go-redis would cut the WAIT short", timeout, n.Idx+1, rt)
	}
	n.replicas = &replicaSync{n: num, timeout: timeout}
	return nil
}

// syncs reports whether a request of op writes a lock's state, and so
// waits for the replicas.
func syncs(op wire.Op) bool {
	switch op {
	case wire.OpAcquire, wire.OpExtend, wire.OpFence, wire.OpProclaim:
		return true
	}
	return false
}

// waits reports whether req waits for n's replicas.
func (n *Node) waits(req *wire.Request) bool {
	return n.replicas != nil && syncs(req.Op)
}

// acks is what the WAIT sent after a request answered.
type acks struct {
	sent bool
	got  int64
	err  error
}

// waitIn queues WAIT for r's replicas in pl. (go-redis's Pipeliner
// leaves its Wait out; a pipeline's reads are bounded by the client's
// ReadTimeout anyway.)
func waitIn(ctx context.Context, pl redis.Pipeliner, r *replicaSync) *redis.IntCmd {
	w := redis.NewIntCmd(ctx, "wait", r.n, r.timeout.Milliseconds())
	_ = pl.Process(ctx, w)
	return w
}

// acksOf reads the reply of w, a WAIT.
func acksOf(w *redis.IntCmd) acks {
	return acks{sent: true, got: w.Val(), err: w.Err()}
}

// synced returns rep, a reply to req, or a failure when rep grants and
// the replicas did not acknowledge it (see above).
func (n *Node) synced(req *wire.Request, rep wire.Reply, a acks) wire.Reply {
	if !n.waits(req) || rep.St != wire.StatusOK {
		return rep
	}
	var err error
	switch {
	case !a.sent:
		err = fmt.Errorf("%w: WAIT not sent", ErrNotReplicated)
	case a.err != nil:
		err = fmt.Errorf("%w: WAIT failed: %w", ErrNotReplicated, a.err)
	case a.got < int64(n.replicas.n):
		err = &shortError{got: a.got, want: n.replicas.n, timeout: n.replicas.timeout}
	default:
		return rep
	}
	return wire.Reply{St: wire.StatusFailed, Err: err}
}

// do sends args, req's command, through s and returns its reply; when
// req waits for the replicas, with WAIT after it in one pipeline, whose
// reply it stores in a.
func (n *Node) do(ctx context.Context, s sender, req *wire.Request, args []any, a *acks) (any, error) {
	if !n.waits(req) {
		return s.Do(ctx, args...).Result()
	}
	pl := s.Pipeline()
	cmd := redis.NewCmd(ctx, args...)
	_ = pl.Process(ctx, cmd)
	w := waitIn(ctx, pl, n.replicas)
	_, xerr := pl.Exec(ctx)
	*a = acksOf(w)
	return pipedResult(cmd, xerr)
}

// pipedResult returns cmd's reply in a pipeline whose Exec returned
// xerr: a pipeline that fails as a whole (a dial, AUTH) may leave its
// commands' results nil with the error on Exec only.
func pipedResult(cmd *redis.Cmd, xerr error) (any, error) {
	res, err := cmd.Result()
	if err == nil && res == nil {
		err = xerr
		if err == nil {
			err = redis.Nil
		}
	}
	return res, err
}

// shortError is the error of a grant that WAIT answered with too few
// replicas: the connection is sound, unlike one whose WAIT failed.
type shortError struct {
	got     int64
	want    int
	timeout time.Duration
}

func (e *shortError) Error() string {
	return fmt.Sprintf("%v: %d of %d within %v", ErrNotReplicated, e.got, e.want, e.timeout)
}

func (e *shortError) Unwrap() error { return ErrNotReplicated }

// connBroken reports whether rep, a failure, may have left the
// connection it came through unusable: any failure but too few
// replicas, which the leader's own connection survives (see leaderConn).
func connBroken(rep wire.Reply) bool {
	// The status first: errors.As's target escapes, and a reply that did
	// not fail must cost no allocation (every reply is asked).
	if rep.St != wire.StatusFailed {
		return false
	}
	var se *shortError
	return !errors.As(rep.Err, &se)
}
