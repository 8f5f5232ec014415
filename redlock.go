// Package redlock implements the Redlock distributed lock over N
// independent Redis masters, on go-redis v9.
//
// A lock attempt sends SET-if-absent to every node at once and is won when
// a majority (N/2+1) granted it and time is left: validity = ttl - elapsed
// - drift, with drift = ttl*factor + 2ms (WithDriftFactor, default
// factor 0.01) and elapsed measured on the monotonic clock from before
// the first request. A lost attempt releases
// every node that may hold its token. MultiLock is the variant that needs
// every node.
//
// Every node request has its own timeout (WithNodeTimeout) that holds
// whether or not the go-redis clients honour context deadlines, and a round
// returns as soon as its outcome is decided: a slow or stalled node never
// holds a caller up for longer than that timeout. A busy node is not a
// failed one: requests queue for it and wait for room in its queue
// within that timeout, and only a node silent for the whole timeout
// fails them (see WithNodeTimeout).
//
// Errors are matched with errors.Is: ErrNotObtained for every failed
// acquisition, ErrNotHeld when Extend or Unlock cannot reach a quorum, and
// the reason (ErrContended, ErrUnreachable, ErrExpired or the context's
// error). errors.As reaches a *QuorumError listing every node's outcome.
//
// Redlock alone does not give mutual exclusion against a holder that
// pauses past its validity: check Validity before acting, and see the
// README for what is and is not guaranteed.
package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
	"golang.org/x/sync/errgroup"
)

// Client acquires locks held on a majority of its nodes. It is safe for
// concurrent use. A Client made by New does not own the go-redis
// clients: closing them is the caller's job; one made by Dial does, and
// its Close closes them.
type Client struct {
	nodes []*node.Node
	need  int
	cfg   config

	idMu   sync.Mutex            // serialises identify
	shard  sharding              // the strictest sharding among the nodes (keys.go)
	dupErr atomic.Pointer[error] // set once two nodes turn out to be one server
	first  atomic.Bool           // the first round has started (see runReq)

	hub   hub   // release subscriptions of waiting Lock calls (pubsub.go)
	lines lines // the Lock calls waiting on each key (queue.go)
	// releaseQ: what an announced release of a key lock sends of the
	// key's wait queue (queue.go).
	releaseQ *wire.Queue
	sched    sched // auto-extension of held locks (scheduler.go)

	closed    chan struct{} // closed by Close; nil for a zero Client
	closeOnce sync.Once     // closes closed
	flights   node.Count    // releases in flight (quorum.go), for Close
	// g runs the client's goroutines: the nodes' pipe leaders and
	// release retry loops (internal/node); Close waits for it. goMu
	// orders g.Go with Close: see spawn.
	g    errgroup.Group
	goMu sync.RWMutex

	owned     []redis.UniversalClient // made by Dial: Close closes them
	ownedOnce sync.Once
}

// New returns a Client over nodes, which must be independent Redis
// masters (not replicas of each other, not the same server twice). It
// does no I/O; each node is identified by its run_id on first contact.
// With WithLogger, New logs (Warn) what weakens safety, one line per
// finding, from a background probe of the nodes (as Health reports it);
// it neither waits for the probe nor fails for what it finds.
//
// Errors match ErrInvalid: nodes empty, a nil client, the same client
// (or address and DB) twice ("duplicate node"), an option out of range.
// To build the go-redis clients from URLs, see Dial and NewClients.
// Details: docs/api.md#new.
func New(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	return newClient(nodes, 0, opts, false)
}

// newClient returns a Client over clients that needs need votes (0: a
// majority); owned says it closes the clients (Dial).
func newClient(clients []redis.UniversalClient, need int, opts []Option, owned bool) (*Client, error) {
	c := &Client{closed: make(chan struct{})}
	h := &node.Host{
		Spawn:        c.spawn,
		Closed:       c.closed,
		Identified:   func(n *node.Node, info string, err error) error { return identified(c, n, info, err) },
		DroppedRetry: func(nd *node.Node, keys []string) { logDroppedRetry(c, nd, keys) },
		Jitter:       jitter,
		FinalWait:    releaseTimeout,
	}
	nodes, err := newNodes(clients, h)
	if err != nil {
		return nil, err
	}
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	majority := need == 0 // not a MultiLock, which needs every node by design
	if majority {
		need = quorum(len(nodes))
	}
	if cfg.restartGuard > 0 {
		for _, nd := range nodes {
			if err := nd.InstallGuard(cfg.restartGuard); err != nil {
				return nil, invalidf("%v", err)
			}
		}
	}
	if cfg.replicas > 0 {
		for _, nd := range nodes {
			if err := nd.InstallReplicas(cfg.replicas, cfg.replicaWait); err != nil {
				return nil, invalidf("%v", err)
			}
		}
	}
	c.nodes, c.need, c.cfg = nodes, need, cfg
	c.hub.id = newWaiterID()
	c.lines.h = &c.hub
	c.releaseQ = &wire.Queue{Named: namedFor(&cfg)}
	h.RetryTimeout = max(cfg.nodeTimeout, releaseTimeout)
	if owned {
		c.owned = clients
	}
	c.shard = clientSharding(c)
	logStartFindings(c, majority)
	return c, nil
}

