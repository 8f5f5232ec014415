package redlock

import (
	"context"
	"slices"
	"time"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// Holder is one holder of a lock: a key lock's or a path's owner, a
// reader of a read lock, a semaphore's permit.
type Holder struct {
	// ID is an opaque identifier of the holder, the same on every node:
	// the SHA-1 of its token, so that nodes can be compared without the
	// token leaving them.
	ID       string
	Metadata string        // WithMetadata's; "" when none
	TTL      time.Duration // remaining time to live (see Holding.TTL)
}

// NodeHolding is one node's answer to Inspect.
type NodeHolding struct {
	// Node is the node's index in the slice given to New (0-based), as
	// NodeResult.Node; messages number nodes from 1 (Node+1).
	Node int
	Addr string // the node's address, when the client exposes one
	// Kind is what the node holds at the key: "none" (free), "key" (a
	// key or path lock), "read" (readers), "sem" (a semaphore's permits),
	// "other" (a value none of the library's kinds writes), or "" when
	// the node failed (Err).
	Kind    string
	Holders []Holder      // the live holders on this node, TTL as the node counts it
	Fence   int64         // the key's fence counter on this node; 0 when none
	Err     error         // why the node failed
	Latency time.Duration // time from the start of Inspect to the answer
}

// Holding is what Inspect found: what a quorum of nodes says of a lock,
// with each node's answer.
type Holding struct {
	// State is what a quorum of nodes says: "held" (a holder is on a
	// quorum), "free" (no holder is on a quorum, and none can be on the
	// nodes that did not answer) or "unknown" (too few nodes answered).
	State string
	// Holders are the holders present on a quorum of nodes: one for a
	// key or a path lock, the readers of a read lock, the permits of a
	// semaphore. TTL is what a quorum guarantees: the quorum-th largest
	// time to live among the nodes (a node without the holder counts
	// 0), less the time Inspect took.
	Holders []Holder
	// Metadata and TTL are Holders[0]'s: for a key or a path lock, its
	// holder's. "" and 0 when no holder is on a quorum.
	Metadata string
	TTL      time.Duration
	// Fence is the key's fencing counter (WithFencing): for a held key,
	// the largest counter among the nodes that hold it, which is the
	// holder's fencing token; otherwise the largest among the nodes that
	// answered. 0 without fencing.
	Fence int64
	Nodes []NodeHolding // one entry per node, in the order given to New
}

// The states of a Holding.
const (
	stateHeld    = "held"
	stateFree    = "free"
	stateUnknown = "unknown"
)

// inspectTimeout is how long Inspect waits for a node without
// WithNodeTimeout: the longest default per-node timeout.
const inspectTimeout = maxNodeTimeout

// Inspect reports who holds key as a quorum of nodes sees it, reading
// every node once and changing nothing: a key lock, a read lock's
// readers, a semaphore's permits, or, given KeyName("path", path), a path
// lock. A free key (State "free") and too few answers (State "unknown")
// are results, not errors. Holders are told apart by an opaque ID, never
// by their token. Each node gets the per-node timeout (default 200ms);
// the key prefix applies.
//
// Errors: ErrInvalid for a nil *Client, a nil ctx or an empty key;
// ErrClosed after Close; ctx's error when ctx ends first.
func (c *Client) Inspect(ctx context.Context, key string, opts ...LockOption) (*Holding, error) {
	if key == "" {
		return nil, invalidf("empty key")
	}
	cfg, err := c.callConfig(opts)
	if err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, invalidf("nil context")
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	return c.inspect(ctx, cfg, cfg.prefix+key)
}

// inspect is Inspect of wk, a key on the wire. Its reads go through the
// nodes' queues, behind the requests of the key's rounds already handed
// to them: what a round won on a node shows in a later inspection.
func (c *Client) inspect(ctx context.Context, cfg *config, wk string) (*Holding, error) {
	timeout := cfg.nodeTimeout
	if timeout <= 0 {
		timeout = inspectTimeout
	}
	start := time.Now()
	reps, lats, err := readAll(ctx, c, wire.InspectRequest(len(c.nodes), [3]string{wk, fenceKey(wk), readersKey(wk)}), timeout)
	if err != nil {
		return nil, err
	}
	nodes := make([]NodeHolding, len(c.nodes))
	for i, nd := range c.nodes {
		h := NodeHolding{Node: i, Addr: nd.Addr, Latency: lats[i]}
		in, ok := reps[i].Res.(wire.Inspection)
		switch {
		case reps[i].Err != nil:
			h.Err = reps[i].Err
		case reps[i].St != wire.StatusOK || !ok:
			h.Err = wire.ErrUnexpectedReply(reps[i].Res)
		default:
			h.Kind, h.Fence = string(in.Kind), in.Fence
			for _, x := range in.Holders {
				h.Holders = append(h.Holders, Holder{ID: x.ID, Metadata: x.Meta, TTL: x.TTL})
			}
		}
		nodes[i] = h
	}
	return summarize(nodes, c.need, time.Since(start)), nil
}

// summarize decides what a quorum of need nodes says, from every node's
// answer, elapsed after Inspect's start.
func summarize(nodes []NodeHolding, need int, elapsed time.Duration) *Holding {
	h := &Holding{Nodes: nodes}
	failed := 0
	type seen struct {
		nodes int
		ttls  []time.Duration
		metas map[string]int
		fence int64
		first int // order of first sight, for a stable result
	}
	by := map[string]*seen{}
	var answered int64
	for _, n := range nodes {
		if n.Err != nil || n.Kind == "" {
			failed++
			continue
		}
		answered = max(answered, n.Fence)
		for _, x := range n.Holders {
			s := by[x.ID]
			if s == nil {
				s = &seen{metas: map[string]int{}, first: len(by)}
				by[x.ID] = s
			}
			s.nodes++
			s.ttls = append(s.ttls, x.TTL)
			s.metas[x.Metadata]++
			s.fence = max(s.fence, n.Fence)
		}
	}
	answeredN := len(nodes) - failed
	mayHold := false // a holder may be on a quorum, counting the silent nodes
	var held []string
	for id, s := range by {
		sure, may := quorumCount(s.nodes, answeredN, len(nodes), need)
		mayHold = mayHold || may
		if sure {
			held = append(held, id)
		}
	}
	if _, may := quorumCount(0, answeredN, len(nodes), need); may {
		mayHold = true // a holder the silent nodes alone may hold
	}
	slices.SortFunc(held, func(a, b string) int { return by[a].first - by[b].first })
	h.Fence = answered
	for _, id := range held {
		s := by[id]
		slices.SortFunc(s.ttls, func(a, b time.Duration) int { return int(b - a) })
		ttl := max(s.ttls[need-1]-elapsed, 0)
		meta, mc := "", -1
		for m, k := range s.metas {
			if k > mc || (k == mc && m < meta) {
				meta, mc = m, k
			}
		}
		h.Holders = append(h.Holders, Holder{ID: id, Metadata: meta, TTL: ttl})
	}
	switch {
	case len(held) > 0:
		h.State = stateHeld
		h.Metadata, h.TTL = h.Holders[0].Metadata, h.Holders[0].TTL
		h.Fence = by[held[0]].fence
	case !mayHold:
		h.State = stateFree
	default:
		h.State = stateUnknown
	}
	return h
}

// Health reads every node once (PING, INFO, CONFIG GET save) and reports
// for each whether it answers, its server and version (Redis or Valkey),
// run id, uptime, persistence, eviction policy, role and replicas, and
// whether another node is the same server; then whether a quorum is
// healthy, and the findings that weaken safety (Health.Warnings). It
// writes nothing; what a node refuses to say is left unknown. It waits
// for every node until ctx is done, or 1s without a deadline.
//
// Errors: ErrInvalid for a nil or zero *Client or a nil ctx; ErrClosed
// after Close; ctx's error, with the report so far, when ctx ended
// first. A node that does not answer is in the report, not an error.
// Details: docs/api.md#clienthealth.
func (c *Client) Health(ctx context.Context) (Health, error) {
	switch {
	case c == nil:
		return Health{}, invalidf("nil *Client")
	case len(c.nodes) == 0:
		return Health{}, invalidf("zero Client: make one with New or Dial")
	case ctx == nil:
		return Health{}, invalidf("nil context")
	case c.isClosed():
		return Health{}, ErrClosed
	}
	wait := healthWait
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	h := probeHealth(ctx, c, wait)
	for _, f := range findings(c, &h, true) {
		h.Warnings = append(h.Warnings, f.String())
	}
	if err := ctx.Err(); err != nil {
		for _, n := range h.Nodes {
			if n.Err != nil {
				return h, err // cut short: some node may not have had its chance
			}
		}
	}
	return h, nil
}
