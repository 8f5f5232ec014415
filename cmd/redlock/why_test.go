package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seed543a70bd/redlock"
)

// The reason a lock was not obtained and the node lines under it agree:
// a node the round did not wait for (decided early, by two of three)
// but that the holders' read found held is counted in "holds 3 of 3
// nodes" and its line says held by that token, not "no answer". Before,
// the summary said 3 of 3 next to "node 3: no answer before the outcome
// was decided".
func TestRunNotObtainedLinesAgreeWithHolders(t *testing.T) {
	_, clients, urls := cluster(t, 3)
	key := testKey(t)
	l := heldElsewhere(t, clients, key, 20*time.Second)
	eventually(t, 5*time.Second, func() bool { return get(t, clients[2], key) != "" }, "want the key on every node")

	specs, err := parseNodes(urls, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{specs: specs, clients: clients, stored: key, probe: time.Second}
	// The round as the library reports one decided by nodes 1 and 2.
	round := errors.Join(redlock.ErrContended, &redlock.QuorumError{
		Op: "lock", Keys: []string{key}, Quorum: 2,
		Nodes: []redlock.NodeResult{{Node: 0, Status: "taken"}, {Node: 1, Status: "taken"}, {Node: 2, Status: "pending"}},
	})
	why, now := r.why(context.Background(), round)
	lines := r.nodeLines(round, now)
	holder := holderID(l.Token())
	if want := fmt.Sprintf("%s holds 3 of 3 nodes", holder); !strings.Contains(why, want) {
		t.Fatalf("want %q, got %q", want, why)
	}
	for i := range 3 {
		want := fmt.Sprintf("  node %d (%s): held by %s\n", i+1, specs[i].url, holder)
		if !strings.Contains(lines, want) {
			t.Errorf("want the line %q, as the summary counts node %d, got:\n%s", want, i+1, lines)
		}
	}
	if strings.Contains(lines, "no answer") {
		t.Errorf("want no node said unanswered that the summary counts, got:\n%s", lines)
	}

	// Without a read (as when the wait ends on unreachable nodes), the
	// lines say what the round saw.
	if got := r.nodeLines(round, nil); !strings.Contains(got, "node 3 ("+specs[2].url+"): no answer before the outcome was decided") {
		t.Errorf("want the round's outcome for node 3, got:\n%s", got)
	}
}

// A timed-out wait says why: nodes unreachable, when too few answer.
func TestRunNotObtainedUnreachable(t *testing.T) {
	nodes, _, urls := cluster(t, 3)
	key := testKey(t)
	for _, n := range nodes[:2] {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	r := cli(t, nil, "run", "--nodes", urls, "--key", key, "-w", "300ms", "--", "true")
	if r.code != exitNotObtained {
		t.Fatalf("want exit %d, got %d; stderr:\n%s", exitNotObtained, r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "nodes unreachable") || !strings.Contains(r.stderr, "node 1 (redis://"+nodes[0].Addr()+"): failed") {
		t.Errorf("want the reason (nodes unreachable) and node 1 named by URL, got:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "node 0") || strings.Contains(r.stderr, "redlock: ") {
		t.Errorf("want 1-based nodes and no library prefix, got:\n%s", r.stderr)
	}
}
