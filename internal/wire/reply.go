package wire

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Status is one node's outcome, in the order of the API's NodeStatus
// (the root converts one to the other).
type Status uint8

const (
	StatusPending Status = iota
	StatusOK
	StatusTaken
	StatusAbsent
	StatusFailed
)

// Reply is one node's answer to one request.
type Reply struct {
	St    Status
	Fence int64 // fenced acquire: the node's counter after the grant
	Err   error
	// Unsent: never sent, nothing to release.
	Unsent bool
	// Refused: refused before sending (the restart guard): nothing to
	// release either, but reported to the observer like a reply.
	Refused bool
	// An acquire refused by another holder (a key lock's, a read lock's
	// by a writer, a path's by its or an ancestor's holder): its metadata and
	// the key's remaining time to live on this node (HolderTTL < 0: not
	// known).
	Holder    string
	HolderTTL time.Duration
	// Rank: OpQueue's, the waiter's place in the key's wait queue (0:
	// next); StatusOK when the key is free and the waiter next,
	// StatusTaken otherwise.
	Rank int64
	// Res is what a read answered (StatusOK): an Inspection for
	// OpInspect, a []TermEntry for OpHistory.
	Res any
	// Healed: an extension found the lock missing on the node and put
	// it back (extend/kinds.lua). The node did not hold the lock, so
	// its status is StatusAbsent, and it does not count towards the
	// extension's quorum; but it holds the lock's keys now.
	Healed bool
	// Free: a hand-on (Request.Prev) found the key missing, the old
	// holder's lock lost on the node, and granted it.
	Free bool
}

// ErrInvalid is matched by every error about bad input; the root
// re-exports it.
var ErrInvalid = errors.New("redlock: invalid argument")

// Classify turns a script's reply res to r (which the node answered
// without an error) into a status: 1 granted or done, 0 absent (taken,
// for an acquire), -1 taken, -2 a semaphore's limit mismatch, and for an
// extension 2 healed (absent, Healed set). A reply of
// another shape fails the node. A read (OpInspect, OpHistory) is
// StatusOK with its parsed answer in Res, or failed when it does not
// parse.
func Classify(r *Request, res any) Reply {
	switch r.Op {
	case OpQueue:
		return classifyQueue(res)
	case OpInspect:
		in, err := ParseInspect(res)
		if err != nil {
			return Reply{St: StatusFailed, Err: err}
		}
		return Reply{St: StatusOK, Res: in}
	case OpHistory:
		es, err := ParseHistory(res)
		if err != nil {
			return Reply{St: StatusFailed, Err: err}
		}
		return Reply{St: StatusOK, Res: es}
	}
	if v, ok := res.(int64); ok && v == 2 && r.Op == OpExtend {
		return Reply{St: StatusAbsent, Healed: true}
	}
	if v, ok := res.(int64); ok && v == 2 && r.Op == OpAcquire && r.Prev != "" {
		return Reply{St: StatusOK, Free: true}
	}
	if r.Op == OpAcquire && r.Kind != KindPermit {
		if h, ttl, ok := parseRefusal(res, r.Fenced); ok {
			return Reply{St: StatusTaken, Holder: h, HolderTTL: ttl}
		}
	}
	v, f, ok := ParseReply(res, r.Op == OpAcquire && r.Fenced)
	if !ok {
		return Reply{St: StatusFailed, Err: ErrUnexpectedReply(res)}
	}
	var st Status
	switch v {
	case 1:
		st = StatusOK
	case 0:
		st = StatusAbsent
		if r.Op == OpAcquire {
			st = StatusTaken
		}
	case -1:
		st = StatusTaken
	case -2:
		if r.Kind != KindPermit {
			return Reply{St: StatusFailed, Err: ErrUnexpectedReply(res)}
		}
		return Reply{St: StatusFailed, Err: LimitMismatch(r.Sem.Name, r.Sem.Limit)}
	}
	return Reply{St: st, Fence: f}
}

// classifyQueue reads key/queue.lua's reply {rank, held}.
func classifyQueue(res any) Reply {
	arr, ok := res.([]any)
	if !ok || len(arr) != 2 {
		return Reply{St: StatusFailed, Err: ErrUnexpectedReply(res)}
	}
	rank, ok1 := arr[0].(int64)
	held, ok2 := arr[1].(int64)
	if !ok1 || !ok2 {
		return Reply{St: StatusFailed, Err: ErrUnexpectedReply(res)}
	}
	st := StatusTaken
	if rank == 0 && held == 0 {
		st = StatusOK
	}
	return Reply{St: st, Rank: rank}
}

