package redlock

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// Sentinel errors. Match them with errors.Is: the errors returned by this
// package wrap them, often several at once (a failed acquisition matches
// both ErrNotObtained and the reason, ErrContended, ErrUnreachable,
// ErrExpired or the context's error).
var (
	// ErrNotObtained is matched by every error of a failed acquisition
	// (TryLock, Lock and their multi-key and MultiLock forms).
	ErrNotObtained = errors.New("redlock: not obtained")

	// ErrNotHeld is matched by Extend and Unlock errors when the lock is
	// not, or cannot be proven to be, held on a quorum of nodes.
	ErrNotHeld = errors.New("redlock: not held")

	// ErrContended means other owners hold the key on enough nodes that no
	// quorum was possible: the lock is busy. Retrying later may succeed.
	ErrContended = errors.New("redlock: held by another owner")

	// ErrUnreachable means enough nodes failed (errors, timeouts, refused
	// connections) that no quorum was possible: an infrastructure problem.
	ErrUnreachable = errors.New("redlock: nodes unreachable")

	// ErrExpired means a quorum answered but the lease had no validity left
	// (ttl - elapsed - drift <= 0), or the lock's validity had already run
	// out before Extend was called.
	ErrExpired = errors.New("redlock: validity expired")

	// ErrInvalid is matched by every error about bad input: no nodes, nil
	// or duplicate nodes, empty keys, bad TTLs or options, a nil context,
	// a nil *Lock.
	ErrInvalid = wire.ErrInvalid

	// ErrStaleFence is returned by FencedSet when the fencing token is not
	// greater than the highest one the resource has already accepted: a
	// later holder has written, so this one must stop.
	ErrStaleFence = errors.New("redlock: stale fencing token")

	// ErrNoLeader is returned by Election.Leader when enough nodes
	// answered to tell that nobody leads the election.
	ErrNoLeader = errors.New("redlock: no leader")

	// ErrClosed is returned by acquisitions on a Client or MultiLock
	// after Close. It matches ErrInvalid.
	ErrClosed = fmt.Errorf("%w: client closed", ErrInvalid)
)

// errNodeTimeout is the error of a node that did not answer within the
// per-node timeout (see WithNodeTimeout); errNodeRestarted of a node
// whose vote the restart guard refused (WithRestartGuard). A node's error
// in NodeResult.Err says which in its message (as for a write that
// reached too few replicas, WithReplicas).
var (
	errNodeTimeout   = node.ErrNodeTimeout
	errNodeRestarted = node.ErrNodeRestarted
)

// Sentinel errors of held locks: how a lock ends.
var (
	// ErrLockLost is what Lock.Err and Do return once a held lock could no
	// longer be proven held: its validity ran out before an extension
	// reached a quorum, or an extension found the key gone or taken on
	// too many nodes. It matches ErrNotHeld.
	ErrLockLost error = &causeError{msg: "redlock: lock lost", errs: []error{ErrNotHeld}}

	// ErrReleased is what Lock.Err returns after Unlock; Extend's error
	// after Unlock matches it too.
	ErrReleased = errors.New("redlock: released")

	// ErrHoldLimit is joined to ErrLockLost when auto-extension stopped
	// because WithMaxExtensions or WithMaxHold was reached.
	ErrHoldLimit = errors.New("redlock: hold limit reached")
)

// causeError is an error with one message that matches several errors:
// its cause is said once, at the front ("redlock: duplicate node: ..."),
// rather than stacked ("redlock: invalid argument: redlock: duplicate
// node: ..."), and errors.Is still sees every sentinel in errs.
type causeError struct {
	msg  string
	errs []error
}

func (e *causeError) Error() string   { return e.msg }
func (e *causeError) Unwrap() []error { return e.errs }

// causef returns a causeError saying "redlock: " + the formatted text,
// matching errs.
func causef(errs []error, format string, args ...any) error {
	return &causeError{msg: "redlock: " + fmt.Sprintf(format, args...), errs: errs}
}

// lostError is the error of a lock found lost: "redlock: " + msg, with
// the last extension's error (when known) said after it. Its message is
// built when asked for, not when the lock is lost: a burst of locks
// lost together must close their Done channels quickly.
type lostError struct {
	msg  string // "lock lost: ..."
	last error  // the last failed extension's error, or nil
	pre  string // what comes before last's message
	post string // and after it
	errs []error
}

