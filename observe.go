package redlock

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// observePoll is how often Observe reads the leader when no message
// wakes it: a lost message delays a change by at most this.
const observePoll = time.Second

// electedMsg is the message a new leader (publishing its term) and
// Proclaim publish on the election key's release channel
// (key/proclaim.lua): it wakes Observe, not the candidates.
const electedMsg = "e"

// Observe returns a channel that delivers the election's leader at each
// change of leader or value: every term with each value published, in
// order, without duplicates, from the leader when Observe starts on. It
// reads the leader and the election's history (its last 64 entries per
// node) from every node, woken by pub/sub and at least every second, and
// delivers only what may be on a quorum. The channel closes when ctx ends
// or the Client is closed; for a nil or zero *Election, a refused name or
// a nil ctx it is closed at once. Details: docs/api.md#electionobserve.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	if e.check() != nil || ctx == nil {
		close(out)
		return out
	}
	go e.observe(ctx, out)
	return out
}

// observeState is where an observer is in the election's history.
type observeState struct {
	started bool // a first read placed it
	// term and seq are the last entry delivered or passed over; seq is
	// -1 after a delivery of the leader read, whose place is not known.
	term, seq int64
	value     string // the last value delivered, in term
	sent      bool   // a value was delivered
}

func (e *Election) observe(ctx context.Context, out chan<- Leader) {
	defer close(out)
	w := e.c.hub.join(e.c, []string{electionKey(e.name)}, false, true, false)
	defer e.c.hub.leave(w)
	var st observeState
	t := time.NewTimer(0)
	defer t.Stop()
	backoff := time.Duration(0) // after a wake that found no change
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.c.closed:
			return
		case <-w.wake:
			backoff = 5 * time.Millisecond
		case <-t.C:
		}
		changed, ok := e.observeOnce(ctx, &st, out)
		switch {
		case !ok:
			return
		case changed:
			backoff = 0
		case backoff > 0:
			// Woken, but the change is not visible yet (the candidate
			// the release woke has not won): look again soon.
			backoff = min(2*backoff, observePoll)
		}
		next := observePoll
		if backoff > 0 && backoff < observePoll {
			next = backoff
		}
		t.Reset(next)
	}
}

// observeOnce reads the leader, then the history, and delivers what
// follows st; ok is false once the observer must stop.
func (e *Election) observeOnce(ctx context.Context, st *observeState, out chan<- Leader) (changed, ok bool) {
	// Before the first delivery: the leaderships already in the history
	// are read before the leader, so that, when no leader shows, they
	// are known to have ended, and the observer starts after them. A
	// leadership being elected then has a higher term, and no entry yet.
	var ended int64
	preEnough := false
	from := max(st.term, 1)
	if !st.started {
		pre := e.history(ctx, 1)
		preEnough = e.historyEnough(pre.answered)
		for _, x := range pre.entries {
			ended = max(ended, x.Term)
		}
		from = ended + 1 // lowered to the leader's term, if any
	}
	v, err := e.read(ctx, from)
	if err != nil || ctx.Err() != nil || e.c.isClosed() {
		return false, false
	}
	cur, lerr := v.cur, v.lerr
	send := func(ld Leader) bool {
		select {
		case out <- ld:
			changed = true
			st.term, st.value, st.sent = ld.Term, ld.Value, true
			return true
		case <-ctx.Done():
			return false
		case <-e.c.closed:
			return false
		}
	}
	if !st.started {
		if lerr != nil {
			// No leader: start after the leaderships that ended (read
			// above). Not after the fence counters: an acquire that
			// has raised some nodes' counters may win with that term
			// yet, and would be skipped.
			if v.h.State == stateUnknown || !preEnough {
				// Too few answers to tell: later. Without the
				// leaderships that ended, the observer would start
				// before them and deliver what came before it.
				return false, true
			}
			st.term = ended
			st.started, st.seq = true, math.MaxInt64
		} else {
			st.started = true
			if !send(cur) {
				return changed, false
			}
			st.seq = v.seq
		}
	}
	if !e.historyEnough(v.hist.answered) {
		// An entry on a quorum may be missing from these answers, and
		// an entry seen on one node passes the quorum filter: delivering
		// it would place the observer past the missing one. Later.
		return changed, true
	}
	// After a delivery of a leader read whose publication is not known
	// (st.seq -1: a lock taken on the key by other means), the term's
	// entries that show follow it.
	entries := e.onQuorum(&v.hist)
	for _, x := range entries {
		if x.Term < st.term || (x.Term == st.term && x.Seq <= st.seq) {
			continue
		}
		dup := st.sent && x.Term == st.term && x.Value == st.value
		st.seq = x.Seq
		if dup {
			st.term = x.Term
			continue
		}
		d := time.Duration(0)
		if lerr == nil && x.Term == cur.Term {
			d = cur.Validity
		}
		if !send(Leader{Value: x.Value, Term: x.Term, Validity: d}) {
			return changed, false
		}
	}
	if lerr == nil && cur.Term > st.term {
		// The history has nothing of this leadership (expired, or a
		// lock taken on the key by other means): the leader read.
		if !send(cur) {
			return changed, false
		}
		st.seq = v.seq
	}
	return changed, true
}

