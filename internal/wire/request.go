package wire

import (
	"strconv"
	"strings"
	"time"
)

// Op is what a request does to a lock.
type Op uint8

const (
	OpAcquire Op = iota
	OpExtend
	OpRelease
	OpFence // the second round of a fenced acquire: raise the counters
	OpQueue // a waiting Lock's check-in at its key's wait queue (one node)
	// The requests that are not a lock's rounds, sent through the same
	// queue: a leadership's rewrite of its value (key/proclaim.lua), and
	// the reads of Inspect (key/inspect.lua) and of an election's
	// history (key/history.lua).
	OpProclaim
	OpInspect
	OpHistory
)

// String returns the name the API reports for op: "lock", "extend",
// "fence" or "unlock".
func (o Op) String() string {
	switch o {
	case OpAcquire:
		return "lock"
	case OpExtend:
		return "extend"
	case OpFence:
		return "fence"
	case OpQueue:
		return "queue"
	case OpProclaim:
		return "proclaim"
	case OpInspect:
		return "inspect"
	case OpHistory:
		return "history"
	}
	return "unlock"
}

// Kind is a lock's kind: a key lock, or one of the family.
type Kind uint8

const (
	KindKey Kind = iota
	KindRead
	KindPath
	KindPermit
)

// Values the library writes, which the scripts know.
const (
	// ReservedPrefix begins the library's own values, which no token may
	// begin with.
	ReservedPrefix = "redlock:"
	// ReadMarker is the lock key's value while readers hold it.
	ReadMarker = ReservedPrefix + "readers"
	// LimitMember prefixes the member of a semaphore's sorted set that
	// records its limit.
	LimitMember = ReservedPrefix + "limit="
)

// Semaphore is what a permit's requests carry of its semaphore.
type Semaphore struct {
	Name  string // for errors
	Limit int
}

// Queue is a request's part in a key's wait queue (key/queue.lua).
type Queue struct {
	ID     string        // the waiter: one per Client and key
	Ticket int64         // its place: when it began to wait, in µs on its clock
	Life   time.Duration // how long the queue outlives its last write
	// Named is how long a waiter named by a release stays the one
	// expected: until then, a check-in that finds the key free does
	// not name the next.
	Named time.Duration
}

// QueueKeys returns the wait queue's keys of a lock's key (on the
// wire): the queue, and the mark of the waiter named last. The release
// script (key/release_one.lua) names them the same way.
func QueueKeys(key string) (queue, named string) {
	return key + ":queue", key + ":queue:named"
}

// QueueMessage begins the release announcement that names the queue's
// next waiter: QueueMessage, its id, ":" and its ticket. Other messages
// name nobody.
const QueueMessage = "q:"

// ParseNamed reads a release announcement: the waiter id and ticket it
// names, ok false when it names nobody.
func ParseNamed(msg string) (id string, ticket int64, ok bool) {
	rest, ok := strings.CutPrefix(msg, QueueMessage)
	if !ok {
		return "", 0, false
	}
	id, t, ok := strings.Cut(rest, ":")
	if !ok {
		return "", 0, false
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return "", 0, false
	}
	return id, int64(f), true
}

// Announce is the release channel of a release announced to waiters
// (Request.Notify). With a key prefix, PrefixLen is its length: the
// script drops the key's prefix after the channel's.
type Announce struct {
	Channel   string
	PrefixLen int
}

// Request is what a round sends to every node, as built for the wire.
// It is kept small, one size class of the allocator: a round allocates
// one per call, and what only Prepare needs (the keys, the release
// channel) is passed to it rather than kept.
type Request struct {
	// The one-byte fields together, so that the struct stays in its size
	// class of the allocator.
	Op     Op
	Kind   Kind // KindKey, or the family kind
	Fenced bool // acquire: also raise the fence counters (key/acquire_fenced.lua)
	// Notify: a release announced to waiters on its release channel
	// (see Announce).
	Notify bool
	Token  string
	TTL    time.Duration
	Fence  int64      // OpFence: the fencing token to raise the counters to; OpExtend: the lock's, for a heal
	Sem    *Semaphore // KindPermit
	// Intent (a key lock's acquire by Lock, not TryLock): on a refusal,
	// the acquire script marks the keys that readers hold for this long,
	// so that new readers wait (key/acquire.lua, common/writer_mark.lua).
	Intent time.Duration
	// Prev: an acquire of one key lock handed on by its holder, whose
	// token Prev is: the key may hold it (key/swap.lua).
	Prev string
	// Queue: on OpQueue, the waiter's place in the key's wait queue; on
	// an announced release of one key lock, that the release names the
	// queue's head (key/release_one.lua). nil: no queue.
	Queue *Queue

	// Set by Prepare. Setnx: an acquire of one key, unfenced, sent as SET
	// NX PX; the acquire script runs only on refusal (see ScriptArgs).
	Setnx bool
	// Script and its EVALSHA command (or SET NX PX), boxed once per
	// round. Each node gets its own copy of the argument slice (a
	// go-redis hook may rewrite arguments in place), all in one
	// allocation, and a last, pristine copy is the template for EVAL.
	Script *Script
	Argv   []any // n+1 copies of Width each
	Width  int
}

