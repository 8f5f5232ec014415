package node

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// Exec runs one request on n, through its go-redis client, and
// classifies the reply. req must be prepared (wire.Request.Prepare).
// With the restart guard on, a grant from a node that restarted too
// recently is turned into a failure (see guard.go). A reply of the wrong
// type, and a panic of go-redis on a malformed reply, are node failures.
func (n *Node) Exec(ctx context.Context, req *wire.Request) wire.Reply {
	return n.execVia(ctx, req, nil, false)
}

// execVia is Exec on the node's pipe leader, through its own connection
// lc (see leaderConn); lc is nil elsewhere. resend: the request was
// sent before, on a connection closed under it (see RunDirect).
func (n *Node) execVia(ctx context.Context, req *wire.Request, lc *leaderConn, resend bool) wire.Reply {
	rep, _ := n.exec(ctx, req, lc, nil, resend)
	return rep
}

// exec is execVia, or with dtx the direct path's (see RunDirect): every
// command goes through dtx, and a request that finds dtx closed under it
// is not sent again here but returned with again set, unreported, for a
// leader to send through the pool.
func (n *Node) exec(ctx context.Context, req *wire.Request, lc *leaderConn, dtx *redis.Tx, resend bool) (rep wire.Reply, again bool) {
	own := false
	defer func() {
		if p := recover(); p != nil {
			rep = wire.Reply{St: wire.StatusFailed, Err: fmt.Errorf("redlock: malformed reply: go-redis panicked: %v", p)}
			again = false
		}
		if own && connBroken(rep) {
			lc.drop()
		}
	}()
	sent, fail := n.before(req)
	if fail != nil {
		return *fail, false
	}
	var s sender = n.C
	switch {
	case dtx != nil:
		s = dtx
	case lc != nil:
		s, own = lc.get(n)
	}
	var res any
	var err error
	var a acks // the replicas' (replicas.go)
	if n.identified.Load() {
		args := req.Args(n.Idx)
		if resend {
			args = req.Pristine()
		}
		res, err = n.do(ctx, s, req, args, &a)
		if closedUnder(err) && ctx.Err() == nil {
			switch {
			case dtx != nil:
				return wire.Reply{St: wire.StatusFailed, Err: err}, true
			case own:
				// Most likely closed while idle: once more through the
				// pool, as its health check would have sent it.
				lc.drop()
				s, own = n.C, false
				res, err = n.do(ctx, s, req, req.Pristine(), &a)
			}
		}
	} else {
		res, err = n.firstContact(ctx, req, &a)
	}
	if wire.IsNoScript(err) {
		res, err = n.eval(ctx, s, req, &a)
	}
	if req.Setnx {
		res, err = n.setReply(ctx, s, req, res, err, &a)
	}
	return n.synced(req, n.after(ctx, req, res, err, sent), a), false
}

// setReply turns the reply to a Setnx acquire's SET NX PX into the
// acquire script's: OK is a grant (1). A refusal (nil) runs the script,
// which refreshes a key that already holds our token (acquire is
// idempotent: go-redis may have resent the SET after a broken
// connection), and answers 0 for another holder's, or for a key of
// another of our kinds (a semaphore's sorted set); a key holding a value
// that none of our kinds writes fails it with WRONGTYPE (see the wire
// package's scripts). Anything else is left for after to refuse.
//
// With replica sync, the script goes with a WAIT of its own, whose
// reply goes into a (see replicas.go).
func (n *Node) setReply(ctx context.Context, s sender, req *wire.Request, res any, err error, a *acks) (any, error) {
	switch {
	case err == redis.Nil:
		res, err = n.do(ctx, s, req, req.ScriptArgs("evalsha", req.Script.SHA), a)
		if wire.IsNoScript(err) {
			res, err = n.eval(ctx, s, req, a)
		}
		return res, err
	case err == nil && res == "OK":
		return int64(1), nil
	}
	return res, err
}

// firstContact sends INFO server and req in one pipeline, so that a node
// is identified by its run_id (Host.Identified) within the same per-node
// timeout as the request. A node that turns out to duplicate another
// fails the request.
//
// The request goes as EVAL, which also caches the script on the node
// (a Setnx acquire goes as its SET). With replica sync, a WAIT follows
// it, whose reply goes into a.
func (n *Node) firstContact(ctx context.Context, req *wire.Request, a *acks) (any, error) {
	return n.contact(ctx, req.ContactArgs(), n.waits(req), a)
}

// contact sends INFO server and args (and WAIT after them when wait is
// set, its reply into a) in one pipeline to a node not yet identified,
// and identifies it: see firstContact.
func (n *Node) contact(ctx context.Context, args []any, wait bool, a *acks) (any, error) {
	pl := n.C.Pipeline()
	info := pl.Info(ctx, "server")
	cmd := redis.NewCmd(ctx, args...)
	_ = pl.Process(ctx, cmd)
	var w *redis.IntCmd
	if wait {
		w = waitIn(ctx, pl, n.replicas)
	}
	_, xerr := pl.Exec(ctx)
	if w != nil {
		*a = acksOf(w)
	}
	res, err := pipedResult(cmd, xerr)
	if err != nil && info.Err() != nil {
		return nil, err // nothing learnt: identify on the next contact
	}
	if ierr := n.h.Identified(n, info.Val(), info.Err()); ierr != nil {
		return nil, ierr
	}
	return res, err
}

// eval runs req's script with EVAL, through s, for a node that lost its
// script cache (a restart, SCRIPT FLUSH); with replica sync, with a WAIT
// of its own into a.
func (n *Node) eval(ctx context.Context, s sender, req *wire.Request, a *acks) (any, error) {
	return n.do(ctx, s, req, req.EvalArgs(), a)
}

// before runs the checks due before a request is sent: with the restart
// guard, a node known to be young is refused. It returns the sending
// time the guard needs, or the reply of a refused request. An extension
// is sent to a young node all the same: it may heal the lock there (put
// back the keys the restart lost; extend/kinds.lua), which never counts
// as a vote, and its grant is refused by after (guard.admit) as any.
func (n *Node) before(req *wire.Request) (time.Time, *wire.Reply) {
	if n.guard == nil || req.Op == wire.OpRelease {
		return time.Time{}, nil
	}
	sent := time.Now()
	if req.Op == wire.OpExtend {
		return sent, nil
	}
	if err := n.guard.young(sent); err != nil {
		return sent, &wire.Reply{St: wire.StatusFailed, Err: err, Refused: true}
	}
	return sent, nil
}

// after classifies a script's reply (res, err) to req, sent at sent.
func (n *Node) after(ctx context.Context, req *wire.Request, res any, err error, sent time.Time) wire.Reply {
	if err != nil {
		if req.Op == wire.OpExtend && wire.IsWrongType(err) {
			// A value of another type at the lock's key: the lock
			// cannot be held on this node, which is not ours whoever
			// wrote the value.
			return wire.Reply{St: wire.StatusTaken}
		}
		// An acquire or a release that met a value none of our kinds
		// writes fails with the server's WRONGTYPE, as any other error
		// of the node.
		return wire.Reply{St: wire.StatusFailed, Err: NodeErr(ctx, err)}
	}
	rep := wire.Classify(req, res)
	if rep.St == wire.StatusOK && n.guard != nil && req.Op != wire.OpRelease {
		if err := n.guard.admit(ctx, n, sent); err != nil {
			return wire.Reply{St: wire.StatusFailed, Err: NodeErr(ctx, err)}
		}
	}
	return rep
}
