package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// A round sends one request to every node concurrently and decides as soon
// as the outcome is known: `need` votes won, or so many nodes failed or
// refused that `need` votes are impossible. It never waits for the slowest
// node: a node that has not answered within the per-node timeout counts as
// failed, whether or not its go-redis client honours context deadlines.

type opKind uint8

const (
	opAcquire opKind = iota
	opExtend
	opRelease
	opFence // the second round of a fenced acquire: see fence.go
)

func (o opKind) String() string {
	switch o {
	case opAcquire:
		return "lock"
	case opExtend:
		return "extend"
	case opFence:
		return "fence"
	}
	return "unlock"
}

// request is what a round sends to every node.
type request struct {
	op     opKind
	keys   []string
	token  string
	ttl    time.Duration
	fenced bool      // acquire: also raise the fence counters (acquire_fenced.lua)
	fence  int64     // opFence: the fencing token to raise the counters to
	notify bool      // release: announce it on the release channel (pubsub.go)
	origin time.Time // validity is measured from here; zero: the round's start
	fkeys  []string  // keys followed by their fence counters, when fenced or opFence
	prefix string    // WithKeyPrefix: put before every key and channel on the wire

	// Set by prepare: the script and its EVALSHA command, boxed once per
	// round. Each node gets its own copy of the argument slice (a go-redis
	// hook may rewrite arguments in place), all in one allocation, and a
	// last, pristine copy is the template for EVAL.
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
// script with its keys and arguments. The keys are the caller's; the key
// prefix is applied here, to what goes on the wire only.
func (req *request) prepare(n int) {
	keys := prefixKeys(req.prefix, req.keys)
	if (req.fenced || req.op == opFence) && req.fkeys == nil {
		req.fkeys = fenceKeys(keys)
	}
	var a1, a2, a3 any = req.token, nil, nil
	switch req.op {
	case opAcquire:
		req.script, a2 = scriptAcquire, pxMillis(req.ttl)
		if req.fenced {
			req.script, keys = scriptAcquireFenced, req.fkeys
		}
	case opExtend:
		req.script, a2 = scriptExtend, pxMillis(req.ttl)
	case opFence:
		req.script, keys, a2 = scriptFence, req.fkeys, req.fence
	default:
		req.script = scriptRelease
		if req.notify {
			a2 = releasePrefix
			if req.prefix != "" {
				// The channel is prefix + ReleaseChannel(key): the
				// script drops the key's prefix after the channel's.
				a2, a3 = req.prefix+releasePrefix, len(req.prefix)
			}
		}
	}
	w := 4 + len(keys)
	if a2 != nil {
		w++
	}
	if a3 != nil {
		w++
	}
	all := make([]any, 0, (n+1)*w)
	all = append(all, "evalsha", req.script.sha, len(keys))
	for _, k := range keys {
		all = append(all, k)
	}
	all = append(all, a1)
	if a2 != nil {
		all = append(all, a2)
	}
	if a3 != nil {
		all = append(all, a3)
	}
	for range n {
		all = append(all, all[:w]...)
	}
	req.argv, req.width = all, w
}

// evalArgs is the EVAL form of the command, for a node that does not have
// the script cached.
func (req *request) evalArgs() []any {
	args := append([]any(nil), req.argv[len(req.argv)-req.width:]...)
	args[0], args[1] = "eval", req.script.src
	return args
}

// reply is one node's answer.
type reply struct {
	st     NodeStatus
	fence  int64 // fenced acquire: the node's counter after the grant
	err    error
	unsent bool // never sent: nothing to release
}

type round struct {
	c       *Client
	cfg     *config // the call's: observer and logger
	req     *request
	op      opKind
	keys    []string
	token   string
	ttl     time.Duration
	need    int
	timeout time.Duration
	start   time.Time
	origin  time.Time       // validity is measured from here (start, or the acquire's start)
	parent  context.Context // the caller's; releases run detached from its cancellation
	drift   float64         // the drift factor
	g       errgroup.Group  // the node goroutines; not waited for

	mu       sync.Mutex
	res      []NodeResult // Status NodePending: no reply yet
	left     int          // jobs not yet reported
	ok, bad  int
	decided  bool
	won      bool
	expired  bool
	validity time.Duration
	fences   []int64 // fenced acquire: each granting node's counter
	fence    int64   // fenced acquire: the largest counter of the winning quorum
	fsync    bool    // fenced acquire: every node of the winning quorum had that counter
	done     chan struct{}
	settled  chan struct{} // closed by the last report; nil when nobody waits for it

	// unlocked is set by Unlock on the lock this acquire round won. A
	// node's pipe runs Unlock's release after our acquire there (see
	// pipe.go), except where the acquire failed (a timeout): its SET may
	// still land after the release, so a failure reported after unlocked
	// is released again.
	unlocked atomic.Bool
}

// outcome is what a round decided.
type outcome struct {
	won      bool
	validity time.Duration // acquire/extend: ttl - elapsed - drift at the decision
	start    time.Time
	err      *QuorumError // nil when won
	rd       *round

	// Fenced acquire: the fencing token (largest counter of the winning
	// quorum) and whether every node of that quorum already holds it, in
	// which case no second round is needed (see fence.go).
	fence       int64
	fenceSynced bool
}

// run fans the request out and blocks until the outcome is decided, the
// per-node timeout passes, or ctx is done. An acquire is fenced when cfg
// says so; a release is announced to waiters (see pubsub.go).
func (c *Client) run(ctx context.Context, op opKind, keys []string, token string, ttl time.Duration, cfg *config) outcome {
	return c.runReq(ctx, &request{
		op: op, keys: keys, token: token, ttl: ttl,
		fenced: op == opAcquire && cfg.fencing,
		notify: op == opRelease,
	}, cfg)
}

// runReq is run for a built request.
func (c *Client) runReq(ctx context.Context, req *request, cfg *config) outcome {
	n := len(c.nodes)
	if req.argv == nil {
		req.prefix = cfg.prefix
		req.prepare(n)
	}
	op, keys, token, ttl := req.op, req.keys, req.token, req.ttl
	rd := &round{
		c: c, cfg: cfg, req: req, op: op, keys: keys, token: token, ttl: ttl,
		need:    c.need,
		timeout: cfg.timeoutFor(ttl),
		drift:   cfg.driftFactor,
		res:     make([]NodeResult, n),
		left:    n,
		done:    make(chan struct{}),
	}
	if req.fenced {
		rd.fences = make([]int64, n)
	}
	rd.parent = ctx
	nodeCtx := ctx
	if op == opRelease {
		// Unlock is a clean-up: the caller's cancellation must not leave
		// our keys behind. The round is still bounded by the timeout.
		nodeCtx = context.WithoutCancel(ctx)
	}
	rd.start = time.Now()
	rd.origin = req.origin
	if rd.origin.IsZero() {
		rd.origin = rd.start
	}
	for i, nd := range c.nodes {
		// All set before any reply can be reported and read them.
		rd.res[i] = NodeResult{Node: i, Addr: nd.addr}
	}
	wait := rd.timeout
	if c.first.CompareAndSwap(false, true) {
		// The client's first round waits for every node's first contact,
		// so that a server given twice is reported (ErrDuplicateNode)
		// before anything is won; later a duplicate is still refused on
		// its first contact, and never votes twice. A first contact
		// dials (TCP, TLS, AUTH) and so gets FirstContactTimeout if that
		// is longer than the per-node timeout.
		rd.settled = make(chan struct{})
		wait = max(wait, FirstContactTimeout)
	}
	// The round waits for the nodes for the per-node timeout (the timer
	// below), not for the slowest. Their requests are not cut short at
	// that timeout: they run under the caller's context (detached for a
	// release), bounded by the go-redis client's own timeouts, so that a
	// first contact that must dial (TLS, a slow network) completes for
	// the next round's benefit, and a late reply is still handled:
	// report releases a late grant of a lost acquisition. The group is
	// deliberately not waited for.
	for i, nd := range c.nodes {
		c.submit(&rd.g, nd, job{rd: rd, i: i, ctx: nodeCtx})
	}

	timer := getTimer(wait)
	var ctxErr error
	select {
	case <-rd.done:
		if rd.settled != nil {
			select {
			case <-rd.settled:
			case <-timer.C:
			case <-nodeCtx.Done():
			}
			// tryLock refuses a win if a duplicate turned up.
		}
	case <-timer.C:
	case <-nodeCtx.Done(): // never for a release
		ctxErr = ctx.Err()
	}
	putTimer(timer)

	rd.mu.Lock()
	if !rd.decided {
		rd.decided = true
		for i := range rd.res {
			if rd.res[i].Status == NodePending && ctxErr == nil {
				// Exactly ErrNodeTimeout, unjoined: see below.
				rd.res[i].Status = NodeFailed
				rd.res[i].Err = ErrNodeTimeout
				rd.res[i].Latency = time.Since(rd.start)
			}
		}
	}
	out := outcome{won: rd.won && ctxErr == nil, validity: rd.validity, start: rd.start, rd: rd,
		fence: rd.fence, fenceSynced: rd.fsync}
	if out.won {
		rd.mu.Unlock()
		if cfg.obs != nil {
			rd.observeRound(out)
		}
		return out
	}
	rd.won = false // a cancelled win is released like a loss
	out.err = rd.errorLocked(ctxErr)
	var release []*node
	if op == opAcquire {
		for i, nd := range c.nodes {
			// Nodes still in flight (pending, or marked timed out above
			// with the bare ErrNodeTimeout) are released by report when
			// their reply comes.
			r := &rd.res[i]
			if r.Status == NodeOK || (r.Status == NodeFailed && r.Err != ErrNodeTimeout) {
				release = append(release, nd)
			}
		}
	}
	rd.mu.Unlock()
	if cfg.obs != nil {
		rd.observeRound(out)
	}
	if len(release) > 0 {
		rd.releaseAll(release)
	}
	return out
}

// report records node i's reply and decides the round when it can.
func (rd *round) report(i int, r reply) {
	st, err := r.st, r.err
	lat := time.Since(rd.start)
	if rd.cfg.obs != nil || rd.cfg.log != nil {
		// Before the decision, so that the replies that decided a round
		// are observed before the round is.
		rd.observeNode(i, r, lat)
	}
	rd.mu.Lock()
	rd.left--
	last := rd.left == 0
	if last && rd.settled != nil {
		close(rd.settled)
	}
	if rd.decided {
		// Our SET may have landed after the round was lost; or, where
		// the request failed, after the lock it won was released (see
		// unlocked).
		late := rd.op == opAcquire && !r.unsent &&
			((!rd.won && (st == NodeOK || st == NodeFailed)) || (st == NodeFailed && rd.unlocked.Load()))
		rd.mu.Unlock()
		if late {
			rd.release(rd.c.nodes[i])
		}
		return
	}
	rd.res[i] = NodeResult{Node: i, Addr: rd.res[i].Addr, Status: st, Err: err, Latency: lat}
	if st == NodeOK {
		rd.ok++
		if rd.fences != nil {
			rd.fences[i] = r.fence
		}
	} else {
		rd.bad++
	}
	switch {
	case rd.ok >= rd.need:
		rd.decided = true
		rd.won = true
		if rd.fences != nil {
			rd.fence, rd.fsync = quorumFence(rd.res, rd.fences)
		}
		if rd.op != opRelease {
			rd.validity = validity(rd.ttl, lat+rd.start.Sub(rd.origin), rd.drift)
			if rd.validity <= 0 {
				rd.won, rd.expired = false, true
			}
		}
		close(rd.done)
	case rd.bad > len(rd.res)-rd.need:
		rd.decided = true
		close(rd.done)
	}
	rd.mu.Unlock()
}

// timers recycles the rounds' timers: since Go 1.23 a stopped timer can
// be reset with no stale tick to drain.
var timers = sync.Pool{New: func() any { return time.NewTimer(time.Hour) }}

func getTimer(d time.Duration) *time.Timer {
	t := timers.Get().(*time.Timer)
	t.Reset(d)
	return t
}

func putTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}