// ParseReply checks a script's reply: an integer 1, 0, -1 or -2 (a
// semaphore's limit mismatch), or for a fenced acquire {1, f} with f > 0
// or {0, 0}. Anything else (a string of digits, a RESP3 type, another
// number) is not what our scripts return.
func ParseReply(res any, fenced bool) (v, f int64, ok bool) {
	if !fenced {
		v, ok = res.(int64)
		return v, 0, ok && (v == 1 || v == 0 || v == -1 || v == -2)
	}
	arr, ok := res.([]any)
	if !ok || len(arr) != 2 {
		return 0, 0, false
	}
	v, ok1 := arr[0].(int64)
	f, ok2 := arr[1].(int64)
	switch {
	case !ok1 || !ok2:
		return 0, 0, false
	case v == 1 && f > 0, v == 0 && f == 0:
		return v, f, true
	}
	return 0, 0, false
}

// parseRefusal reads an acquire refused by another holder:
// {0, metadata, pttl}, or fenced {0, 0, metadata, pttl}
// (key/acquire.lua, read/acquire.lua, path/acquire.lua).
func parseRefusal(res any, fenced bool) (holder string, ttl time.Duration, ok bool) {
	arr, ok := res.([]any)
	n := 3
	if fenced {
		n = 4
	}
	if !ok || len(arr) != n {
		return "", 0, false
	}
	for _, x := range arr[:n-2] {
		if v, ok := x.(int64); !ok || v != 0 {
			return "", 0, false
		}
	}
	h, ok1 := arr[n-2].(string)
	ms, ok2 := arr[n-1].(int64)
	if !ok1 || !ok2 {
		return "", 0, false
	}
	if ms < 0 {
		return h, -1, true
	}
	return h, time.Duration(ms) * time.Millisecond, true
}

// IsNoScript reports whether err is the node's NOSCRIPT error: it does
// not have the script cached (a restart, SCRIPT FLUSH). Only the prefix
// is matched: the text after it differs by server ("No matching script.
// Please use EVAL." on Redis 7.0, "No matching script." on Valkey 8).
func IsNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// IsWrongType reports whether err is the node's WRONGTYPE error: a
// script met a key of another type than it reads (see typedEpilogue).
func IsWrongType(err error) bool {
	return redis.HasErrorPrefix(err, "WRONGTYPE")
}

// IsACLDenied reports whether err is a node's refusal by its ACL: NOPERM
// for a command the caller sent, or, for a command a script runs, an ERR
// that Redis 7.0 words "The user executing the script can't run this
// command" and Valkey 8 "ACL failure in script".
func IsACLDenied(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return redis.HasErrorPrefix(err, "NOPERM") ||
		strings.Contains(msg, "can't run this command") ||
		strings.Contains(msg, "ACL failure in script")
}

// ErrUnexpectedReply is the error of a reply that none of our scripts
// gives.
func ErrUnexpectedReply(v any) error {
	return fmt.Errorf("redlock: unexpected reply %v from script", v)
}

// LimitMismatch is the node error of a permit refused because the
// semaphore's live permits were taken under another limit. It matches
// ErrInvalid.
func LimitMismatch(name string, limit int) error {
	return fmt.Errorf("%w: semaphore %q has live permits taken under another limit than %d: every user of a key must pass the same limit", ErrInvalid, name, limit)
}

// ErrBatchItem is the error of one lock of an extension batch that the
// node failed (its status is neither 1, 0 nor t).
var ErrBatchItem = errors.New("redlock: batched extend: the node failed this lock's extension")

// BatchStatus reads lock k's status in a batch reply st (see
// extend/batch.lua): '1' extended, 'h' healed (absent, Healed set), '0'
// absent, 't' taken; anything else fails the lock.
func BatchStatus(st string, k int) Reply {
	switch st[k] {
	case '1':
		return Reply{St: StatusOK}
	case 'h':
		return Reply{St: StatusAbsent, Healed: true}
	case '0':
		return Reply{St: StatusAbsent}
	case 't':
		return Reply{St: StatusTaken}
	}
	return Reply{St: StatusFailed, Err: ErrBatchItem}
}
