package wire

import (
	"fmt"
	"strconv"
	"strings"
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

// Request is the request of p, prepared for n nodes, with token the
// holder's token (so that the node's queue orders it as one of the
// lock's requests). A node's reply classifies as StatusOK (rewritten),
// StatusTaken (another holder's) or StatusAbsent (missing); a history
// of another type than a sorted set fails the node with the server's
// WRONGTYPE, as a lock's key of a foreign type does.
func (p *Proclaim) Request(n int, token string) *Request {
	r := &Request{Op: OpProclaim, Token: token}
	if p.History == "" {
		r.prepareScript(n, ScriptProclaim, []string{p.Key}, p.Old, p.Value, p.Channel, p.Msg)
		return r
	}
	r.prepareScript(n, ScriptProclaim, []string{p.Key, p.History}, p.Old, p.Value, p.Channel, p.Msg, p.Term, p.Member, p.Keep, p.ExpireMS)
	return r
}

// TermEntry is one entry of an election's history as a node holds it.
type TermEntry struct {
	Term   int64
	Member string // TermMember's encoding, the same on every node
	Seq    int64
	Value  string
}

// HistoryRequest is the request that reads the entries of an election's
// history (key/history.lua) with a term of at least from, prepared for n
// nodes. A node's reply classifies as StatusOK with its []TermEntry in
// Reply.Res; a history of another type than a sorted set (a value none
// of our kinds writes) fails the node with the server's WRONGTYPE.
func HistoryRequest(n int, key string, from int64) *Request {
	r := &Request{Op: OpHistory}
	r.prepareScript(n, ScriptHistory, []string{key}, from)
	return r
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

// An election's value on the nodes (the metadata of its lock, after the
// token) is "term 17: host-a" for a leadership's first publication (its
// Campaign's), and "term 17 #3: host-a" for its third Proclaim: the term,
// the publication's place in the term (its history entry's seq), and the
// value. The place lets a reader of the value tell which publication it
// read, where values repeat.

// ElectionMeta is the election value of the seq-th publication of value
// by the leadership of term.
func ElectionMeta(term, seq int64, value string) string {
	t := strconv.FormatInt(term, 10)
	if seq == 0 {
		return "term " + t + ": " + value
	}
	return "term " + t + " #" + strconv.FormatInt(seq, 10) + ": " + value
}

// ParseElectionMeta reads ElectionMeta's format.
func ParseElectionMeta(m string) (term, seq int64, value string, ok bool) {
	rest, ok := strings.CutPrefix(m, "term ")
	if !ok {
		return 0, 0, "", false
	}
	head, value, ok := strings.Cut(rest, ": ")
	if !ok {
		return 0, 0, "", false
	}
	t, s, hasSeq := strings.Cut(head, " #")
	term, err := strconv.ParseInt(t, 10, 64)
	if err != nil || term < 0 || (len(t) > 1 && t[0] == '0') || t[0] == '+' {
		return 0, 0, "", false
	}
	if hasSeq {
		seq, err = strconv.ParseInt(s, 10, 64)
		if err != nil || seq <= 0 || s[0] == '+' {
			return 0, 0, "", false
		}
	}
	return term, seq, value, true
}
