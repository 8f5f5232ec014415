package redlock

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// Leader election, in the style of etcd's concurrency.Election.
//
// An election is a fenced lock on ElectionKey(name) whose metadata is the
// leader's term and value, "term 17: host-a": Campaign is Lock (with
// WithFencing), then a rewrite of its metadata with its term, which only
// the winner knows (a node's counter may differ from it: a node that
// granted late, or to a candidate that lost, counted on its own), so
// that Leader reports the term the leader fences with. Until that
// rewrite the metadata says "term 0": a leader being elected, which
// Leader does not report. Then the leadership is auto-extended
// on the Client's scheduler, and Resign
// is Unlock, whose release announcement wakes the waiting candidates
// (pub/sub hand-off). The term is the lock's fencing token, so it
// strictly increases from one leader to the next while no node loses its
// data (see WithRestartGuard), and a resource can refuse a deposed
// leader's writes with FencedSet. Proclaim rewrites the value in place,
// keeping the token and the TTL (key/proclaim.lua). Leader reads the
// key as Inspect does.
//
// Each publication of a leadership (Campaign's, then each Proclaim's)
// also goes, in the same script and only where the node holds the
// leadership, into the election's history on that node
// (ElectionTermsKey), scored by its term and ordered within a term by a
// sequence number. Observe reads the history, so that a leadership
// begun and ended between two of its reads is still delivered.

// observePoll is how often Observe reads the leader when no message
// wakes it: a lost message delays a change by at most this.
const observePoll = time.Second

// electedMsg is the message a new leader (publishing its term) and
// Proclaim publish on the election key's release channel
// (key/proclaim.lua): it wakes Observe, not the candidates.
const electedMsg = "e"

// electionHistoryLen is how many entries each node's history of an
// election keeps (the highest): an observer that falls further behind
// skips the oldest.
const electionHistoryLen = 64

// electionHistoryTTL is how long an election's history lives after its
// last write, for a leadership of ttl: long against observePoll, so that
// an observer reads an entry before it expires, and bounded, so that an
// idle election leaves nothing behind for ever.
func electionHistoryTTL(ttl time.Duration) time.Duration {
	return max(10*ttl, time.Minute)
}

// Election is a leader election among the users of one name: at most one
// leader at a time, with a term that increases from leader to leader. It
// is a value that does no I/O until called; it is safe for concurrent
// use. Methods on a nil *Election return an error matching ErrInvalid
// (Observe, a closed channel).
type Election struct {
	c    *Client
	name string
}

// Election returns the election called name. It does no I/O. Its key is
// ElectionKey(name), with the key prefix (WithKeyPrefix) in front, so an
// election never collides with a lock on name. A name may not be empty
// or end with ":fence" or ":terms": its key would be another election's
// fence counter or history (ElectionTermsKey); Campaign, Leader and Run
// return an error matching ErrInvalid for it, and Observe a closed
// channel.
func (c *Client) Election(name string) *Election {
	return &Election{c: c, name: name}
}

// Election returns the election called name among the MultiLock's
// nodes: a leadership needs every node, as its locks do (see MultiLock),
// and so survives the loss of data on all nodes but one, and none can be
// elected while a node is down.
func (m *MultiLock) Election(name string) *Election {
	if m == nil {
		return &Election{name: name}
	}
	return m.c.Election(name)
}

// Name returns the election's name.
func (e *Election) Name() string {
	if e == nil {
		return ""
	}
	return e.name
}

func (e *Election) check() error {
	switch {
	case e == nil:
		return invalidf("nil *Election")
	case e.c == nil:
		return invalidf("zero Election (not returned by Client.Election)")
	case e.name == "":
		return invalidf("empty election name")
	case strings.HasSuffix(e.name, ":fence"), strings.HasSuffix(e.name, termsSuffix):
		return invalidf("election name %q ends with %q: its key would be another election's fence counter or history", e.name, e.name[strings.LastIndexByte(e.name, ':'):])
	}
	return nil
}

