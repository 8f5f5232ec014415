package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
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
// line per node that did not grant; "" for other errors.
func (r *runner) nodeLines(err error) string {
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return ""
	}
	var b strings.Builder
	for _, n := range qe.Nodes {
		if n.Status == redlock.NodeOK {
			continue
		}
		st := n.Status.String()
		switch n.Status {
		case redlock.NodeTaken:
			st = "held by another owner"
		case redlock.NodePending:
			st = "no answer before the outcome was decided"
		case redlock.NodeFailed:
			st = "failed: " + libError(n.Err).Error()
		}
		fmt.Fprintf(&b, "  %s: %s\n", r.nodeName(n.Node), st)
	}
	return b.String()
}

// why says why the lock could not be had: held by another owner (with
// the token that holds a quorum of the nodes, when one does, as status
// shows it), nodes unreachable, or the validity spent by slow nodes. It
// reads the nodes again for the holder, each bounded by r.probe.
func (r *runner) why(ctx context.Context, err error) string {
	var qe *redlock.QuorumError
	taken, failed := 0, 0
	if errors.As(err, &qe) {
		for _, n := range qe.Nodes {
			switch n.Status {
			case redlock.NodeTaken:
				taken++
			case redlock.NodeFailed:
				failed++
			}
		}
	}
	n, quorum := len(r.specs), len(r.specs)/2+1
	switch {
	case errors.Is(err, redlock.ErrExpired):
		return "the nodes answered too slowly: no validity was left (--ttl too short for their latency?)"
	case errors.Is(err, redlock.ErrUnreachable) && taken == 0:
		// A wait that --wait ended says its last completed attempt's
		// reason too.
		return fmt.Sprintf("nodes unreachable: %d of %d nodes failed, and %d must grant", failed, n, quorum)
	}
	// Held (or the wait ended before any attempt completed): read who
	// holds the key.
	holders, down := r.holders(ctx)
	if len(holders) == 0 {
		if down > 0 {
			return fmt.Sprintf("nodes unreachable: %d of %d nodes did not answer, and %d must grant", down, n, quorum)
		}
		return "held by another owner, free again now"
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
	return s
}

// holders reads the key on every node, as status does, and returns the
// short tokens found with their node counts, and how many nodes did not
// answer.
func (r *runner) holders(ctx context.Context) (map[string]int, int) {
	res := make([]nodeStatus, len(r.clients))
	var wg sync.WaitGroup
	for i, c := range r.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = probeNode(ctx, c, r.stored, r.probe, false) // the library has identified the nodes
		}()
	}
	wg.Wait()
	holders, down := map[string]int{}, 0
	for _, s := range res {
		switch {
		case s.err != nil:
			down++
		case s.token != "":
			holders[shortToken(s.token)]++
		}
	}
	return holders, down
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
		strings.Join(says, ": "), qe.Op, qe.OK, len(qe.Nodes), qe.Quorum, strings.TrimSuffix(r.nodeLines(err), "\n"))
}
