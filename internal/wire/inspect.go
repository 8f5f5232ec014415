package wire

import (
	"fmt"
	"time"
)

// MetaSep separates a key lock's token from its holder's metadata in the
// value stored on the nodes (common/own.lua). No token contains it.
const MetaSep = "\x00"

// Value returns the value a lock stores: its token, and when meta is not
// empty, MetaSep and meta.
func Value(token, meta string) string {
	if meta == "" {
		return token
	}
	return token + MetaSep + meta
}

// SplitValue returns the token and the metadata of a stored value.
func SplitValue(v string) (token, meta string) {
	for i := 0; i < len(v); i++ {
		if v[i] == 0 {
			return v[:i], v[i+1:]
		}
	}
	return v, ""
}

// InspectKind is what a node found at a lock's key (key/inspect.lua).
type InspectKind string

const (
	InspectNone  InspectKind = "none"  // free
	InspectKey   InspectKind = "key"   // a key or path lock
	InspectRead  InspectKind = "read"  // readers
	InspectSem   InspectKind = "sem"   // a semaphore's permits
	InspectOther InspectKind = "other" // a value none of our kinds writes
)

// Holder is one holder a node reports: an opaque id (the SHA-1 of its
// token), its metadata, and its time to live on that node.
type Holder struct {
	ID   string
	Meta string
	TTL  time.Duration
}

// Inspection is one node's answer to key/inspect.lua.
type Inspection struct {
	Kind    InspectKind
	PTTL    time.Duration // the key's; < 0 when it has no TTL or is missing
	Fence   int64
	Holders []Holder
}

// InspectRequest is the request of an inspection of keys (the lock's
// key, its fence counter and its readers key, on the wire), prepared for
// n nodes. A node's reply classifies as StatusOK with its Inspection in
// Reply.Res, or as failed.
func InspectRequest(n int, keys [3]string) *Request {
	r := &Request{Op: OpInspect}
	r.prepareScript(n, ScriptInspect, keys[:], ReadMarker, LimitMember)
	return r
}

// ParseInspect reads key/inspect.lua's reply.
func ParseInspect(res any) (Inspection, error) {
	arr, ok := res.([]any)
	if !ok || len(arr) < 3 || (len(arr)-3)%3 != 0 {
		return Inspection{}, ErrUnexpectedReply(res)
	}
	kind, ok1 := arr[0].(string)
	pttl, ok2 := arr[1].(int64)
	fence, ok3 := arr[2].(int64)
	if !ok1 || !ok2 || !ok3 {
		return Inspection{}, ErrUnexpectedReply(res)
	}
	in := Inspection{Kind: InspectKind(kind), PTTL: ms(pttl), Fence: fence}
	switch in.Kind {
	case InspectNone, InspectKey, InspectRead, InspectSem, InspectOther:
	default:
		return Inspection{}, fmt.Errorf("redlock: unexpected kind %q from inspect script", kind)
	}
	for i := 3; i < len(arr); i += 3 {
		id, ok1 := arr[i].(string)
		meta, ok2 := arr[i+1].(string)
		ttl, ok3 := arr[i+2].(int64)
		if !ok1 || !ok2 || !ok3 {
			return Inspection{}, ErrUnexpectedReply(res)
		}
		in.Holders = append(in.Holders, Holder{ID: id, Meta: meta, TTL: ms(ttl)})
	}
	return in, nil
}

func ms(v int64) time.Duration {
	if v < 0 {
		return -1
	}
	return time.Duration(v) * time.Millisecond
}