// Leader is the leader of an election as a quorum of nodes sees it.
type Leader struct {
	Value string // the value given to Campaign, or to the last Proclaim
	Term  int64  // the leadership's term: its fencing token
	// Validity is how long a quorum of nodes keeps the leadership if it
	// is not extended: the quorum-th largest remaining TTL among the
	// nodes, less the time the read took.
	Validity time.Duration
}

// Leadership is a won election: a held leadership, auto-extended until
// Resign or until it is lost. Its methods are safe for concurrent use;
// on a nil or zero *Leadership they return an error matching ErrInvalid
// (or zero values), never panic.
type Leadership struct {
	e      *Election
	l      *Lock
	cancel context.CancelFunc // stops the auto-extension

	pmu sync.Mutex // serialises Proclaims, so the last one's value stands
	seq int64      // under pmu: the next publication's place in the history
	mu  sync.Mutex
	val string
	// resigned: Resign ran; rerr is what it returned.
	resigned bool
	rerr     error
}

// Campaign waits until it is elected leader with value, then returns the
// leadership, auto-extended by ttl on the Client's scheduler (see
// AutoExtend) until Resign or until it is lost. Candidates wait as Lock
// waits: a leader's Resign wakes them at once (pub/sub hand-off), and a
// lost leadership is found by the retries (WithRetryDelay).
//
// ctx bounds only the wait, as in etcd: once elected, the leadership
// outlives ctx, until Resign or loss. value is stored with the
// leadership on the nodes (as WithMetadata, at most MaxMetadata bytes)
// and is what Leader and Observe report. opts are Lock's options (an
// election is always fenced, WithFencing; WithMetadata and WithToken are
// refused).
//
// Errors: ErrInvalid for a nil or zero *Election, a nil ctx, a value
// over MaxMetadata bytes, a bad ttl or option; ErrClosed after the
// Client's Close; when ctx ends the wait, an error matching
// ErrNotObtained and ctx.Err() (and, when an attempt completed, its
// reason, such as ErrContended, with the current leader's value in its
// message; after a win whose term could not be published, that
// failure); an error matching ErrNotObtained and a *QuorumError (Op
// OpProclaim), at once, when publishing the term fails on too many nodes
// for a reason no retry gets past: their ACL refuses what it runs (see
// docs/security.md), or the election's history key holds a value none
// of our kinds writes (ErrUnreachable, the server's WRONGTYPE); the
// errors of Lock otherwise. A win whose term could not be published for
// another reason is given back, and Campaign tries again after the
// retry delay (WithRetryDelay).
func (e *Election) Campaign(ctx context.Context, value string, ttl time.Duration, opts ...Option) (*Leadership, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if len(value) > MaxMetadata {
		return nil, invalidf("election value of %d bytes is longer than %d", len(value), MaxMetadata)
	}
	cfg, err := e.c.callConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.meta != e.c.cfg.meta {
		return nil, invalidf("WithMetadata does not apply to Campaign: the value is the leader's metadata")
	}
	opts = append(opts[:len(opts):len(opts)], WithFencing(), withMeta(wire.ElectionMeta(0, 0, value)))
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	var published error // the last win's failure to publish
	for {
		l, err := e.c.Lock(ctx, ElectionKey(e.name), ttl, opts...)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil && published != nil {
				return nil, e.publishFailed(published, cerr)
			}
			return nil, err
		}
		actx, cancel := context.WithCancel(context.Background())
		ld := &Leadership{e: e, l: l, cancel: cancel}
		err = l.AutoExtend(actx)
		if err == nil {
			// The term, which only the winner knows, goes on the nodes.
			err = ld.proclaim(context.WithoutCancel(ctx), value)
		}
		if err == nil {
			return ld, nil
		}
		// Lost between the win and now, or the term could not be
		// published: give the leadership back and campaign again.
		cancel()
		_ = l.Unlock(context.Background())
		if cerr := ctx.Err(); cerr != nil {
			return nil, e.publishFailed(err, cerr)
		}
		published = err
		if deniedByACL(err) || foreignBlocked(err) {
			// The nodes refuse the history's commands, or hold a value
			// none of our kinds writes at its key: every win would end
			// the same way.
			return nil, e.publishFailed(err, nil)
		}
		// Another attempt after the retry delay, as Lock's: at once, it
		// would win and fail again as fast as the nodes answer.
		d := jitter(cfg.retryDelay)
		if retry == nil {
			retry = time.NewTimer(d)
		} else {
			retry.Reset(d)
		}
		select {
		case <-retry.C:
		case <-ctx.Done():
			return nil, e.publishFailed(err, ctx.Err())
		}
	}
}