func (e *lostError) Error() string {
	if e.last == nil {
		return "redlock: " + e.msg
	}
	return "redlock: " + e.msg + e.pre + bare(e.last) + e.post
}

func (e *lostError) Unwrap() []error { return e.errs }

// bare returns err's message without the library's "redlock: " prefix,
// for a message that already begins with it.
func bare(err error) string { return strings.TrimPrefix(err.Error(), "redlock: ") }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// The statuses of a NodeResult (and of a "node" Event).
const (
	statusPending = "pending"
	statusOK      = "ok"
	statusTaken   = "taken"
	statusAbsent  = "absent"
	statusFailed  = "failed"
)

// statusNames names the wire's statuses.
var statusNames = [...]string{
	wire.StatusPending: statusPending,
	wire.StatusOK:      statusOK,
	wire.StatusTaken:   statusTaken,
	wire.StatusAbsent:  statusAbsent,
	wire.StatusFailed:  statusFailed,
}

// statusOf returns the name of the wire status s.
func statusOf(s wire.Status) string { return statusNames[s] }

// NodeResult is one node's outcome.
//
// Messages number nodes from 1, as people count: "node 1" is the first
// node given to New, whose NodeResult.Node is 0. Addresses are printed as
// host:port.
type NodeResult struct {
	Node int    // index of the node in the slice given to New (0-based)
	Addr string // the node's address, when the client exposes one
	// Status is what the node answered: "ok" (it granted, extended or
	// released the lock), "taken" (another token holds the key there),
	// "absent" (the key does not exist there: Extend, Unlock), "failed"
	// (Err says why), or "pending": it had not answered when the outcome
	// was decided, or nothing was sent to it (ctx done, validity gone).
	Status  string
	Err     error         // why the request failed, when Status is "failed"
	Latency time.Duration // time from the start of the round to the reply
	// Holder and HolderTTL: for an acquire that the node refused
	// ("taken") because one holder has the key (a key lock's holder, a
	// writer refusing a reader, a path's or an ancestor's holder), the
	// holder's metadata (WithMetadata; "" when it has none) and the
	// key's remaining time to live on the node (negative when unknown).
	// Never the holder's token.
	Holder    string
	HolderTTL time.Duration
}

// describe says the outcome on one line: the node's number (from 1)
// and address, its status and, for a failure, the error.
func (r NodeResult) describe() string {
	s := fmt.Sprintf("node %d", r.Node+1)
	if r.Addr != "" {
		s += " (" + r.Addr + ")"
	}
	s += ": " + r.Status
	if r.Err != nil {
		s += ": " + r.Err.Error()
	}
	return s
}

// QuorumError is returned when a round of requests to the nodes (acquire,
// extend or release) did not reach its quorum. It lists every node's
// outcome. Reach it with errors.As:
//
//	var qe *redlock.QuorumError
//	if errors.As(err, &qe) { for _, n := range qe.Nodes { ... } }
//
// It unwraps to ErrNotObtained (acquire) or ErrNotHeld (extend, release),
// and to the reason: ErrContended, ErrUnreachable, ErrExpired and/or the
// caller's context error. When ctx ends the wait of Lock (or of another
// call that waits), the error is that of the last attempt that completed,
// with ctx's error added: it matches both, and Nodes are that attempt's
// answers, not those of an attempt cut short.
type QuorumError struct {
	Op     string       // "lock", "extend", "unlock", "fence" (WithFencing's second round) or "proclaim"
	Keys   []string     // the lock's keys
	Quorum int          // votes needed
	OK     int          // votes received
	Nodes  []NodeResult // one entry per node, in the order given to New

	reasons []error
	// waitErr is the context error that ended a wait (Lock and the other
	// waiting calls) after this, its last completed attempt; nil for
	// the error of one attempt.
	waitErr error
}