// Quorum returns how many nodes must agree on a lock: N/2+1 (a
// semaphore permit needs more (see TryAcquire), and a MultiLock every node); 0
// for a nil *Client.
func (c *Client) Quorum() int {
	if c == nil {
		return 0
	}
	return c.need
}

// callConfig returns the configuration for one call: the client's, or a
// copy with opts applied.
func (c *Client) callConfig(opts []LockOption) (*config, error) {
	if c == nil {
		return nil, invalidf("nil *Client")
	}
	if len(opts) == 0 {
		return &c.cfg, nil
	}
	cfg := c.cfg
	if err := cfg.applyCall(opts); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// TryLock makes one attempt to acquire key for ttl on a quorum of nodes,
// without joining the key's wait queue. The *Lock's Validity is
// ttl - elapsed - drift. It returns within the per-node timeout (default
// ttl/20 in [5ms, 200ms], WithNodeTimeout) or when ctx is done. Every
// failed attempt releases what it may have taken, even when cancelled.
//
// Errors: ErrInvalid for a nil ctx, an empty key, or a ttl that leaves
// no validity after drift; else ErrNotObtained and its reason:
// ErrContended (other owners hold key), ErrUnreachable (nodes failed, a
// foreign value type at key included), ErrExpired (won too late) or
// ctx.Err(). Details: docs/api.md#clienttrylock.
func (c *Client) TryLock(ctx context.Context, key string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	if key == "" {
		return nil, invalidf("empty key")
	}
	cfg, err := c.callConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := checkSharded(c, []string{key}, cfg); err != nil {
		return nil, err
	}
	token, err := cfg.newToken()
	if err != nil {
		return nil, err
	}
	return c.tryLock(ctx, []string{key}, ttl, token, cfg, nil, 0)
}

// Lock acquires key for ttl like TryLock, retrying after a jittered delay
// (WithRetryDelay, default 50ms ± 50%) until it wins, ctx is done or the
// retry budget (WithMaxTries, default none) is spent. A call that finds
// the key held waits in the key's queue and is woken by the release
// (WithHandoff, default on; docs/contention.md).
//
// Errors are those of TryLock. When ctx ends the wait, the error matches
// ErrNotObtained, ctx.Err() and the last completed attempt's reason, so a
// deadline still tells held from down. Bad input (ErrInvalid), and an
// attempt lost to values of a foreign type at the key, return at once.
// Details: docs/api.md#clientlock.
func (c *Client) Lock(ctx context.Context, key string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	if key == "" {
		return nil, invalidf("empty key")
	}
	cfg, err := c.callConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := checkSharded(c, []string{key}, cfg); err != nil {
		return nil, err
	}
	return lockLoop(ctx, c, []string{key}, ttl, cfg, nil)
}

// tryLock is one attempt on validated keys; fam is nil for a key lock.
// intent is request.intent: positive for Lock's attempts on key locks.
func (c *Client) tryLock(ctx context.Context, keys []string, ttl time.Duration, token string, cfg *config, fam *family, intent time.Duration) (*Lock, error) {
	l, _, err := c.acquire(ctx, keys, ttl, token, cfg, fam, intent, nil)
	return l, err
}

// acquire is tryLock, also returning the round's outcome when it ran;
// from, when set, is the lock whose Unlock hands the key on (handon.go).
func (c *Client) acquire(ctx context.Context, keys []string, ttl time.Duration, token string, cfg *config, fam *family, intent time.Duration, from *Lock) (*Lock, outcome, error) {
	var none outcome
	if err := c.check(ctx, ttl, cfg); err != nil {
		return nil, none, err
	}
	l := &Lock{c: c, keys: keys, token: token, ttl: ttl, maxTTL: ttl, cfg: cfg, fam: fam, actx: ctx, intent: intent}
	if err := ctx.Err(); err != nil {
		qe := unsentError(c, opAcquire, l.shownKeys(), ErrNotObtained, err)
		if cfg.obs != nil {
			cfg.obs(Event{Kind: "round", Ctx: ctx, Op: opLockName, Keys: l.shownKeys(), Reason: reasonOf(qe), Start: time.Now(), Nodes: qe.Nodes, Err: qe})
		}
		return nil, none, qe
	}
	if c.isClosed() {
		return nil, none, ErrClosed
	}
	req := roundReq(c, opAcquire, l, ttl)
	if from != nil {
		req.w.Prev, req.prevTTL = from.token, max(from.ttl, from.maxTTL)
	}
	out := runReq(ctx, c, req, cfg)
	if p := c.dupErr.Load(); p != nil {
		// Found during this round: refuse even a win, which may have
		// counted one server twice.
		if out.won {
			_ = l.Unlock(ctx)
		}
		return nil, out, *p
	}
	if !out.won {
		if fam != nil && fam.kind == kindPermit && limitMismatched(out.err) {
			// The nodes answered: the cause is the caller's limit, not
			// an outage.
			out.err.reasons = []error{ErrNotObtained, errLimitMismatch(fam)}
		}
		return nil, out, out.err
	}
	if cfg.fencing {
		if err := fenceLock(ctx, c, l, out, cfg); err != nil {
			return nil, out, err
		}
	}
	dl := deadline(out.start, ttl, cfg.driftFactor)
	if !time.Now().Before(dl) {
		// Won, but no validity is left now: the first round waited for
		// the first contacts of slow nodes, or a fencing round ran.
		_ = l.Unlock(context.WithoutCancel(ctx))
		return nil, out, out.rd.resultError(ErrNotObtained, ErrExpired)
	}
	// Set once the lock is the caller's: the Unlock of a win undone above
	// does not report the end of a lock (see firstUnlockLocked).
	l.acquired = out.start
	l.deadline, l.dlTTL = dl, ttl
	return l, out, nil
}

// check validates what every call needs.
func (c *Client) check(ctx context.Context, ttl time.Duration, cfg *config) error {
	if c == nil {
		return invalidf("nil *Client")
	}
	if len(c.nodes) == 0 {
		return invalidf("zero Client: make one with New or NewMultiLock")
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	if ttl <= 0 {
		return invalidf("ttl must be positive, got %v", ttl)
	}
	if !checkTTL(ttl, cfg.driftFactor) {
		return invalidf("ttl %v leaves no validity after drift %v (need at least %v)", ttl, drift(max(ttl, 0), cfg.driftFactor), minValidity)
	}
	if p := c.dupErr.Load(); p != nil {
		return *p
	}
	return nil
}

// newToken returns the value a lock stores on the nodes: the token set
// by WithToken, or 128 random bits from crypto/rand, hex-encoded; then,
// with WithMetadata, a NUL byte and the metadata (wire.Value).
func (c *config) newToken() (string, error) {
	if c.token != "" {
		return wire.Value(c.token, c.meta), nil
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return wire.Value(hex.EncodeToString(b[:]), c.meta), nil
}

// spawn runs f on a goroutine of the client's group, which Close waits
// for. After Close it runs f on a goroutine of its own when always is
// set (the pipe leaders of the rounds still allowed: Extend, Unlock), and
// not at all otherwise (retry loops), and reports whether it ran f. goMu
// makes every g.Go happen before Close's Wait: a Wait does not race an
// Add of the same group.
func (c *Client) spawn(f func() error, always bool) bool {
	c.goMu.RLock()
	if !c.isClosed() {
		c.g.Go(f)
		c.goMu.RUnlock()
		return true
	}
	c.goMu.RUnlock()
	if always {
		go func() { _ = f() }()
	}
	return always
}

// isClosed reports whether Close was called.
func (c *Client) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// closeWait bounds Close's wait for the retry loops' last attempts.
const closeWait = 2 * releaseTimeout

// giveBackWait bounds Close's wait for the connections the nodes' leaders
// and direct paths held to be back in their go-redis pools: a hand-over
// between goroutines, with no I/O.
const giveBackWait = 100 * time.Millisecond

// Close ends the client's background work and waits for it, so that the
// process may exit right after: releases in flight get up to 250ms,
// releases being retried one last attempt, and every auto-extension ends
// (those locks end as lost, with ErrClosed). It returns within about
// 850ms even with a stalled node. Held locks can still be extended and
// unlocked; new acquisitions fail with ErrClosed. It closes the go-redis
// clients of a Client made by Dial, not those given to New. Idempotent;
// returns nil; a nil or zero Client does nothing. Details:
// docs/api.md#clientclose.
func (c *Client) Close() error {
	if c == nil || c.closed == nil {
		return nil
	}
	c.flights.Wait(releaseTimeout)
	c.goMu.Lock()
	c.closeOnce.Do(func() { close(c.closed) })
	c.goMu.Unlock()
	c.sched.endAll()
	// Every goroutine of the group (pipe leaders, retry loops) was
	// started before this Wait. Bounded: a node whose go-redis client
	// has no read timeout and does not honour context deadlines can hold
	// a request forever; the retry loops' last attempts are bounded by
	// releaseTimeout each.
	node.WaitTimeout(func() { _ = c.g.Wait() }, closeWait) // its goroutines return nil: failures are outcomes
	var wg sync.WaitGroup
	for _, nd := range c.nodes {
		wg.Go(func() { nd.GiveBack(giveBackWait) })
	}
	wg.Wait()
	c.ownedOnce.Do(func() { closeClients(c.owned) })
	return nil
}