// publishFailed is Campaign's error when it won but could not publish
// the term (err), and gave up: because ctx ended (ctxErr) or because no
// retry can succeed. One line, matching ErrNotObtained, ctxErr and err's
// reasons; errors.As reaches err's *QuorumError.
func (e *Election) publishFailed(err, ctxErr error) error {
	errs := []error{ErrNotObtained}
	msg := "not obtained"
	if ctxErr != nil {
		errs = append(errs, ctxErr)
		msg += ": " + ctxErr.Error()
	}
	return causef(append(errs, err), "election %q: %s; elected, but the term could not be published: %s", e.name, msg, strings.TrimPrefix(err.Error(), "redlock: "))
}

func (ld *Leadership) check() error {
	switch {
	case ld == nil:
		return invalidf("nil *Leadership")
	case ld.l == nil:
		return invalidf("zero Leadership (not returned by Campaign)")
	}
	return nil
}

// Term returns the leadership's term: its fencing token (see Lock.Fence),
// greater than every earlier leader's. 0 for a nil or zero *Leadership.
func (ld *Leadership) Term() int64 {
	if ld.check() != nil {
		return 0
	}
	return ld.l.Fence()
}

// Value returns the value the leadership advertises: Campaign's, or the
// last successful Proclaim's.
func (ld *Leadership) Value() string {
	if ld.check() != nil {
		return ""
	}
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.val
}

// Done returns a channel that is closed when the leadership can no
// longer be proven held, before its validity runs out, or after Resign;
// Err says which (see Lock.Done). For a nil or zero *Leadership it
// returns a closed channel.
func (ld *Leadership) Done() <-chan struct{} {
	if ld.check() != nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return ld.l.Done()
}

// Err returns nil while Done is open; then ErrReleased after Resign, or
// an error matching ErrLockLost once the leadership was lost (see
// Lock.Err).
func (ld *Leadership) Err() error {
	if err := ld.check(); err != nil {
		return err
	}
	return ld.l.Err()
}

// Validity returns the time left in which the leadership is safe to act
// on (see Lock.Validity); <= 0 once lost or resigned.
func (ld *Leadership) Validity() time.Duration {
	if ld.check() != nil {
		return 0
	}
	return ld.l.Validity()
}

// Lock returns the lock that holds the leadership, for its key, its
// fencing token and its observer events. Do not Unlock it: Resign.
func (ld *Leadership) Lock() *Lock {
	if ld.check() != nil {
		return nil
	}
	return ld.l
}