// historyEnough reports whether a history read that answered nodes
// answered shows every entry on a quorum: more than N − quorum answered,
// so that every quorum holds one of them.
func (e *Election) historyEnough(answered int) bool {
	return answered > len(e.c.nodes)-e.c.need
}

// historyRead is one read of an election's history from every node: each
// entry seen, with the number of nodes that hold it, in (term, seq)
// order, and how many nodes answered.
type historyRead struct {
	entries  []historyEntry
	answered int
}

// historyEntry is an entry of the history and the number of nodes, n,
// whose answer held it.
type historyEntry struct {
	wire.TermEntry
	n int
}

// onQuorum returns the entries of hr that may be on a quorum: seen on k
// of the a nodes that answered, with k + (N − a) ≥ quorum.
func (e *Election) onQuorum(hr *historyRead) []wire.TermEntry {
	var out []wire.TermEntry
	for _, x := range hr.entries {
		if _, may := quorumCount(x.n, hr.answered, len(e.c.nodes), e.c.need); may {
			out = append(out, x.TermEntry)
		}
	}
	return out
}

// history reads the election's history entries of term from or more from
// every node, through the nodes' queues (each given the per-node
// timeout, as Inspect's reads). A node whose history is not a sorted set
// (a value none of our kinds writes) fails, and does not count as
// answered.
func (e *Election) history(ctx context.Context, from int64) historyRead {
	c := e.c
	hk := c.cfg.prefix + electionTermsKey(e.name)
	timeout := c.cfg.nodeTimeout
	if timeout <= 0 {
		timeout = inspectTimeout
	}
	reps, _, _ := readAll(ctx, c, wire.HistoryRequest(len(c.nodes), hk, from), timeout)
	var hr historyRead
	by := map[string]int{} // member: index in hr.entries
	for _, r := range reps {
		es, ok := r.Res.([]wire.TermEntry)
		if r.St != wire.StatusOK || !ok {
			continue
		}
		hr.answered++
		for _, x := range es {
			if x.Term <= 0 {
				continue
			}
			k, seen := by[x.Member]
			if !seen {
				k = len(hr.entries)
				by[x.Member] = k
				hr.entries = append(hr.entries, historyEntry{TermEntry: x})
			}
			hr.entries[k].n++
		}
	}
	slices.SortFunc(hr.entries, func(a, b historyEntry) int {
		return cmp.Or(cmp.Compare(a.Term, b.Term), cmp.Compare(a.Seq, b.Seq), strings.Compare(a.Value, b.Value))
	})
	return hr
}