// lost reports whether rd is an acquire that was decided and lost, so
// that its queued requests need not be sent.
func (rd *round) lost() bool {
	if rd.op != opAcquire {
		return false
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rd.decided && !rd.won
}

// errorLocked builds the error of a lost round. rd.mu must be held.
func (rd *round) errorLocked(ctxErr error) *QuorumError {
	e := &QuorumError{
		Op: rd.op.String(), Keys: rd.keys, Quorum: rd.need, OK: rd.ok,
		Nodes: append([]NodeResult(nil), rd.res...),
	}
	switch {
	case rd.op == opAcquire || rd.op == opFence:
		e.reasons = append(e.reasons, ErrNotObtained)
	case ctxErr == nil:
		// A cancelled Extend proves nothing about the lock; anything else
		// that missed its quorum cannot show the lock is held.
		e.reasons = append(e.reasons, ErrNotHeld)
	}
	if ctxErr != nil {
		e.reasons = append(e.reasons, ctxErr)
		return e
	}
	if rd.expired {
		e.reasons = append(e.reasons, ErrExpired)
		return e
	}
	var taken, absent, failed int
	for _, r := range rd.res {
		switch r.Status {
		case NodeTaken:
			taken++
		case NodeAbsent:
			absent++
		case NodeFailed:
			failed++
		}
	}
	limit := len(rd.res) - rd.need // the most nodes that may say no
	switch {
	case taken+absent > limit:
		if taken > 0 && (rd.op == opAcquire || rd.op == opFence) {
			e.reasons = append(e.reasons, ErrContended)
		}
	case failed > limit:
		e.reasons = append(e.reasons, ErrUnreachable)
	default:
		if taken > 0 && (rd.op == opAcquire || rd.op == opFence) {
			e.reasons = append(e.reasons, ErrContended)
		}
		e.reasons = append(e.reasons, ErrUnreachable)
	}
	return e
}

// releaseAll releases the lost attempt's keys on nodes concurrently and
// waits, bounded by the per-node timeout, under a context the caller's
// cancellation cannot cut short.
func (rd *round) releaseAll(nodes []*node) {
	var wg sync.WaitGroup
	for _, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rd.release(nd)
		}()
	}
	// Bounded here too: go-redis may not honour the context deadline.
	waitTimeout(&wg, rd.timeout)
}

