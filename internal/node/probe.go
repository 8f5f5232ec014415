package node

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Probe is what one node answered to the health check (the root's
// Health): PING, INFO and CONFIG GET save, sent in one pipeline.
type Probe struct {
	// Err is why the node did not answer PING: a dial, AUTH or SELECT
	// failure (a database index beyond the server's databases), a
	// timeout (ErrNodeTimeout), ctx's error. The rest is then empty.
	Err error
	// Info is the INFO reply; InfoErr why INFO failed (an ACL).
	Info    string
	InfoErr error
	// Save is the server's RDB snapshot rules (CONFIG GET save; "" for
	// none); SaveErr why CONFIG GET failed (an ACL, a renamed CONFIG).
	Save    string
	SaveErr error
	Latency time.Duration
}

// Probe asks n for its health (see Probe) within ctx, and within
// timeout whether or not the go-redis client honours ctx: a request cut
// short goes on in its goroutine until the client's own timeouts end it.
// A node not yet identified is identified from the reply, as on a first
// contact (Host.Identified); a duplicate of another node is reported
// there, not here. It is a read only: no key is touched, and the
// restart guard and the request queue are not involved.
func (n *Node) Probe(ctx context.Context, timeout time.Duration) Probe {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := make(chan Probe, 1)
	go func() { out <- n.probe(ctx) }()
	var p Probe
	select {
	case p = <-out:
	case <-ctx.Done():
		p = Probe{Err: NodeErr(ctx, ctx.Err())}
	}
	if p.Err != nil {
		p.Err = NodeErr(ctx, p.Err)
	}
	p.Latency = time.Since(start)
	if p.Err == nil && !n.Identified() {
		if _, cluster := n.C.(*redis.ClusterClient); !cluster {
			// The error, a duplicate, is the host's to keep and log.
			_ = n.h.Identified(n, p.Info, p.InfoErr)
		}
	}
	return p
}

// probe sends the pipeline of Probe, turning a panic of go-redis on a
// malformed reply into an error.
func (n *Node) probe(ctx context.Context) (p Probe) {
	defer func() {
		if r := recover(); r != nil {
			p = Probe{Err: fmt.Errorf("redlock: malformed reply: go-redis panicked: %v", r)}
		}
	}()
	pl := n.C.Pipeline()
	ping := pl.Ping(ctx)
	info := pl.Info(ctx)
	save := pl.ConfigGet(ctx, "save")
	_, xerr := pl.Exec(ctx)
	if err := ping.Err(); err != nil {
		return Probe{Err: err}
	}
	if ping.Val() != "PONG" {
		// The pipeline failed as a whole (a dial, AUTH, SELECT): its
		// commands' results stay empty, with the error on Exec.
		if xerr == nil {
			xerr = fmt.Errorf("redlock: unexpected reply to PING: %q", ping.Val())
		}
		return Probe{Err: xerr}
	}
	p.Info, p.InfoErr = info.Result()
	m, err := save.Result()
	switch v, ok := m["save"]; {
	case err != nil:
		p.SaveErr = err
	case !ok:
		// A CONFIG GET that answers no such parameter: some managed
		// services hide it.
		p.SaveErr = fmt.Errorf("CONFIG GET save: no such parameter")
	default:
		p.Save = v
	}
	return p
}
