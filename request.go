package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// One request to one node: building the script command (once per round,
// for every node), sending it, and classifying the reply.

// request is what a round sends to every node.
type request struct {
	op     opKind
	keys   []string
	token  string
	ttl    time.Duration
	fenced bool          // acquire: also raise the fence counters (acquire_fenced.lua)
	fence  int64         // opFence: the fencing token to raise the counters to
	notify bool          // release: announce it on the release channel (pubsub.go)
	origin time.Time     // validity is measured from here; zero: the round's start
	fkeys  []string      // keys followed by their fence counters, when fenced or opFence
	prefix string        // WithKeyPrefix: put before every key and channel on the wire
	floor  *atomic.Int64 // acquire, extend: the lock's floor (Lock.floor); nil otherwise
	// unlocked (acquire) is the lock's Lock.unlocked: set by Unlock. A
	// node's pipe runs Unlock's release after our acquire there (see
	// pipe.go), except where the acquire failed (a timeout): its SET may
	// still land after the release, so a failure reported after unlocked
	// is released again (round.report).
	unlocked *atomic.Bool
	fam      *family // a path, read or permit lock (family.go); nil for a key lock
	// userToken: the token was given with WithToken, and may be reused
	// by a later lock: its failed releases are not retried (cleanup.go).
	userToken bool
	// setnx: an acquire of one key, unfenced, sent as SET NX PX; the
	// acquire script runs only on refusal (see setReply).
	setnx bool
	// intent (a key lock's acquire by Lock, not TryLock): on a
	// refusal, the acquire script marks the keys that readers hold for
	// this long, so that new readers wait (acquire.lua, writerMark).
	intent time.Duration

	// Set by prepare: the script and its EVALSHA command (or SET NX PX),
	// boxed once per round. Each node gets its own copy of the argument
	// slice (a go-redis hook may rewrite arguments in place), all in one
	// allocation, and a last, pristine copy is the template for EVAL.
	script *luaScript
	argv   []any // n+1 copies of width each
	width  int
}

// args returns node i's command.
func (req *request) args(i int) []any {
	if (i+2)*req.width > len(req.argv) {
		i = 0 // prepared for one node (a clean-up release)
	}
	return req.argv[i*req.width : (i+1)*req.width : (i+1)*req.width]
}

// prepare builds the request's command for n nodes: EVALSHA of its op's
// script with its keys and arguments, or for an acquire of one key
// without fencing, SET key token NX PX ttl. The keys are the caller's;
// the key prefix is applied here, to what goes on the wire only.
//
// Why SET for an acquire: a script call costs the node about 8µs, a SET
// 2µs (INFO commandstats), and on a machine where the nodes and the
// client share the cores that is latency: measured, 5-10% off the p50 of
// an uncontended Lock+Unlock.
// Not SET NX PX GET, which would tell a refusal apart from our own key
// in one request: its grant is a nil reply, which go-redis handles as an
// error (redis.Nil), some 20 allocations each, and the latency gain was
// lost. A refusal runs the script instead (setReply).
func (req *request) prepare(n int) {
	keys := prefixKeys(req.prefix, req.keys)
	if (req.fenced || req.op == opFence) && req.fkeys == nil {
		req.fkeys = fenceKeys(keys)
	}
	var ex [4]any // the arguments after the token
	ne := 0
	switch {
	case req.fam != nil:
		req.script = req.fam.script(req.op)
		switch req.op {
		case opAcquire, opExtend:
			ex[0], ne = pxMillis(req.ttl), 1
			switch req.fam.kind {
			case kindRead:
				ex[1], ne = readMarker, 2
			case kindPermit:
				ex[1], ex[2], ne = req.fam.limit, limitMember, 3
			}
		default:
			if req.fam.kind == kindRead {
				ex[0], ne = readMarker, 1
			}
			ne = req.announce(&ex, ne)
		}
	case req.op == opAcquire:
		req.script = scriptAcquire
		ex[0], ne = pxMillis(req.ttl), 1
		switch {
		case req.fenced:
			req.script, keys = scriptAcquireFenced, req.fkeys
		case len(keys) == 1:
			req.setnx = true // the mark goes with the script (scriptArgs)
		}
		if req.intent > 0 && !req.setnx {
			ex[1], ex[2], ne = pxMillis(req.intent), readMarker, 3
		}
	case req.op == opExtend:
		req.script = scriptExtend
		ex[0], ne = pxMillis(req.ttl), 1
	case req.op == opFence:
		req.script, keys = scriptFence, req.fkeys
		ex[0], ne = req.fence, 1
	default:
		req.script = scriptRelease
		if len(keys) == 1 {
			req.script = scriptReleaseOne
		}
		ne = req.announce(&ex, ne)
	}
	w := 4 + len(keys) + ne
	if req.setnx {
		w = 6
	}
	all := make([]any, 0, (n+1)*w)
	if req.setnx {
		all = append(all, "set", keys[0], req.token, "nx", "px", ex[0])
	} else {
		all = append(all, "evalsha", req.script.sha, len(keys))
		for _, k := range keys {
			all = append(all, k)
		}
		all = append(all, req.token)
		all = append(all, ex[:ne]...)
	}
	for range n {
		all = append(all, all[:w]...)
	}
	req.argv, req.width = all, w
}

