package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

// runner is what `redlock run` knows of its nodes, to explain failures in
// the CLI's terms: nodes numbered from 1, named by their URL as given
// (password redacted), as status and the URL errors name them.
type runner struct {
	specs   []nodeSpec
	clients []redis.UniversalClient
	flight  *inflight
	stored  string // the key as stored on the nodes: with the key prefix
	probe   time.Duration
}

// nodeName names node i (0-based index) as the CLI does everywhere.
func (r *runner) nodeName(i int) string {
	if i >= 0 && i < len(r.specs) {
		return fmt.Sprintf("node %d (%s)", i+1, r.specs[i].url)
	}
	return fmt.Sprintf("node %d", i+1)
}

// nodeLines lists the per-node outcome of a failed round, one indented
// line per node that did not grant; "" for other errors. now is what
// each node held when read again after the round (why's read, index by
// node), or nil: a node that was held or had not answered when the round
// was decided is then described as read, as the summary counts it, so
// that no line says "no answer" of a node counted as a holder's.
func (r *runner) nodeLines(err error, now []nodeStatus) string {
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return ""
	}
	var b strings.Builder
	for _, n := range qe.Nodes {
		if n.Status == "ok" {
			continue
		}
		st := n.Status
		switch n.Status {
		case "taken":
			st = "held by another owner"
		case "pending":
			st = "no answer before the outcome was decided"
		case "failed":
			st = "failed: " + libError(n.Err).Error()
		}
		if n.Node >= 0 && n.Node < len(now) && n.Status != "failed" {
			switch s := now[n.Node]; {
			case s.err != nil:
				st = "no answer"
			case s.token != "":
				st = "held by " + holderID(s.token)
			case n.Status == "taken":
				st = "held by another owner, free now"
			default:
				st = "free"
			}
		}
		fmt.Fprintf(&b, "  %s: %s\n", r.nodeName(n.Node), st)
	}
	return b.String()
}

// why says why the lock could not be had: held by another owner (with
// the token that holds a quorum of the nodes, when one does, as status
// shows it), nodes unreachable, or the validity spent by slow nodes. It
// reads the nodes again for the holder, each bounded by r.probe and by
// ctx, and then returns what each node held (for nodeLines); nil when it
// did not read them.
func (r *runner) why(ctx context.Context, err error) (string, []nodeStatus) {
	var qe *redlock.QuorumError
	taken, failed := 0, 0
	if errors.As(err, &qe) {
		for _, n := range qe.Nodes {
			switch n.Status {
			case "taken":
				taken++
			case "failed":
				failed++
			}
		}
	}
	n, quorum := len(r.specs), len(r.specs)/2+1
	switch {
	case errors.Is(err, redlock.ErrExpired):
		return "the nodes answered too slowly: no validity was left (--ttl too short for their latency?)", nil
	case errors.Is(err, redlock.ErrUnreachable) && taken == 0:
		// A wait that --wait ended says its last completed attempt's
		// reason too.
		return fmt.Sprintf("nodes unreachable: %d of %d nodes failed, and %d must grant", failed, n, quorum), nil
	}
	// Held (or the wait ended before any attempt completed): read who
	// holds the key.
	now := r.read(ctx)
	holders, down := map[string]int{}, 0
	for _, s := range now {
		switch {
		case s.err != nil:
			down++
		case s.token != "":
			holders[holderID(s.token)]++
		}
	}
	if len(holders) == 0 {
		if down > 0 {
			return fmt.Sprintf("nodes unreachable: %d of %d nodes did not answer, and %d must grant", down, n, quorum), now
		}
		return "held by another owner, free again now", now
	}
	toks := make([]string, 0, len(holders))
	for t := range holders {
		toks = append(toks, t)
	}
	sort.Slice(toks, func(i, j int) bool {
		return holders[toks[i]] > holders[toks[j]] || holders[toks[i]] == holders[toks[j]] && toks[i] < toks[j]
	})
	var s string
	if holders[toks[0]] >= quorum {
		s = fmt.Sprintf("held by another owner: %s holds %d of %d nodes", toks[0], holders[toks[0]], n)
	} else {
		parts := make([]string, len(toks))
		for i, t := range toks {
			parts[i] = fmt.Sprintf("%s on %d", t, holders[t])
		}
		s = fmt.Sprintf("held by other owners, none on a quorum of %d: %s", quorum, strings.Join(parts, ", "))
	}
	if down > 0 {
		s += fmt.Sprintf("; %d of %d nodes unreachable", down, n)
	}
	return s, now
}

// read reads the key on every node, as status does, each bounded by
// r.probe and ctx, and returns what each node said.
func (r *runner) read(ctx context.Context) []nodeStatus {
	res := make([]nodeStatus, len(r.clients))
	var wg sync.WaitGroup
	for i, c := range r.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = probeNode(ctx, c, r.stored, r.probe)
		}()
	}
	wg.Wait()
	return res
}

// libError returns err with the library's "redlock: " prefixes removed:
// the CLI's own prefix ("redlock run: ") already says where it comes
// from, and the cause should lead once.
func libError(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(strings.ReplaceAll(err.Error(), "redlock: ", ""))
}

// dupRe matches the library's duplicate-node errors ("duplicate node" in ErrInvalid),
// which number the nodes from 1: "duplicate node: nodes 1 and 3 are the
// same server (run_id ...)", "... both address ...", "... are the same
// client".
var dupRe = regexp.MustCompile(`^duplicate node: nodes (\d+) and (\d+) (.*)$`)

