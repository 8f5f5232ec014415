package redlock

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// NodeHealth is one node's part of a Health report. What the node did
// not say (no answer, INFO refused by an ACL) is left zero.
type NodeHealth struct {
	// Node is the node's index in the slice given to New (0-based);
	// messages number nodes from 1.
	Node int
	Addr string // the node's address, when the client exposes one
	// Err is why the node did not answer: a failed dial (a misspelt
	// host), a refused AUTH or SELECT (a database index beyond the
	// server's databases setting), a node timeout, ctx's error. nil when
	// it answered.
	Err     error
	Latency time.Duration
	// Healthy: the node answered, is not a replica, and is not a server
	// an earlier node already is (SameAs). A node that refuses INFO
	// counts as healthy: it answers, and nothing more is known.
	Healthy bool

	Server  string // "redis" or "valkey"
	Version string // the server's own version (valkey_version on Valkey)
	RunID   string
	Uptime  time.Duration

	// Role is "master" or "replica". Replicas is how many replicas are
	// connected to it. ReplicaWrites: a replica that takes writes
	// (replica-read-only no).
	Role          string
	Replicas      int
	ReplicaWrites bool

	// AOF: appendonly is on. Save is the RDB snapshot rules (CONFIG GET
	// save): "" for none, "unknown" when CONFIG GET is refused (an ACL, a
	// renamed CONFIG). LastSave is the last RDB save.
	AOF      bool
	Save     string
	LastSave time.Time
	// MaxMemory in bytes (0: no limit) and MaxMemoryPolicy
	// (maxmemory-policy, "noeviction" by default).
	MaxMemory       int64
	MaxMemoryPolicy string

	// SameAs lists the other nodes (0-based) that answered with this
	// node's run_id: one server given twice. nil when none.
	SameAs []int
}

// Health is a health report on a Client's nodes: see Client.Health.
type Health struct {
	Nodes []NodeHealth // one entry per node, in the order given to New
	// Healthy counts the healthy nodes; Quorum says whether they are at
	// least the Client's Quorum(), so that locks can be taken.
	Healthy int
	Quorum  bool
	// Warnings are the findings that weaken safety, one line each: too
	// few nodes, a node that does not answer, an evicting
	// maxmemory-policy, no persistence without the restart guard, a
	// replica (taking writes or not), one server given twice, no quorum.
	Warnings []string
}

// healthWait is how long Health waits for a node when ctx has no
// deadline, and how long the probe of New and Dial waits: as long as
// the dial timeout of the clients Dial builds.
const healthWait = time.Second

// probeHealth probes every node of c at once, each for up to wait within ctx.
func probeHealth(ctx context.Context, c *Client, wait time.Duration) Health {
	h := Health{Nodes: make([]NodeHealth, len(c.nodes))}
	var wg sync.WaitGroup
	for i, nd := range c.nodes {
		wg.Go(func() { h.Nodes[i] = nodeHealth(nd, nd.Probe(ctx, wait)) })
	}
	wg.Wait()
	byID := map[string][]int{}
	for i, n := range h.Nodes {
		if n.RunID != "" && shardingOf(c.nodes[i].C) != shardSlot {
			byID[n.RunID] = append(byID[n.RunID], i)
		}
	}
	for i := range h.Nodes {
		n := &h.Nodes[i]
		if same := byID[n.RunID]; len(same) > 1 {
			n.SameAs = slices.DeleteFunc(slices.Clone(same), func(j int) bool { return j == i })
		}
		n.Healthy = n.Err == nil && n.Role != "replica" && (len(n.SameAs) == 0 || n.SameAs[0] > i)
		if n.Healthy {
			h.Healthy++
		}
	}
	h.Quorum = h.Healthy >= c.need
	return h
}

// nodeHealth is node nd's report from its probe p.
func nodeHealth(nd *node.Node, p node.Probe) NodeHealth {
	n := NodeHealth{Node: nd.Idx, Addr: nd.Addr, Err: p.Err, Latency: p.Latency}
	if p.Err != nil {
		return n
	}
	n.Save = p.Save
	if p.SaveErr != nil {
		n.Save = "unknown"
	}
	if p.InfoErr != nil {
		return n
	}
	si := wire.ParseInfo(p.Info)
	n.Server, n.Version, n.RunID, n.Uptime = si.Server, si.Version, si.RunID, si.Uptime
	n.Role, n.Replicas = si.Role, si.Replicas
	n.ReplicaWrites = si.Role == "replica" && si.ReadOnlyKnown && !si.ReadOnly
	n.AOF, n.LastSave = si.AOF, si.LastSave
	n.MaxMemory, n.MaxMemoryPolicy = si.MaxMemory, si.Policy
	return n
}

// finding is one line of Health.Warnings, and of the log of New and
// Dial: about node (0-based), or about the Client when node is -1.
type finding struct {
	node int
	addr string
	msg  string
	err  error  // shown after msg
	tail string // shown after err
	dup  bool   // one server given twice: also logged when a lock finds it
}

func (f finding) String() string { return f.text(true) }

// text is f as a line, with its error or without (the log gives it as
// an attribute).
func (f finding) text(withErr bool) string {
	s := f.msg
	if f.err != nil && withErr {
		s += ": " + f.err.Error()
	}
	s += f.tail
	if f.node < 0 {
		return s
	}
	return fmt.Sprintf("node %d (%s): %s", f.node+1, f.addr, s)
}