// announce appends to ex[:ne] the release channel arguments of a release
// that is announced to waiters (see pubsub.go), and returns the new count.
func (req *request) announce(ex *[4]any, ne int) int {
	switch {
	case !req.notify:
		return ne
	case req.prefix == "":
		ex[ne] = releasePrefix
		return ne + 1
	}
	// The channel is prefix + ReleaseChannel(key): the script drops the
	// key's prefix after the channel's.
	ex[ne], ex[ne+1] = req.prefix+releasePrefix, len(req.prefix)
	return ne + 2
}

// evalArgs is the EVAL form of the command, for a node that does not have
// the script cached.
func (req *request) evalArgs() []any {
	return req.scriptArgs("eval", req.script.src)
}

// scriptArgs is the command that runs req's script: cmd ("evalsha" or
// "eval") of script (its SHA-1 or source).
func (req *request) scriptArgs(cmd string, script any) []any {
	t := req.argv[len(req.argv)-req.width:] // the pristine copy
	if req.setnx {
		// SET key token NX PX ttl: the acquire script's KEYS and ARGV,
		// and a waiting writer's mark (see request.intent).
		if req.intent > 0 {
			return []any{cmd, script, 1, t[1], t[2], t[5], pxMillis(req.intent), readMarker}
		}
		return []any{cmd, script, 1, t[1], t[2], t[5]}
	}
	args := append([]any(nil), t...)
	args[0], args[1] = cmd, script
	return args
}

// contactArgs is the command of a first contact: EVAL, which also caches
// the script on the node, or the SET of a setnx acquire.
func (req *request) contactArgs() []any {
	if req.setnx {
		return req.pristine()
	}
	return req.evalArgs()
}

// pristine returns a copy of the command as prepare built it, for
// sending it again: a hook may have rewritten a node's copy in place.
func (req *request) pristine() []any {
	return append([]any(nil), req.argv[len(req.argv)-req.width:]...)
}

// reply is one node's answer.
type reply struct {
	st     NodeStatus
	fence  int64 // fenced acquire: the node's counter after the grant
	err    error
	unsent bool // never sent: nothing to release
	// refused: refused before sending (the restart guard): nothing to
	// release either, but reported to the observer like a reply.
	refused bool
}

// exec runs one request on one node, through its go-redis client, and
// classifies the reply. With the restart guard on, a grant from a node
// that restarted too recently is turned into a failure (see guard.go). A
// reply of the wrong type, and a panic of go-redis on a malformed reply,
// are node failures.
func (c *Client) exec(ctx context.Context, nd *node, req *request) reply {
	return c.execVia(ctx, nd, req, nil)
}