// usageError returns the usage error of a library error that is the
// command line's fault (ErrInvalid), without the library's prefix. A
// node given twice reads as parseNodes and status say it, with both
// nodes named by URL.
func (r *runner) usageError(err error) error {
	msg := libError(err).Error()
	m := dupRe.FindStringSubmatch(msg)
	if m == nil || !errors.Is(err, redlock.ErrInvalid) {
		return usagef("%s", msg)
	}
	i, _ := strconv.Atoi(m[1])
	j, _ := strconv.Atoi(m[2])
	// The later node is the repeat, as parseNodes says it, whichever of
	// the two the library happened to identify first.
	i, j = min(i, j), max(i, j)
	if i < 1 || j < 1 || i > len(r.specs) || j > len(r.specs) {
		return usagef("%s", msg)
	}
	how := strings.TrimPrefix(m[3], "are ") // "the same client", "both address ..."
	if a, b, ok := strings.Cut(how, " (run_id "); ok {
		how = a + ", run_id " + strings.TrimSuffix(b, ")") // as status says it
	}
	return usagef("node %d %q is node %d %q again (%s): each node must be a distinct Redis master",
		j, r.specs[j-1].url, i, r.specs[i-1].url, how)
}

// explain describes a library error in the CLI's terms: its causes once,
// the votes, and one line per node that did not agree (numbered from 1,
// named by URL).
func (r *runner) explain(err error) string {
	if err == nil {
		return ""
	}
	causes := []struct {
		err error
		say string
	}{
		{redlock.ErrLockLost, "lock lost"},
		{redlock.ErrHoldLimit, "hold limit reached"},
		{redlock.ErrContended, "held by another owner"},
		{redlock.ErrUnreachable, "nodes unreachable"},
		{redlock.ErrExpired, "validity expired"},
		{context.Canceled, "cancelled"},
		{context.DeadlineExceeded, "deadline exceeded"},
	}
	var says []string
	for _, c := range causes {
		if errors.Is(err, c.err) {
			says = append(says, c.say)
		}
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		if errors.Is(err, redlock.ErrLockLost) && !errors.Is(err, redlock.ErrHoldLimit) {
			return "lock lost: no extension reached a quorum before its validity ran out"
		}
		if len(says) == 0 {
			return libError(err).Error()
		}
		return strings.Join(says, ": ")
	}
	if len(says) == 0 {
		says = append(says, "not held")
	}
	return fmt.Sprintf("%s (%s: %d of %d nodes agreed, %d needed)\n%s",
		strings.Join(says, ": "), qe.Op, qe.OK, len(qe.Nodes), qe.Quorum, strings.TrimSuffix(r.nodeLines(err, nil), "\n"))
}

// nodeStatus is what why learnt from one node.
type nodeStatus struct {
	err   error         // not reachable
	token string        // "" when the key is absent
	pttl  time.Duration // -2: no key, -1: no expiry
	fence string        // "" when absent
}

// probeNode reads the key (its holder's token), its PTTL and its fence
// counter from one node, bounded by timeout even if the client ignores
// context deadlines.
func probeNode(ctx context.Context, c redis.UniversalClient, key string, timeout time.Duration) nodeStatus {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := make(chan nodeStatus, 1)
	go func() {
		var get, fence *redis.StringCmd
		var pttl *redis.DurationCmd
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			get = p.Get(ctx, key)
			pttl = p.PTTL(ctx, key)
			fence = p.Get(ctx, redlock.KeyName("fence", key))
			return nil
		})
		var s nodeStatus
		if err := pttl.Err(); err != nil {
			s.err = err // PTTL works on any key: the node did not answer, or refused us (NOAUTH)
			out <- s
			return
		}
		s.token, s.pttl, s.fence = tokenOf(value(get)), pttl.Val(), value(fence)
		out <- s
	}()
	select {
	case s := <-out:
		return s
	case <-ctx.Done():
		return nodeStatus{err: fmt.Errorf("no answer within %v", timeout)}
	}
}

// infoField returns the value of field in an INFO reply, or "".
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// value returns a GET's value, "" for a missing key, and "?" for a key that
// holds something other than a string.
func value(c *redis.StringCmd) string {
	switch err := c.Err(); {
	case err == nil:
		return c.Val()
	case errors.Is(err, redis.Nil):
		return ""
	}
	return "?"
}

// tokenOf returns the token of a key lock's value: what precedes the NUL
// byte before its metadata (WithMetadata), or all of it.
func tokenOf(v string) string {
	t, _, _ := strings.Cut(v, "\x00")
	return t
}

// idLen is how much of a holder's ID status and run's messages show.
const idLen = 8

// holderID returns the start of the ID Inspect gives the holder of token
// (the SHA-1 of the token, in hex), as status shows it: the token itself
// never leaves the nodes.
func holderID(token string) string {
	if token == "?" { // not a key lock's value (see value)
		return token
	}
	sum := sha1.Sum([]byte(token))
	return shortID(hex.EncodeToString(sum[:]))
}

// shortID returns the first idLen characters of a holder's ID.
func shortID(id string) string {
	if len(id) > idLen {
		return id[:idLen]
	}
	return id
}