func (rd *round) release(nd *node) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rd.parent), rd.timeout)
	defer cancel()
	// A clean-up, not an Unlock: no announcement, so that the releases of
	// split votes do not wake every waiter into another split.
	start := time.Now()
	r := rd.c.exec(ctx, nd, &request{op: opRelease, keys: rd.keys, token: rd.token, ttl: rd.ttl, prefix: rd.req.prefix})
	if rd.cfg.obs != nil || rd.cfg.log != nil {
		rd.observeCleanup(nd, r, time.Since(start))
	}
}

// call runs one request on one node and classifies the reply. A release
// is announced to waiters.
func (c *Client) call(ctx context.Context, nd *node, op opKind, keys []string, token string, ttl time.Duration) (NodeStatus, error) {
	r := c.exec(ctx, nd, &request{op: op, keys: keys, token: token, ttl: ttl, notify: op == opRelease, prefix: c.cfg.prefix})
	return r.st, r.err
}

// exec runs one request on one node and classifies the reply. With the
// restart guard on, a grant from a node that restarted too recently is
// turned into a failure (see guard.go). A reply of the wrong type, and a
// panic of go-redis on a malformed reply, are node failures.
func (c *Client) exec(ctx context.Context, nd *node, req *request) (rep reply) {
	defer func() {
		if p := recover(); p != nil {
			rep = reply{st: NodeFailed, err: fmt.Errorf("redlock: malformed reply: go-redis panicked: %v", p)}
		}
	}()
	if req.argv == nil {
		req.prepare(1)
	}
	sent, fail := c.before(nd, req)
	if fail != nil {
		return *fail
	}
	var res any
	var err error
	if nd.identified.Load() {
		res, err = nd.c.Do(ctx, req.args(nd.idx)...).Result()
	} else {
		res, err = c.firstContact(ctx, nd, req)
	}
	if isNoScript(err) {
		res, err = c.eval(ctx, nd, req)
	}
	return c.after(ctx, nd, req, res, err, sent)
}