// execVia is exec on the node's pipe leader, through its own connection
// lc (see leaderConn); lc is nil elsewhere.
func (c *Client) execVia(ctx context.Context, nd *node, req *request, lc *leaderConn) (rep reply) {
	own := false
	defer func() {
		if p := recover(); p != nil {
			rep = reply{st: NodeFailed, err: fmt.Errorf("redlock: malformed reply: go-redis panicked: %v", p)}
		}
		if own && rep.st == NodeFailed {
			lc.drop()
		}
	}()
	if req.argv == nil {
		req.prepare(1)
	}
	sent, fail := c.before(nd, req)
	if fail != nil {
		return *fail
	}
	var s sender = nd.c
	if lc != nil {
		s, own = lc.get(nd)
	}
	var res any
	var err error
	if nd.identified.Load() {
		res, err = s.Do(ctx, req.args(nd.idx)...).Result()
		if own && closedUnder(err) && ctx.Err() == nil {
			// Most likely closed while idle: once more through the
			// pool, as its health check would have sent it.
			lc.drop()
			s, own = nd.c, false
			res, err = s.Do(ctx, req.pristine()...).Result()
		}
	} else {
		res, err = c.firstContact(ctx, nd, req)
	}
	if isNoScript(err) {
		res, err = c.eval(ctx, s, req)
	}
	if req.setnx {
		res, err = c.setReply(ctx, s, req, res, err)
	}
	return c.after(ctx, nd, req, res, err, sent)
}

// setReply turns the reply to a setnx acquire's SET NX PX into the
// acquire script's: OK is a grant (1). A refusal (nil) runs the script,
// which refreshes a key that already holds our token (acquire is
// idempotent: go-redis may have resent the SET after a broken
// connection), and answers 0 for another holder's, or for a key of
// another of our kinds (a semaphore's sorted set); a key holding a value
// that none of our kinds writes fails it with WRONGTYPE (scripts.go).
// Anything else is left for after to refuse.
func (c *Client) setReply(ctx context.Context, s sender, req *request, res any, err error) (any, error) {
	switch {
	case err == redis.Nil:
		res, err = s.Do(ctx, req.scriptArgs("evalsha", req.script.sha)...).Result()
		if isNoScript(err) {
			res, err = c.eval(ctx, s, req)
		}
		return res, err
	case err == nil && res == "OK":
		return int64(1), nil
	}
	return res, err
}

// firstContact sends INFO server and req in one pipeline, so that a node
// is identified by its run_id (see identify) within the same per-node
// timeout as the request. A node that turns out to duplicate another
// fails the request, and Client.dupErr makes the round refuse a win.
//
// The request goes as EVAL, which also caches the script on the node
// (a setnx acquire goes as its SET).
func (c *Client) firstContact(ctx context.Context, nd *node, req *request) (any, error) {
	pl := nd.c.Pipeline()
	info := pl.Info(ctx, "server")
	cmd := redis.NewCmd(ctx, req.contactArgs()...)
	_ = pl.Process(ctx, cmd)
	_, xerr := pl.Exec(ctx)
	res, err := cmd.Result()
	if err == nil && res == nil {
		err = xerr // the pipeline failed as a whole (dial, AUTH)
		if err == nil {
			err = redis.Nil
		}
	}
	if err != nil && info.Err() != nil {
		return nil, err // nothing learnt: identify on the next contact
	}
	if ierr := c.identified(nd, info.Val(), info.Err()); ierr != nil {
		return nil, ierr
	}
	return res, err
}

// eval runs req's script with EVAL, through s, for a node that lost its
// script cache (a restart, SCRIPT FLUSH).
func (c *Client) eval(ctx context.Context, s sender, req *request) (any, error) {
	return s.Do(ctx, req.evalArgs()...).Result()
}

