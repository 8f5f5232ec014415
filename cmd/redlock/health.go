package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/seed543a70bd/redlock"
)

// statusHealthUsage is the part of status's help on the report without
// --key.
const statusHealthUsage = `Without --key or --election, status reports on the nodes themselves (the
library's Health): one line a node with whether it is healthy (answers,
is not a replica, is not a server an earlier node already is), its
server and version (Redis or Valkey), role and connected replicas,
uptime, persistence (aof, rdb, aof+rdb, none, or unknown when CONFIG GET
is refused), maxmemory-policy and the first 8 characters of its run_id.
Then why each unhealthy node failed, one "warning:" line per
configuration that weakens safety (one or two nodes, an evicting
maxmemory-policy, no persistence without the restart guard that
--restart-guard or REDLOCK_RESTART_GUARD says the lock's users set, a
replica, one server given twice), and whether a quorum is healthy.
Exits 0 when a quorum of nodes is healthy, 69 when not.
`

// statusHealth implements `redlock status` without --key: the nodes'
// health report. guard is --restart-guard's value.
func statusHealth(ctx context.Context, fs *flag.FlagSet, nodes, guard string, timeout time.Duration, env func(string) string, stdout, stderr io.Writer) int {
	const prog = "redlock status"
	var err error
	switch {
	case timeout <= 0:
		err = usagef("--timeout %v is not positive", timeout)
	case fs.NArg() > 0:
		err = usagef("unexpected argument %q", fs.Arg(0))
	}
	var specs []nodeSpec
	if err == nil {
		specs, err = parseNodes(nodes, env)
	}
	var d time.Duration
	if err == nil {
		d, err = restartGuard(guard, env)
	}
	if err != nil {
		return usageExit(err, prog, stderr)
	}
	clients, err := newClients(specs)
	if err != nil {
		return usageExit(libError(err), prog, stderr)
	}
	defer closeAll(clients)
	var opts []redlock.Option
	if d > 0 {
		opts = append(opts, redlock.WithRestartGuard(d))
	}
	r := &runner{specs: specs, clients: clients}
	c, err := redlock.New(clients, opts...)
	if err != nil {
		return usageExit(r.usageError(err), prog, stderr)
	}
	defer func() { _ = c.Close() }()
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h, err := c.Health(hctx)
	if err != nil && ctx.Err() != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, libError(err))
		return exitFailure
	}
	printHealth(stdout, r, &h, c.Quorum())
	if !h.Quorum {
		return exitUnavailable
	}
	return exitOK
}

// printHealth prints the per-node table of h, the nodes' errors, the
// warnings and the verdict.
func printHealth(w io.Writer, r *runner, h *redlock.Health, quorum int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tHEALTHY\tSERVER\tROLE\tUPTIME\tPERSISTENCE\tEVICTION\tRUN_ID")
	var errs []string
	for _, n := range h.Nodes {
		url := "node " + strconv.Itoa(n.Node+1)
		if n.Node >= 0 && n.Node < len(r.specs) {
			url = r.specs[n.Node].url
		}
		healthy := "yes"
		if !n.Healthy {
			healthy = "no"
		}
		if n.Err != nil {
			fmt.Fprintf(tw, "%s\tno\t-\t-\t-\t-\t-\t-\n", url)
			errs = append(errs, fmt.Sprintf("%s: %v", r.nodeName(n.Node), libError(n.Err)))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", url, healthy, dash(n.Server+" "+n.Version, n.Server == ""),
			roleString(n), dash(n.Uptime.String(), n.Server == ""), persistence(n), dash(n.MaxMemoryPolicy, n.MaxMemoryPolicy == ""), dash(shortID(n.RunID), n.RunID == ""))
	}
	_ = tw.Flush()
	for _, e := range errs {
		fmt.Fprintln(w, e)
	}
	for _, warn := range h.Warnings {
		fmt.Fprintln(w, "warning:", warn)
	}
	verdict := "locks can be taken"
	if !h.Quorum {
		verdict = "no lock can be taken"
	}
	fmt.Fprintf(w, "\n%d of %d nodes healthy; quorum %d: %s.\n", h.Healthy, len(h.Nodes), quorum, verdict)
}

// dash returns "-" when unknown, else s.
func dash(s string, unknown bool) string {
	if unknown {
		return "-"
	}
	return s
}

// roleString shows a node's role: "master", "master+2" (with connected
// replicas), "replica", "replica,rw" (one that takes writes); "-" when
// unknown.
func roleString(n redlock.NodeHealth) string {
	switch {
	case n.Role == "":
		return "-"
	case n.Role == "replica" && n.ReplicaWrites:
		return "replica,rw"
	case n.Replicas > 0:
		return n.Role + "+" + strconv.Itoa(n.Replicas)
	}
	return n.Role
}

// persistence shows a node's persistence: "aof", "rdb", "aof+rdb",
// "none", or "unknown" when CONFIG GET was refused and AOF is off.
func persistence(n redlock.NodeHealth) string {
	switch {
	case n.Server == "":
		return "-"
	case n.Save == "unknown" && n.AOF:
		return "aof"
	case n.Save == "unknown":
		return "unknown"
	case n.AOF && n.Save != "":
		return "aof+rdb"
	case n.AOF:
		return "aof"
	case n.Save != "":
		return "rdb"
	}
	return "none"
}