// Error describes the failure and every node's outcome on one line.
func (e *QuorumError) Error() string {
	if e == nil {
		return "redlock: <nil QuorumError>"
	}
	var b strings.Builder
	b.WriteString("redlock: ")
	b.WriteString(e.Op)
	fmt.Fprintf(&b, " %q", strings.Join(e.Keys, ","))
	if e.waitErr != nil {
		// "not obtained: context deadline exceeded; last attempt: held
		// by another owner (...)": the votes and nodes that follow are
		// the last attempt's.
		fmt.Fprintf(&b, ": %s: %v; last attempt", bare(ErrNotObtained), e.waitErr)
	}
	for _, r := range e.reasons {
		if e.waitErr != nil && r == ErrNotObtained {
			continue
		}
		b.WriteString(": ")
		if meta, ttl, ok := e.holder(); ok && r == ErrContended {
			// "held by host-a pid 4242 for another 12.3s"
			b.WriteString("held by ")
			if meta == "" {
				b.WriteString("another owner")
			} else {
				b.WriteString(showMeta(meta))
			}
			if ttl >= 0 {
				fmt.Fprintf(&b, " for another %.1fs", ttl.Seconds())
			}
			continue
		}
		b.WriteString(bare(r))
	}
	fmt.Fprintf(&b, " (%d votes, %d needed", e.OK, e.Quorum)
	for _, n := range e.Nodes {
		b.WriteString("; ")
		b.WriteString(n.describe())
	}
	b.WriteString(")")
	return b.String()
}

// Unwrap returns the sentinels and the context error this error matches.
func (e *QuorumError) Unwrap() []error {
	if e == nil {
		return nil
	}
	if e.waitErr != nil {
		return append(append([]error(nil), e.reasons...), e.waitErr)
	}
	return e.reasons
}

// holder returns who holds the key, as the nodes that refused an acquire
// of a key lock for contention said: the holder's metadata (WithMetadata;
// "" when it has none) that most of them reported, and the longest
// remaining time to live any of them reported for it (negative when
// none knew). ok is false when no node reported a holder: the error is
// not one of contention, or what refused it was no one holder (a
// semaphore's permits, a path's descendants, a writer waiting for a read
// lock's readers to leave).
func (e *QuorumError) holder() (meta string, ttl time.Duration, ok bool) {
	if e == nil {
		return "", 0, false
	}
	count := map[string]int{}
	best := -1
	for _, n := range e.Nodes {
		if n.Status != statusTaken || (n.Holder == "" && n.HolderTTL == 0) {
			continue
		}
		count[n.Holder]++
		if c := count[n.Holder]; c > best || (c == best && n.Holder < meta) {
			meta, best = n.Holder, c
		}
	}
	if best < 0 {
		return "", 0, false
	}
	ttl = -1
	for _, n := range e.Nodes {
		if n.Status == statusTaken && n.Holder == meta && n.HolderTTL > ttl {
			ttl = n.HolderTTL
		}
	}
	return meta, ttl, true
}

// showMeta returns metadata as an error message shows it: as it is when
// it is printable text, quoted otherwise.
func showMeta(m string) string {
	if utf8.ValidString(m) && strings.IndexFunc(m, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return m
	}
	return strconv.Quote(m)
}

// unsentError is the error of a call that failed before sending anything:
// every node is listed, statusPending.
func unsentError(c *Client, op opKind, keys []string, reasons ...error) *QuorumError {
	e := &QuorumError{Op: opOf(op), Keys: keys, Quorum: c.need, Nodes: make([]NodeResult, len(c.nodes)), reasons: reasons}
	for i, nd := range c.nodes {
		e.Nodes[i] = NodeResult{Node: i, Addr: nd.Addr, Status: statusPending}
	}
	return e
}

// resultError is the error of a won round whose result does not stand
// (an Extend overtaken by Unlock, a bad fencing token): every node's
// outcome in the round, for the given reasons.
func (rd *round) resultError(reasons ...error) *QuorumError {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return &QuorumError{
		Op: opOf(rd.op), Keys: rd.keys, Quorum: rd.need, OK: rd.ok,
		Nodes: append([]NodeResult(nil), rd.res...), reasons: reasons,
	}
}

// errAlreadyExtending is AutoExtend's error on a lock that an earlier
// AutoExtend, whose ctx is not done yet, already extends: a misuse, so it
// matches ErrInvalid.
var errAlreadyExtending = invalidf("auto-extension already running")

// errorLocked builds the error of a lost round. rd.mu must be held.
func (rd *round) errorLocked(ctxErr error) *QuorumError {
	e := &QuorumError{
		Op: opOf(rd.op), Keys: rd.keys, Quorum: rd.need, OK: rd.ok,
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
		case statusTaken:
			taken++
		case statusAbsent:
			absent++
		case statusFailed:
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
