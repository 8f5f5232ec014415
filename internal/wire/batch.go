package wire

import (
	"strconv"
	"time"
)

// An extension batch: per node, one EVALSHA of extend/batch.lua carries
// up to MaxBatch locks, each checked and extended on its own, and its
// reply is one status character per lock (BatchStatus).

// MaxBatch is the most locks one batched request carries: a script call
// blocks its node while it runs (about a microsecond per lock).
const MaxBatch = 256

// BatchLock is one lock of an extension batch.
type BatchLock struct {
	Kind  byte     // KindLetter
	Keys  []string // its keys on the wire (key prefix applied); a fenced lock's, then their counters
	TTL   time.Duration
	Token string
	// Extra is a fenced key lock's fencing token (Kind 'f') or a
	// permit's limit (Kind 's'), for a heal (extend/kinds.lua).
	Extra int64
}

// KindLetter is the batch script's name of a lock's kind; fenced: a
// key lock with fencing.
func KindLetter(k Kind, fenced bool) byte {
	switch k {
	case KindKey:
		if fenced {
			return 'f'
		}
		return 'k'
	case KindPath:
		return 'p'
	case KindRead:
		return 'r'
	}
	return 's'
}

// BatchArgv builds the command of a batch: EVALSHA of the batch script,
// the locks' keys, the read marker, the locks' kinds, TTLs and tokens
// in one string, and the semaphores' limit member prefix (see
// extend/batch.lua). lock(k) is the k-th of n locks.
func BatchArgv(n int, lock func(k int) *BatchLock) []any {
	nkeys, size := 0, 0
	for k := range n {
		l := lock(k)
		nkeys += len(l.Keys)
		size += 48 + len(l.Token)
	}
	a := make([]any, 0, 6+nkeys)
	a = append(a, "evalsha", ScriptExtendBatch.SHA, nkeys)
	for k := range n {
		for _, key := range lock(k).Keys {
			a = append(a, key)
		}
	}
	blob := make([]byte, 0, size)
	for k := range n {
		l := lock(k)
		blob = append(blob, l.Kind)
		blob = strconv.AppendInt(blob, int64(len(l.Keys)), 10)
		blob = append(blob, ' ')
		blob = strconv.AppendInt(blob, PXMillis(l.TTL), 10)
		blob = append(blob, ' ')
		blob = strconv.AppendInt(blob, int64(len(l.Token)), 10)
		blob = append(blob, ' ')
		blob = append(blob, l.Token...)
		if l.Kind == 'f' || l.Kind == 's' {
			blob = strconv.AppendInt(blob, l.Extra, 10)
			blob = append(blob, ' ')
		}
	}
	return append(a, ReadMarker, string(blob), LimitMember)
}

// BatchArgs returns a node's copy of a batch command argv (a go-redis
// hook may rewrite arguments in place), as EVAL when eval.
func BatchArgs(argv []any, eval bool) []any {
	a := append([]any(nil), argv...)
	if eval {
		a[0], a[1] = "eval", ScriptExtendBatch.Src
	}
	return a
}