// Proclaim changes the value the leadership advertises to value, without
// an election: on each node that holds the leadership, the stored value
// is rewritten and its TTL kept, and observers are woken. It succeeds
// when a quorum of nodes did. Proclaims of one leadership run one at a
// time, so the last to return is what the nodes keep, and on each node
// after the leadership's requests issued before them. Each node is given
// the leadership's per-node timeout, as its extensions (WithNodeTimeout;
// by default derived from the TTL, see DefaultNodeTimeout).
//
// Errors: ErrInvalid for a nil or zero *Leadership, a nil ctx or a value
// over MaxMetadata bytes; ctx's error when ctx ends first; after Resign,
// or once the leadership is lost, an error matching ErrNotHeld; a
// *QuorumError (Op OpProclaim) matching ErrNotHeld, and ErrUnreachable
// when failed nodes prevented the quorum (a node whose history key holds
// a value none of our kinds writes fails with WRONGTYPE). A failed
// Proclaim may have changed the value on some nodes; Leader and Observe
// go on reporting the last value a quorum holds. Proclaim again.
func (ld *Leadership) Proclaim(ctx context.Context, value string) error {
	if err := ld.check(); err != nil {
		return err
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	if len(value) > MaxMetadata {
		return invalidf("election value of %d bytes is longer than %d", len(value), MaxMetadata)
	}
	ld.mu.Lock()
	resigned := ld.resigned
	ld.mu.Unlock()
	if resigned {
		return ld.e.c.unsentError(opProclaim, ld.l.Keys(), ErrNotHeld)
	}
	return ld.proclaim(ctx, value)
}

// proclaim writes the leadership's term and value on the nodes: a round
// of its own (quorum.go), through the nodes' queues, so that on each
// node it runs after the leadership's acquire and extensions handed to
// that node before it.
func (ld *Leadership) proclaim(ctx context.Context, value string) error {
	ld.pmu.Lock()
	defer ld.pmu.Unlock()
	c, l := ld.e.c, ld.l
	if l.Validity() <= 0 {
		return c.unsentError(opProclaim, l.Keys(), ErrNotHeld)
	}
	wk := c.cfg.prefix + l.keys[0]
	ch := c.cfg.prefix + ReleaseChannel(l.keys[0])
	tok, _ := wire.SplitValue(l.token)
	// Every publication takes the next place, a failed one too, so that
	// what it left on a few nodes sorts before the ones that follow.
	seq := ld.seq
	ld.seq++
	l.mu.Lock()
	ttl := l.ttl // an extension may set it meanwhile
	l.mu.Unlock()
	term := l.Fence()
	p := &wire.Proclaim{
		Key: wk, Old: l.token, Value: wire.Value(tok, wire.ElectionMeta(term, seq, value)),
		Channel: ch, Msg: electedMsg,
		History: termsKey(wk), Term: term, Member: wire.TermMember(term, seq, value),
		Keep: electionHistoryLen, ExpireMS: electionHistoryTTL(ttl).Milliseconds(),
	}
	req := &request{w: *p.Request(len(c.nodes), l.token), keys: l.keys}
	req.w.TTL = ttl // the round's per-node timeout is the leadership's
	out := c.runReq(ctx, req, l.cfg)
	if !out.won {
		return out.err
	}
	ld.mu.Lock()
	ld.val = value
	ld.mu.Unlock()
	// What an extension writes back on a node that lost the key.
	l.value.Store(&p.Value)
	return nil
}

// Resign ends the leadership at once: it releases the election's key on
// every node (as Unlock, which it is) and so wakes the waiting
// candidates (pub/sub hand-off). It is idempotent: after a Resign that
// succeeded, Resign returns nil. Once the leadership was lost (Done
// closed before Resign), it still releases what the nodes may keep and
// returns an error matching ErrNotHeld. Like Unlock it is not cut short
// by ctx (see Unlock).
//
// Errors: ErrInvalid for a nil or zero *Leadership or a nil ctx; an
// error matching ErrNotHeld when the leadership was lost, or when fewer
// than a quorum of nodes still held it (see Unlock).
func (ld *Leadership) Resign(ctx context.Context) error {
	if err := ld.check(); err != nil {
		return err
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if ld.resigned {
		return ld.rerr
	}
	ld.resigned = true
	ld.cancel()
	lost := ld.l.Err() // nil while held; set once lost
	err := ld.l.Unlock(ctx)
	if lost != nil {
		err = fmt.Errorf("%w: leadership of %q lost before Resign: %w", ErrNotHeld, ld.e.name, lost)
	}
	ld.rerr = err
	return err
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
	h, err := c.inspect(ctx, &c.cfg, c.cfg.prefix+ElectionKey(e.name))
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
	if h.State != HoldHeld {
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
	case HoldHeld:
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
	case HoldFree:
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

// Observe returns a channel that delivers the election's leader at each
// change of leader or of its value: every leadership's term with each
// value its Campaign and its successful Proclaims published, in term
// order and, within a term, in the order published, without duplicates,
// and never a "no leader". The first delivery is the leader when Observe
// starts (nothing is delivered while there is none); what came before is
// not. The channel closes when ctx ends, or when the Client is closed.
//
// At each wake Observe reads the leader as Leader does, then the
// election's history (ElectionTermsKey) from every node. A new leader and
// Proclaim announce themselves over pub/sub, and so does Resign, which
// wakes it at once; it also reads every second, so that a lost message
// only delays a change. Only a history read that more than N − quorum
// nodes answered is used, so that every entry on a quorum shows in it:
// while fewer answer, Observe delivers nothing new. An entry of the
// history is delivered when it may be on a quorum: seen on k of the a
// nodes that answered, with k + (N − a) ≥ quorum; what a failed
// Proclaim wrote on a minority of nodes is not delivered once every
// node answers. So a leadership elected and gone between two reads is
// delivered too. Its Validity is measured only for the leadership the
// same wake's leader read found: it is ≤ 0 for a leadership delivered
// after it ended (and 0 for one that began after that read).
//
// Limits: each node keeps the last 64 entries of an election's history,
// for max(10×ttl, 1 minute) after its last write (ElectionTermsKey). An
// observer that falls further behind skips what the nodes dropped, and a
// node restarted empty has lost its copy (the other nodes' still count).
// Where the history has nothing newer but the leader read does (the
// history expired, or a lock taken on the key by other means), Observe
// delivers the leader read. A slow receiver delays the reads, not the
// election. For a nil or zero *Election, a name Election refuses or a
// nil ctx it returns a closed channel.
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
	w := e.c.hub.join(e.c, []string{ElectionKey(e.name)}, false, true, false)
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
			if v.h.State == HoldUnknown || !preEnough {
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
	hk := c.cfg.prefix + ElectionTermsKey(e.name)
	timeout := c.cfg.nodeTimeout
	if timeout <= 0 {
		timeout = inspectTimeout
	}
	reps, _, _ := c.read(ctx, wire.HistoryRequest(len(c.nodes), hk, from), timeout)
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

// Run campaigns with value and, once elected, runs fn with a ctx that is
// cancelled when the leadership is lost. When fn returns:
//   - after the leadership was lost, Run campaigns again and runs fn
//     again once re-elected;
//   - while still leader, Run resigns and returns fn's result, nil or an
//     error.
//
// When Run's ctx ends, it resigns (if leader) and returns ctx's error.
// When fn panics, Run resigns and the panic goes on unchanged. ttl and
// opts are Campaign's.
//
// Errors: Campaign's (ErrInvalid for bad arguments, a nil fn), ctx's
// error, or fn's.
func (e *Election) Run(ctx context.Context, value string, ttl time.Duration, fn func(ctx context.Context) error, opts ...Option) error {
	if err := e.check(); err != nil {
		return err
	}
	if fn == nil {
		return invalidf("nil fn")
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	for {
		ld, err := e.Campaign(ctx, value, ttl, opts...)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			return err
		}
		err, lost := ld.run(ctx, fn)
		switch {
		case ctx.Err() != nil:
			_ = ld.Resign(context.WithoutCancel(ctx))
			return ctx.Err()
		case lost:
			_ = ld.Resign(context.WithoutCancel(ctx)) // releases what nodes may keep
			continue
		}
		_ = ld.Resign(context.WithoutCancel(ctx))
		return err
	}
}

// run runs fn under a ctx cancelled when the leadership is lost, and
// reports whether it was lost when fn returned. A panicking fn resigns
// on its way out.
func (ld *Leadership) run(ctx context.Context, fn func(ctx context.Context) error) (err error, lost bool) {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := make(chan struct{})
	go func() {
		select {
		case <-ld.Done():
			cancel()
		case <-stop:
		}
	}()
	defer close(stop)
	finished := false
	defer func() {
		if !finished {
			// Not recovered: the panic (or Goexit) goes on as it was.
			_ = ld.Resign(context.WithoutCancel(ctx))
		}
	}()
	err = fn(fctx)
	finished = true
	select {
	case <-ld.Done():
		return err, true
	default:
		return err, false
	}
}
