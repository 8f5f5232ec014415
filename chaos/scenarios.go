package chaos

import (
	"fmt"
	"slices"
	"strings"
)

// Scenarios returns every scenario of the suite, in the order it runs
// them. Each one's Doc says what it does and why it expects what it does.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "baseline", Expect: ExpectSafe, run: baseline,
			Doc: "No faults: 4 clients contend for 2 keys. 0 violations."},
		{Name: "kill-minority", Expect: ExpectSafe, run: killMinority,
			Doc: "Mid-lock, kill -9 two of five nodes, keep them down for longer than the TTL (delayed restart), restart them empty; repeat. 0 violations, and locks are still granted while they are down and after."},
		{Name: "kill-majority", Expect: ExpectUnavailable, run: outage([]int{0, 1, 2}, false),
			Doc: "Mid-lock, kill -9 three of five nodes. Until a majority is up again (the first of them restarted) every attempt fails with ErrNotObtained within a bounded time and no lock is granted; after the delayed restarts locks are granted again. 0 violations."},
		{Name: "pause", Expect: ExpectSafe, run: pause,
			Doc: "Mid-lock, SIGSTOP two of five nodes for a while, then SIGCONT; repeat. Attempts stay bounded by the per-node timeout. 0 violations."},
		{Name: "restart-no-guard", Expect: ExpectViolations, run: restart(false),
			Doc: "A holds the key on nodes 1-3 (4 and 5 are taken by a short-lived foreign key); node 1 restarts at once with its memory lost; B then wins on 1, 4 and 5 while A's lock is still valid. Redlock without delayed restarts or persistence is unsafe: violations are expected."},
		{Name: "restart-guard", Expect: ExpectSafe, run: restart(true),
			Doc: "As restart-no-guard, but both clients use WithRestartGuard: the restarted node's vote must be refused until the guard has passed, so B waits for A's lock to expire. The restart is timed for the worst case of INFO's whole-second uptime_in_seconds (the node starts late in a wall-clock second). 0 violations."},
		{Name: "rolling-restart", Expect: ExpectSafe, run: rollingRestart,
			Doc: "A rolling restart: each of five nodes in turn is restarted empty (no persistence), with every other node up, while a fenced key lock, a second key lock, a read lock, a folder lock and a semaphore permit are held and auto-extended (TTL 4 times the run's, so that a stall of a loaded machine does not end them) and 2 clients contend for them. Before each restart the run waits (up to 3s) for every node to hold every lock again, with its holder's token (a contender's key put there for an instant does not count): an extension that still has its quorum puts the key back where it is missing. 0 violations, and 0 held locks lost (without the heal, each is lost once 3 of 5 nodes have restarted)."},
		{Name: "restart-aof", Expect: ExpectSafe, cluster: ClusterOptions{AppendOnly: true}, run: restart(false),
			Doc: "As restart-no-guard, but the nodes persist with appendfsync always: the restarted node still holds A's key. 0 violations."},
		{Name: "failover", Expect: ExpectViolations, cluster: ClusterOptions{Nodes: 3}, run: failover(false),
			Doc: failoverDoc + " Without WithReplicas A won nodes 1 and 2, and B wins on the promoted node 1 and node 3 while A holds: violations are expected."},
		{Name: "failover-replicas", Expect: ExpectSafe, cluster: ClusterOptions{Nodes: 3}, run: failover(true),
			Doc: failoverDoc + " Both clients use WithReplicas(1, 100ms): node 1's grant waits for a replica that does not answer and does not count, so A holds nodes 2 and 3, whose replicas have the key, and B is refused until A releases. 0 violations; B wins after A's release."},
		{Name: "slow-minority", Expect: ExpectSafe, cluster: ClusterOptions{Proxy: true}, run: netFault(false),
			Doc: "Mid-lock, add latency (three per-node timeouts) to two of five nodes through toxiproxy. Uncontended acquire latency stays near the unfaulted phase's. 0 violations."},
		{Name: "partition-minority", Expect: ExpectSafe, cluster: ClusterOptions{Proxy: true}, run: netFault(true),
			Doc: "Mid-lock, partition two of five nodes (toxiproxy drops every byte). Uncontended acquire latency stays near the unfaulted phase's. 0 violations."},
		{Name: "skew-within", Expect: ExpectSafe, run: skew(1.005),
			Doc: "Mid-lock, make the clocks of three of five nodes run 0.5% fast (TTLs scaled by a client hook), inside the 1% drift allowance; holders keep their locks to the end of their validity and let them expire. 0 violations."},
		{Name: "skew-beyond", Expect: ExpectViolations, run: skew(2),
			Doc: "As skew-within, but the three nodes' clocks run twice as fast: keys expire at half the TTL while holders still believe their validity. Violations are expected."},
		{Name: "multilock-node-down", Expect: ExpectUnavailable, run: outage([]int{4}, true),
			Doc: "MultiLock (every node must agree): mid-lock, kill one of five nodes. While it is down no lock is granted; after a delayed restart locks are granted again. 0 violations."},
		{Name: "paused-holder", Expect: ExpectSafe, run: pausedHolder,
			Doc: "A holder pauses (the GC-pause model) past its validity; another client takes the lock and writes; the paused holder then writes with its old fencing token and the fenced resource must reject it."},
		{Name: "path-locks", Expect: ExpectSafe, run: family(familyPath),
			Doc: "6 clients take folder locks (TryLockPath) on a tree of depth 3 whose names share prefixes (a, ab, a-1); mid-lock, one node is killed (restarted empty after a delay) and, while it is down, another paused. 0 violations: no two holds of related paths (same, ancestor or descendant, by whole components) at once; locks granted during each fault, and unrelated paths held at once."},
		{Name: "read-write", Expect: ExpectSafe, run: family(familyReadWrite),
			Doc: "6 clients mix readers (TryRLock) and fenced writers (TryLock, or Lock waiting up to half a TTL, which marks a key readers hold) on 2 keys, auto-extended writers on one of them only; mid-lock, one node is killed (restarted empty after a delay) and, while it is down, another paused. 0 violations: a writer never overlaps a reader or a writer, and no stale fenced write is accepted; readers and writers both granted, readers shared a key."},
		{Name: "semaphore", Expect: ExpectSafe, run: family(familyPermit),
			Doc: "6 clients take permits (TryAcquire) of one semaphore of limit 2, each granted by floor(2*5/3)+1 = 4 nodes; mid-lock, one node is killed (restarted empty after a delay), then another paused. 0 violations: never more than 2 permits at once; permits granted during each fault, and 2 held at once."},
		{Name: "election", Expect: ExpectSafe, cluster: ClusterOptions{Proxy: true}, run: election,
			Doc: "4 candidates on clients of their own campaign for one leadership (Election) with the restart guard, lead for 0.5 to 2.5 TTLs (fenced writes with the term, Proclaims) and resign; the leader's process is paused past its TTL (every request it sends waits), a node is killed and restarted empty at once, and while nodes 4 and 5 are partitioned the leader is paused again. 0 violations: never two leaderships valid at once, terms rise in election order; a new leader within TTL plus a retry (plus node timeouts and 300ms of slack; 3s more under the partition, where the 3 healthy nodes must all grant and candidates split votes) after each pause; the paused leader's late write is refused; Observe delivers in term order without duplicates."},
		{Name: "contention", Expect: ExpectSafe, cluster: ClusterOptions{Proxy: true}, run: contentionRun,
			Doc: "8 Clients of 3 goroutines each wait with Lock for one key (plain locks: Lock with fencing does not queue) and hold it 5-15ms, so that every hand-off goes through the wait queue. With every node up, the queue's head Client is killed (connections closed, workers stopped, no Unlock: as by SIGKILL), and up to two more heads until a dead waiter's gap has been measured with every node up; then another node is partitioned and the queue node paused for 800ms while another waiting Client is killed; then a node (the queue node in the first cycle and every other one: the queue is lost) is killed and restarted empty after the guard while another is paused. Each killed Client is replaced at once. 0 violations; every live Client served; no Lock of a live waiter waits 10s (a quorum is up throughout); a release naming a dead waiter is followed by a grant within namedFor + 1.5 queuePoll + 250ms (725ms) with every node up; locks granted during each node fault; the queue and its mark always expire within queueLife and namedFor; and no key of the lock (the key, key:queue, key:queue:named) is left on any node once queueLife has passed after the run."},
	}
}

// Names returns the names of every scenario, in order.
func Names() []string {
	var out []string
	for _, s := range Scenarios() {
		out = append(out, s.Name)
	}
	return out
}

// Select returns the scenarios named, in the suite's order. Names are
// trimmed of spaces and empty ones are skipped, so that "baseline," (a
// trailing comma in a --scenario list) selects baseline; when no name is
// left, every scenario is selected. It returns an error naming the
// unknown ones.
func Select(names []string) ([]Scenario, error) {
	all := Scenarios()
	want := map[string]bool{}
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	if len(want) == 0 {
		return all, nil
	}
	var out []Scenario
	for _, s := range all {
		if want[s.Name] {
			out = append(out, s)
			delete(want, s.Name)
		}
	}
	if len(want) > 0 {
		var unknown []string
		for n := range want {
			unknown = append(unknown, n)
		}
		slices.Sort(unknown)
		return nil, fmt.Errorf("chaos: unknown scenario(s) %s; known: %s", strings.Join(unknown, ", "), strings.Join(Names(), ", "))
	}
	return out, nil
}