// before runs the checks due before a request is sent: with the restart
// guard, a node known to be young is refused. It returns the sending
// time the guard needs, or the reply of a refused request.
func (c *Client) before(nd *node, req *request) (time.Time, *reply) {
	if nd.guard == nil || req.op == opRelease {
		return time.Time{}, nil
	}
	sent := time.Now()
	if err := nd.guard.young(sent); err != nil {
		return sent, &reply{st: NodeFailed, err: err, refused: true}
	}
	return sent, nil
}

// after classifies a script's reply (res, err) to req, sent at sent.
func (c *Client) after(ctx context.Context, nd *node, req *request, res any, err error, sent time.Time) reply {
	if err != nil {
		if req.op == opExtend && isWrongType(err) {
			// A value of another type at the lock's key: the lock
			// cannot be held on this node, which is not ours whoever
			// wrote the value (see scripts.go).
			return reply{st: NodeTaken}
		}
		// An acquire or a release that met a value none of our kinds
		// writes fails with the server's WRONGTYPE (scripts.go), as
		// any other error of the node.
		return reply{st: NodeFailed, err: nodeErr(ctx, err)}
	}
	v, f, ok := parseReply(res, req.op == opAcquire && req.fenced)
	if !ok {
		return reply{st: NodeFailed, err: errUnexpectedReply(res)}
	}
	var st NodeStatus
	switch v {
	case 1:
		st = NodeOK
	case 0:
		st = NodeAbsent
		if req.op == opAcquire {
			st = NodeTaken
		}
	case -1:
		st = NodeTaken
	case -2:
		if req.fam == nil || req.fam.kind != kindPermit {
			return reply{st: NodeFailed, err: errUnexpectedReply(res)}
		}
		return reply{st: NodeFailed, err: errLimitMismatch(req.fam)}
	}
	if st == NodeOK && nd.guard != nil && req.op != opRelease {
		if err := nd.guard.admit(ctx, nd, sent); err != nil {
			return reply{st: NodeFailed, err: nodeErr(ctx, err)}
		}
	}
	return reply{st: st, fence: f}
}

// parseReply checks a script's reply: an integer 1, 0, -1 or -2 (a
// semaphore's limit mismatch), or for a fenced acquire {1, f} with f > 0
// or {0, 0}. Anything else (a string of digits, a RESP3 type, another
// number) is not what our scripts return.
func parseReply(res any, fenced bool) (v, f int64, ok bool) {
	if !fenced {
		v, ok = res.(int64)
		return v, 0, ok && (v == 1 || v == 0 || v == -1 || v == -2)
	}
	arr, ok := res.([]any)
	if !ok || len(arr) != 2 {
		return 0, 0, false
	}
	v, ok1 := arr[0].(int64)
	f, ok2 := arr[1].(int64)
	switch {
	case !ok1 || !ok2:
		return 0, 0, false
	case v == 1 && f > 0, v == 0 && f == 0:
		return v, f, true
	}
	return 0, 0, false
}

// isWrongType reports whether err is the node's WRONGTYPE error: a
// script met a key of another type than it reads.
func isWrongType(err error) bool {
	return redis.HasErrorPrefix(err, "WRONGTYPE")
}

// foreignBlocked reports whether err is a lost round in which more
// nodes failed with WRONGTYPE than the quorum can spare: values that
// none of our kinds writes sit at the lock's keys (scripts.go). Those
// are the nodes' answers, not an outage: no retry can win until someone
// removes the values, so Lock returns the error rather than wait for
// them.
func foreignBlocked(err error) bool {
	var qe *QuorumError
	if !errors.As(err, &qe) {
		return false
	}
	n := 0
	for _, r := range qe.Nodes {
		if r.Status == NodeFailed && isWrongType(r.Err) {
			n++
		}
	}
	return n > len(qe.Nodes)-qe.Quorum
}

// nodeErr marks a request cut short by the per-node deadline as a timeout.
func nodeErr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errors.Join(ErrNodeTimeout, err)
	}
	return err
}
