package node

import (
	"context"
	"fmt"
	"time"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// Batch is one batched extension request (wire.BatchArgv): the locks of
// one node's share of a tick of the host's scheduler. Each lock has its
// own round, to which the node's status for it is reported.
type Batch struct {
	Items []BatchItem
	Argv  []any // the command, built once: each node sends a copy
	// Timeout is its first lock's per-node timeout: a full queue of a
	// node silent that long fails the batch at once (see Submit).
	Timeout time.Duration
}

// BatchItem is one lock of a batch: its round and request (an extend).
type BatchItem struct {
	R   Round
	Req *wire.Request
}

// batchProbe stands for a batch in the restart guard's check before
// sending (an extension).
var batchProbe = &wire.Request{Op: wire.OpExtend}

// deliver reports a node's reply to the batch (res, err) to every item's
// round: a string of one status character per item. a is the replicas'
// acknowledgement of the batch's writes (replicas.go).
func (nd *Node) deliver(b *Batch, res any, err error, sent time.Time, a acks) {
	st, ok := res.(string)
	if err == nil && (!ok || len(st) != len(b.Items)) {
		err = wire.ErrUnexpectedReply(res)
	}
	for k, it := range b.Items {
		var r wire.Reply
		switch {
		case err != nil:
			r = wire.Reply{St: wire.StatusFailed, Err: err}
		case st[k] == '1' && nd.guard != nil:
			r = nd.after(context.Background(), it.Req, int64(1), nil, sent)
		default:
			r = wire.BatchStatus(st, k)
		}
		it.R.Report(nd.Idx, nd.synced(batchProbe, r, a))
	}
}

// fail reports one failure to every item's round.
func (b *Batch) fail(nd *Node, r wire.Reply) {
	for _, it := range b.Items {
		it.R.Report(nd.Idx, r)
	}
}

// execBatch runs a batch on its own: with EVALSHA, EVAL when the node
// lost its script cache, and with INFO server first on a node not yet
// identified (see firstContact).
func (nd *Node) execBatch(b *Batch) {
	ctx := context.Background()
	var rep *wire.Reply
	var sent time.Time
	func() {
		defer func() {
			if p := recover(); p != nil {
				rep = &wire.Reply{St: wire.StatusFailed, Err: fmt.Errorf("redlock: malformed reply: go-redis panicked: %v", p)}
			}
		}()
		if sent, rep = nd.before(batchProbe); rep != nil {
			return
		}
		var res any
		var err error
		var a acks
		if nd.identified.Load() {
			res, err = nd.do(ctx, nd.C, batchProbe, wire.BatchArgs(b.Argv, false), &a)
			if wire.IsNoScript(err) {
				res, err = nd.do(ctx, nd.C, batchProbe, wire.BatchArgs(b.Argv, true), &a)
			}
		} else {
			// INFO server and the batch (as EVAL) in one pipeline, as
			// firstContact does for a round's request.
			res, err = nd.contact(ctx, wire.BatchArgs(b.Argv, true), nd.waits(batchProbe), &a)
		}
		nd.deliver(b, res, err, sent, a)
	}()
	if rep != nil {
		b.fail(nd, *rep)
	}
}