// log writes f to l as one Warn line.
func (f finding) log(l *slog.Logger) {
	args := []any{}
	if f.node >= 0 {
		args = append(args, "node", f.node, "addr", f.addr)
	}
	if f.err != nil {
		args = append(args, "err", f.err)
	}
	l.Warn("redlock: "+f.text(false), args...)
}

// findings returns what in h weakens safety; withCount adds the count of
// nodes, which New logs at once, without I/O.
func findings(c *Client, h *Health, withCount bool) []finding {
	var out []finding
	if withCount {
		out = countFindings(c)
	}
	for _, n := range h.Nodes {
		f := finding{node: n.Node, addr: n.Addr}
		switch {
		case n.Err != nil:
			f.msg, f.err = "does not answer", n.Err
			f.tail = hint(n.Err) + "; locks go on with the other nodes, which tolerate fewer failures"
			out = append(out, f)
			continue
		case n.Server == "":
			f.msg = "INFO refused (ACL?): server, role and settings unknown; the restart guard needs INFO"
			out = append(out, f)
			continue
		}
		if p := n.MaxMemoryPolicy; strings.HasPrefix(p, "allkeys-") || strings.HasPrefix(p, "volatile-") {
			f.msg = fmt.Sprintf("maxmemory-policy %s (maxmemory %s) evicts lock keys under memory pressure (every lock key has a TTL); use noeviction", p, bytesString(n.MaxMemory))
			out = append(out, f)
		}
		if c.cfg.restartGuard == 0 && !n.AOF && n.Save == "" {
			f.msg = "no persistence (appendonly no, save \"\") and no restart guard: a restart forgets the node's locks and can grant them again; turn appendonly on or use WithRestartGuard"
			out = append(out, f)
		}
		switch {
		case n.Role == "replica" && n.ReplicaWrites:
			f.msg = "a replica that takes writes (replica-read-only no): its lock keys vanish at its next sync with its master; give masters"
			out = append(out, f)
		case n.Role == "replica":
			f.msg = "a replica: it refuses lock writes (READONLY); give masters"
			out = append(out, f)
		}
		if len(n.SameAs) > 0 && n.SameAs[0] < n.Node {
			f.msg = fmt.Sprintf("the same server as node %d (run_id %s): it would vote twice; the client refuses every lock", n.SameAs[0]+1, n.RunID)
			f.dup = true
			out = append(out, f)
		}
	}
	if !h.Quorum {
		out = append(out, finding{node: -1, msg: fmt.Sprintf("%d of %d nodes healthy, fewer than the quorum of %d: no lock can be taken", h.Healthy, len(h.Nodes), c.need)})
	}
	return out
}

// countFindings warns of a Client that cannot spare a single failed
// node: one or two nodes.
func countFindings(c *Client) []finding {
	if len(c.nodes) > 2 {
		return nil
	}
	return []finding{{node: -1, msg: fmt.Sprintf("only %d node(s): a single failed node stops every lock; give 3 or more independent masters (5 tolerate 2 failures)", len(c.nodes))}}
}

// hint names the likely cause of a node error that a URL produces.
func hint(err error) string {
	s := err.Error()
	switch {
	case strings.Contains(s, "DB index is out of range"):
		return " (its URL's database index is beyond the server's databases setting)"
	case strings.Contains(s, "no such host"):
		return " (a misspelt host?)"
	case strings.Contains(s, "WRONGPASS") || strings.Contains(s, "NOAUTH"):
		return " (wrong user or password)"
	}
	return ""
}

// logStartFindings logs what weakens safety, for New and Dial: the
// count of nodes at once; then, when a logger is set, what one probe of
// the nodes (Health, 1s per node) finds, from a goroutine of the
// Client's, so that New and Dial neither wait nor fail for it. Close
// ends the probe, and what it found is then not logged.
//
// withCount is false for a MultiLock, which needs every node by design.
func logStartFindings(c *Client, withCount bool) {
	l := c.cfg.log
	if l == nil {
		return
	}
	if withCount {
		for _, f := range countFindings(c) {
			f.log(l)
		}
	}
	c.spawn(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), healthWait+releaseTimeout)
		defer cancel()
		go func() {
			select {
			case <-c.closed:
				cancel()
			case <-ctx.Done():
			}
		}()
		h := probeHealth(ctx, c, healthWait)
		if c.isClosed() {
			return nil
		}
		fs := findings(c, &h, false)
		for _, f := range fs {
			if f.dup && c.dupErr.Load() != nil {
				continue // logged as an error when it was found (logDuplicate)
			}
			f.log(l)
		}
		l.Debug("redlock: nodes probed", "healthy", h.Healthy, "nodes", len(h.Nodes), "findings", len(fs))
		return nil
	}, false)
}

// bytesString shows a maxmemory as its configuration would: 100mb, 0.
func bytesString(b int64) string {
	for _, u := range []struct {
		n    int64
		unit string
	}{{1 << 30, "gb"}, {1 << 20, "mb"}, {1 << 10, "kb"}} {
		if b >= u.n && b%u.n == 0 {
			return fmt.Sprintf("%d%s", b/u.n, u.unit)
		}
	}
	return fmt.Sprint(b)
}