// Args returns node i's command.
func (r *Request) Args(i int) []any {
	if (i+2)*r.Width > len(r.Argv) {
		i = 0 // prepared for one node (a clean-up release)
	}
	return r.Argv[i*r.Width : (i+1)*r.Width : (i+1)*r.Width]
}

// Prepare builds the request's command for n nodes: EVALSHA of its op's
// script with its keys and arguments, or for an acquire of one key
// without fencing, SET key token NX PX ttl. keys are the keys on the
// wire (the key prefix applied), followed by their fence counters for a
// fenced acquire and OpFence; ann is the release channel of a Notify
// release.
//
// Why SET for an acquire: a script call costs the node about 8µs, a SET
// 2µs (INFO commandstats), and on a machine where the nodes and the
// client share the cores that is latency: measured, 5-10% off the p50 of
// an uncontended Lock+Unlock.
// Not SET NX PX GET, which would tell a refusal apart from our own key
// in one request: its grant is a nil reply, which go-redis handles as an
// error (redis.Nil), some 20 allocations each, and the latency gain was
// lost. A refusal runs the script instead (see ScriptArgs).
func (r *Request) Prepare(n int, keys []string, ann Announce) {
	var ex [4]any // the arguments after the token
	ne := 0
	quiet := false // a queued release, announced on two nodes only
	switch {
	case r.Kind != KindKey:
		r.Script = FamilyScript(r.Kind, r.Op)
		switch r.Op {
		case OpAcquire, OpExtend:
			ex[0], ne = PXMillis(r.TTL), 1
			switch r.Kind {
			case KindRead:
				ex[1], ne = ReadMarker, 2
			case KindPermit:
				ex[1], ex[2], ne = r.Sem.Limit, LimitMember, 3
			}
		default:
			if r.Kind == KindRead {
				ex[0], ne = ReadMarker, 1
			}
			ne = r.announce(&ex, ne, ann)
		}
	case r.Op == OpAcquire:
		r.Script = ScriptAcquire
		ex[0], ne = PXMillis(r.TTL), 1
		switch {
		case r.Fenced:
			r.Script = ScriptAcquireFenced
		case r.Prev != "":
			r.Script = ScriptSwap
			ex[1], ne = r.Prev, 2
		case len(keys) == 1:
			r.Setnx = true // the mark goes with the script (ScriptArgs)
		}
		if r.Intent > 0 && !r.Setnx && r.Prev == "" {
			ex[1], ex[2], ne = PXMillis(r.Intent), ReadMarker, 3
		}
	case r.Op == OpExtend:
		r.Script = ScriptExtend
		ex[0], ne = PXMillis(r.TTL), 1
		if r.Fence > 0 {
			// A fenced lock: keys are followed by their counters, which
			// a heal raises to the fencing token (extend/kinds.lua).
			ex[1], ne = r.Fence, 2
		}
	case r.Op == OpFence:
		r.Script = ScriptFence
		ex[0], ne = r.Fence, 1
	case r.Op == OpQueue:
		r.prepareQueue(n, keys[0], ann)
		return
	default:
		r.Script = ScriptRelease
		if len(keys) == 1 {
			r.Script = ScriptReleaseOne
			if r.Queue != nil && r.Notify {
				// The arguments in full: see key/release_one.lua.
				ex[0], ex[1], ex[2], ne = ann.Channel, ann.PrefixLen, PXMillis(r.Queue.Named), 3
				quiet = true
				break
			}
		}
		ne = r.announce(&ex, ne, ann)
	}
	w := 4 + len(keys) + ne
	if r.Setnx {
		w = 6
	}
	all := make([]any, 0, (n+1)*w)
	if r.Setnx {
		all = append(all, "set", keys[0], r.Token, "nx", "px", ex[0])
	} else {
		all = append(all, "evalsha", r.Script.SHA, len(keys))
		for _, k := range keys {
			all = append(all, k)
		}
		all = append(all, r.Token)
		all = append(all, ex[:ne]...)
	}
	for range n {
		all = append(all, all[:w]...)
	}
	if quiet && n > 2 {
		// The release is announced on the key's queue node, which names
		// the next waiter, and on the node after it, for the waiters
		// that the queue does not serve (readers, fenced locks, a queue
		// node down). Every announcement costs each subscribed Client a
		// read and a wake-up: five of them per release made that cost
		// grow with the Clients waiting.
		qn := QueueNode(keys[0], n)
		for i := range n {
			if i != qn && i != (qn+1)%n {
				all[i*w+5] = "" // the channel (key/release_one.lua's ARGV[2])
			}
		}
	}
	r.Argv, r.Width = all, w
}

