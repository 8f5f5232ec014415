package wire

import (
	"fmt"
	"strconv"
)

// An election's history (key/proclaim.lua, key/history.lua) is a sorted
// set per node: one member per publication of a leadership (Campaign's,
// then each Proclaim's), scored by the leadership's term. Members of one
// term sort by their fixed-width sequence number first, so that the
// set's own order is the order of publication.

// seqDigits is the width of a member's sequence number in hexadecimal:
// fixed, so that the byte order of members is their numeric order.
const seqDigits = 16

// TermMember is the history member of a leadership's seq-th publication
// (0 for Campaign's) of value.
func TermMember(seq int64, value string) string {
	return fmt.Sprintf("%0*x:", seqDigits, uint64(seq)) + value
}

// ParseTermMember reads TermMember's format.
func ParseTermMember(m string) (seq int64, value string, ok bool) {
	if len(m) <= seqDigits || m[seqDigits] != ':' {
		return 0, "", false
	}
	n, err := strconv.ParseUint(m[:seqDigits], 16, 63)
	if err != nil {
		return 0, "", false
	}
	return int64(n), m[seqDigits+1:], true
}

// Proclaim is a leadership's rewrite of its metadata on a node
// (key/proclaim.lua), with the entry it adds to the election's history.
type Proclaim struct {
	Key      string // the lock's key, on the wire
	Old      string // the holder's value when it acquired
	Value    string // its new value: token and metadata
	Channel  string // where the change is announced; "" for none
	Msg      string // the announcement
	History  string // the history's key; "" for none
	Term     int64  // the entry's score
	Member   string // the entry (TermMember)
	Keep     int    // how many entries the history keeps
	ExpireMS int64  // the history's expiry, refreshed by each write
}

// Args is the command of p, with cmd "evalsha" or "eval".
func (p *Proclaim) Args(cmd string) []any {
	script := ScriptProclaim.SHA
	if cmd == "eval" {
		script = ScriptProclaim.Src
	}
	if p.History == "" {
		return []any{cmd, script, 1, p.Key, p.Old, p.Value, p.Channel, p.Msg}
	}
	return []any{cmd, script, 2, p.Key, p.History, p.Old, p.Value, p.Channel, p.Msg, p.Term, p.Member, p.Keep, p.ExpireMS}
}

// TermEntry is one entry of an election's history as a node holds it.
type TermEntry struct {
	Term   int64
	Member string // TermMember's encoding, the same on every node
	Seq    int64
	Value  string
}

// HistoryArgs is the command that reads the entries of an election's
// history (key/history.lua) with a term of at least from, with cmd
// "evalsha" or "eval".
func HistoryArgs(cmd, key string, from int64) []any {
	script := ScriptHistory.SHA
	if cmd == "eval" {
		script = ScriptHistory.Src
	}
	return []any{cmd, script, 1, key, from}
}

// ParseHistory reads key/history.lua's reply, in its order.
func ParseHistory(res any) ([]TermEntry, error) {
	arr, ok := res.([]any)
	if !ok || len(arr)%2 != 0 {
		return nil, ErrUnexpectedReply(res)
	}
	out := make([]TermEntry, 0, len(arr)/2)
	for i := 0; i < len(arr); i += 2 {
		m, ok1 := arr[i].(string)
		sc, ok2 := arr[i+1].(string)
		if !ok1 || !ok2 {
			return nil, ErrUnexpectedReply(res)
		}
		term, err := strconv.ParseInt(sc, 10, 64)
		seq, value, ok := ParseTermMember(m)
		if err != nil || !ok {
			return nil, fmt.Errorf("redlock: unexpected history entry %q (term %q)", m, sc)
		}
		out = append(out, TermEntry{Term: term, Member: m, Seq: seq, Value: value})
	}
	return out, nil
}
