package redlock

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// Leader is the leader of an election as a quorum of nodes sees it.
type Leader struct {
	Value string // the value given to Campaign, or to the last Proclaim
	Term  int64  // the leadership's term: its fencing token
	// Validity is how long a quorum of nodes keeps the leadership if it
	// is not extended: the quorum-th largest remaining TTL among the
	// nodes, less the time the read took.
	Validity time.Duration
}

// Leader returns the election's leader as a quorum of nodes sees it: its
// value, term and remaining validity, read from every node once (each
// given the per-node timeout, WithNodeTimeout, default 200ms). The value
// is the last publication of the leadership (Campaign's, or a
// successful Proclaim's) that a quorum of nodes holds in the election's
// history: what a failed Proclaim left on fewer is not reported.
//
// Errors: ErrInvalid for a nil or zero *Election or a nil ctx; ErrClosed
// after Close; ctx's error; an error matching ErrNoLeader when enough
// nodes answered to tell that nobody leads; an error matching
// ErrUnreachable when too few answered to tell (it says how many).
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := e.check(); err != nil {
		return Leader{}, err
	}
	if ctx == nil {
		return Leader{}, invalidf("nil context")
	}
	if e.c.isClosed() {
		return Leader{}, ErrClosed
	}
	v, err := e.read(ctx, 0)
	if err != nil {
		return Leader{}, err
	}
	return v.cur, v.lerr
}

// electionRead is what one read of an election found: its key as
// Inspect reads it, the leader it shows (Leader's result), and the
// election's history read after it.
type electionRead struct {
	h    *Holding
	cur  Leader
	seq  int64 // cur's publication in its term (history seq); -1 when not known
	lerr error // Leader's error when it reports none
	hist historyRead
}

// read reads the election's key from every node, then its history from
// term from on (lowered to the leader's term), and decides the leader.
// With from 0 the history is read from the leader's term, and not at
// all when there is no leader. The key first: what it shows was written
// before the history is read, so the history (while intact) holds it.
func (e *Election) read(ctx context.Context, from int64) (electionRead, error) {
	c := e.c
	h, err := c.inspect(ctx, &c.cfg, c.cfg.prefix+electionKey(e.name))
	if err != nil {
		return electionRead{}, err
	}
	v := electionRead{h: h, seq: -1}
	metas, term := leaderMetas(h)
	if term > 0 && (from <= 0 || term < from) {
		from = term
	}
	if from > 0 {
		v.hist = e.history(ctx, from)
		if err := ctx.Err(); err != nil {
			return electionRead{}, err
		}
	}
	v.cur, v.seq, v.lerr = e.leaderOf(h, metas, term, &v.hist)
	return v, nil
}

// leaderMetas returns the metadata of the holder an inspection found on
// a quorum, one per node that holds it, and the highest term among them
// (-1 when none is an election's value: a lock taken on the key by
// other means, or no holder).
func leaderMetas(h *Holding) (metas []string, term int64) {
	term = -1
	if h.State != stateHeld {
		return nil, term
	}
	id := h.Holders[0].ID
	for _, n := range h.Nodes {
		if n.Err != nil {
			continue
		}
		for _, x := range n.Holders {
			if x.ID != id {
				continue
			}
			metas = append(metas, x.Metadata)
			if t, _, _, ok := wire.ParseElectionMeta(x.Metadata); ok {
				term = max(term, t)
			}
		}
	}
	return metas, term
}

// leaderOf is the leader an inspection h found, with metas and term from
// leaderMetas, and the history read after it: Leader's result, and the
// publication it reports (-1 when not known).
//
// The value is the latest publication of the term that a quorum holds in
// its history, or, when the history answers show none surely on a
// quorum, the earliest that may be.
// A term with publications in the history but none that may be on a
// quorum has not published yet (its Campaign's publication is under way,
// or failed): no leader yet. Where the history has none of the term
// (expired), or too few nodes answered it, the value is read from the
// holder's metadata: the one a quorum holds, else the earliest
// publication among them, which a later failed Proclaim cannot be.
func (e *Election) leaderOf(h *Holding, metas []string, term int64, hr *historyRead) (Leader, int64, error) {
	c := e.c
	switch h.State {
	case stateHeld:
		switch {
		case term < 0:
			// Not a leadership's metadata: a lock taken on the key by
			// other means.
			return Leader{Value: h.Metadata, Term: h.Fence, Validity: h.TTL}, -1, nil
		case term == 0:
			return Leader{}, -1, causef([]error{ErrNoLeader}, "election %q: no leader yet: one is being elected", e.name)
		}
		cur := Leader{Term: term, Validity: h.TTL}
		if e.historyEnough(hr.answered) {
			var seen, sure, may *historyEntry
			for k := range hr.entries {
				x := &hr.entries[k]
				if x.Term != term {
					continue
				}
				seen = x
				s, m := quorumCount(x.n, hr.answered, len(c.nodes), c.need)
				if s {
					sure = x
				}
				if m && may == nil {
					may = x
				}
			}
			if sure == nil {
				// None surely on a quorum: too few answered for the
				// publications on a bare quorum to show as such, and a
				// later one that may be on a quorum may as well be a
				// failed Proclaim's. The earliest that may be is the
				// safer: its Campaign's publication, which succeeded.
				sure = may
			}
			switch {
			case sure != nil:
				cur.Value = sure.Value
				return cur, sure.Seq, nil
			case seen != nil:
				return Leader{}, -1, causef([]error{ErrNoLeader}, "election %q: no leader yet: term %d is being published", e.name, term)
			}
		}
		counts := map[string]int{}
		best, bestSeq := "", int64(math.MaxInt64)
		for _, m := range metas {
			t, seq, v, ok := wire.ParseElectionMeta(m)
			if !ok || t != term {
				continue
			}
			counts[m]++
			if sure, _ := quorumCount(counts[m], len(metas), len(metas), c.need); sure {
				best, bestSeq = v, seq
				break
			}
			if seq < bestSeq {
				best, bestSeq = v, seq
			}
		}
		cur.Value = best
		return cur, bestSeq, nil
	case stateFree:
		return Leader{}, -1, causef([]error{ErrNoLeader}, "election %q: no leader (%d of %d nodes answered)", e.name, answered(h), len(h.Nodes))
	}
	return Leader{}, -1, causef([]error{ErrUnreachable}, "election %q: leader unknown: %d of %d nodes answered, too few to tell (%d needed)%s", e.name, answered(h), len(h.Nodes), c.need, firstNodeErr(h))
}

// answered counts the nodes that answered an inspection.
func answered(h *Holding) int {
	n := 0
	for _, x := range h.Nodes {
		if x.Err == nil {
			n++
		}
	}
	return n
}

// firstNodeErr names the first node error of an inspection, so that a
// refusal (an ACL's NOPERM) reads in the error itself; "" when none.
// Nodes count from 1, as in every message.
func firstNodeErr(h *Holding) string {
	for _, x := range h.Nodes {
		if x.Err != nil {
			return fmt.Sprintf(": node %d: %v", x.Node+1, x.Err)
		}
	}
	return ""
}
