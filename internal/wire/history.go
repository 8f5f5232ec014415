package wire

import (
	"fmt"
	"strconv"
)

// An election's history (key/proclaim.lua, key/history.lua) is a sorted
// set per node: one member per publication of a leadership (Campaign's,
// then each Proclaim's), scored by the leadership's term. A member
// carries its term too, since a set keeps one score per member and two
// leaderships may publish the same value at the same place; then its
// sequence number, so that the members of one term sort in the order of
// publication; then the value.

// numDigits is the width of a member's term and sequence number in
// hexadecimal: fixed, so that the byte order of members is their
// numeric order.
const numDigits = 16

// TermMember is the history member of the seq-th publication (0 for
// Campaign's) of value by the leadership of term.
func TermMember(term, seq int64, value string) string {
	return fmt.Sprintf("%0*x:%0*x:", numDigits, uint64(term), numDigits, uint64(seq)) + value
}

// ParseTermMember reads TermMember's format.
func ParseTermMember(m string) (term, seq int64, value string, ok bool) {
	const head = 2 * (numDigits + 1)
	if len(m) < head || m[numDigits] != ':' || m[head-1] != ':' {
		return 0, 0, "", false
	}
	t, err1 := strconv.ParseUint(m[:numDigits], 16, 63)
	n, err2 := strconv.ParseUint(m[numDigits+1:head-1], 16, 63)
	if err1 != nil || err2 != nil {
		return 0, 0, "", false
	}
	return int64(t), int64(n), m[head:], true
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
		score, err := strconv.ParseInt(sc, 10, 64)
		term, seq, value, ok := ParseTermMember(m)
		if err != nil || !ok || score != term {
			return nil, fmt.Errorf("redlock: unexpected history entry %q (term %q)", m, sc)
		}
		out = append(out, TermEntry{Term: term, Member: m, Seq: seq, Value: value})
	}
	return out, nil
}