// prepareQueue is Prepare for OpQueue (key/queue.lua): no token.
func (r *Request) prepareQueue(n int, key string, ann Announce) {
	q, named := QueueKeys(key)
	r.prepareScript(n, ScriptQueue, []string{key, q, named},
		r.Queue.ID, r.Queue.Ticket, PXMillis(r.Queue.Life), PXMillis(r.Queue.Named), ann.Channel, ann.PrefixLen)
}

// prepareScript builds the command of a request that runs script s
// with keys and args, for n nodes, as Prepare does for a lock's round:
// EVALSHA, with EVAL as the node's fallback (Request.EvalArgs).
func (r *Request) prepareScript(n int, s *Script, keys []string, args ...any) {
	r.Script = s
	w := 3 + len(keys) + len(args)
	all := make([]any, 0, (n+1)*w)
	all = append(all, "evalsha", s.SHA, len(keys))
	for _, k := range keys {
		all = append(all, k)
	}
	all = append(all, args...)
	for range n {
		all = append(all, all[:w]...)
	}
	r.Argv, r.Width = all, w
}

// IsRead reports whether r only reads (Inspect, the history): it
// changes nothing on the node.
func (r *Request) IsRead() bool { return r.Op == OpInspect || r.Op == OpHistory }

// LateHarmless reports whether r may run after a later request of its
// lock has run: it changes the node only where the key holds its token,
// and creates nothing, so after a release it finds nothing to change.
// A Proclaim racing its own Resign is the case that needs it.
func (r *Request) LateHarmless() bool { return r.Op == OpProclaim || r.Op == OpRelease }

// announce appends to ex[:ne] the release channel arguments of a release
// that is announced to waiters, and returns the new count.
func (r *Request) announce(ex *[4]any, ne int, ann Announce) int {
	switch {
	case !r.Notify:
		return ne
	case ann.PrefixLen == 0:
		ex[ne] = ann.Channel
		return ne + 1
	}
	ex[ne], ex[ne+1] = ann.Channel, ann.PrefixLen
	return ne + 2
}

// EvalArgs is the EVAL form of the command, for a node that does not
// have the script cached.
func (r *Request) EvalArgs() []any {
	return r.ScriptArgs("eval", r.Script.Src)
}

// ScriptArgs is the command that runs r's script: cmd ("evalsha" or
// "eval") of script (its SHA-1 or source). For a Setnx acquire it is the
// acquire script, which a refused SET runs: it refreshes a key that
// already holds our token and answers 0 for another holder's.
func (r *Request) ScriptArgs(cmd string, script any) []any {
	t := r.Argv[len(r.Argv)-r.Width:] // the pristine copy
	if r.Setnx {
		// SET key token NX PX ttl: the acquire script's KEYS and ARGV,
		// and a waiting writer's mark (see Request.Intent).
		if r.Intent > 0 {
			return []any{cmd, script, 1, t[1], t[2], t[5], PXMillis(r.Intent), ReadMarker}
		}
		return []any{cmd, script, 1, t[1], t[2], t[5]}
	}
	args := append([]any(nil), t...)
	args[0], args[1] = cmd, script
	return args
}

// ContactArgs is the command of a first contact: EVAL, which also caches
// the script on the node, or the SET of a Setnx acquire.
func (r *Request) ContactArgs() []any {
	if r.Setnx {
		return r.Pristine()
	}
	return r.EvalArgs()
}

// Pristine returns a copy of the command as Prepare built it, for
// sending it again: a hook may have rewritten a node's copy in place.
func (r *Request) Pristine() []any {
	return append([]any(nil), r.Argv[len(r.Argv)-r.Width:]...)
}

// PXMillis converts a TTL to the whole milliseconds sent as PX, rounding
// up: a key that lives slightly longer than our validity assumes is safe,
// one that lives shorter is not.
func PXMillis(ttl time.Duration) int64 {
	ms := int64(ttl / time.Millisecond)
	if ttl%time.Millisecond != 0 {
		ms++
	}
	return ms
}