// firstContact sends INFO server and req in one pipeline, so that a node
// is identified by its run_id (see identify) within the same per-node
// timeout as the request. A node that turns out to duplicate another
// fails the request, and Client.dupErr makes the round refuse a win.
//
// The request goes as EVAL, which also caches the script on the node.
func (c *Client) firstContact(ctx context.Context, nd *node, req *request) (any, error) {
	pl := nd.c.Pipeline()
	info := pl.Info(ctx, "server")
	cmd := redis.NewCmd(ctx, req.evalArgs()...)
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

// eval runs req's script with EVAL, for a node that lost its script
// cache (a restart, SCRIPT FLUSH).
func (c *Client) eval(ctx context.Context, nd *node, req *request) (any, error) {
	return nd.c.Do(ctx, req.evalArgs()...).Result()
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
		return sent, &reply{st: NodeFailed, err: err}
	}
	return sent, nil
}

// after classifies a script's reply (res, err) to req, sent at sent.
func (c *Client) after(ctx context.Context, nd *node, req *request, res any, err error, sent time.Time) reply {
	if err != nil {
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
	}
	if st == NodeOK && nd.guard != nil && req.op != opRelease {
		if err := nd.guard.admit(ctx, nd, sent); err != nil {
			return reply{st: NodeFailed, err: nodeErr(ctx, err)}
		}
	}
	return reply{st: st, fence: f}
}

// parseReply checks a script's reply: an integer 1, 0 or -1, or for a
// fenced acquire {1, f} with f > 0 or {0, 0}. Anything else (a string of
// digits, a RESP3 type, another number) is not what our scripts return.
func parseReply(res any, fenced bool) (v, f int64, ok bool) {
	if !fenced {
		v, ok = res.(int64)
		return v, 0, ok && (v == 1 || v == 0 || v == -1)
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

// nodeErr marks a request cut short by the per-node deadline as a timeout.
func nodeErr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errors.Join(ErrNodeTimeout, err)
	}
	return err
}
