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
	Keys  []string // its keys on the wire (key prefix applied)
	TTL   time.Duration
	Token string
}

// KindLetter is the batch script's name of a lock's kind.
func KindLetter(k Kind) byte {
	switch k {
	case KindKey:
		return 'k'
	case KindPath:
		return 'p'
	case KindRead:
		return 'r'
	}
	return 's'
}

// BatchArgv builds the command of a batch: EVALSHA of the batch script,
// the locks' keys, the read marker, and the locks' kinds, TTLs and
// tokens in one string (see extend/batch.lua). lock(k) is the k-th of n
// locks.
func BatchArgv(n int, lock func(k int) *BatchLock) []any {
	nkeys, size := 0, 0
	for k := range n {
		l := lock(k)
		nkeys += len(l.Keys)
		size += 24 + len(l.Token)
	}
	a := make([]any, 0, 5+nkeys)
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
	}
	return append(a, ReadMarker, string(blob))
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
