package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

const statusUsage = `Usage: redlock status --nodes URL,... (--key K | --election NAME) [--timeout 1s] [--key-prefix P]
       redlock status --nodes URL,... [--timeout 1s] [--restart-guard D]

Reads every node once (the library's Inspect) and changes nothing. For each
node: whether it answered, the holder (the first 8 characters of its ID, the
SHA-1 of its token, as 'redlock run -v' prints it; "-" when the key is free;
one per reader or permit of a read lock or semaphore), the holder's TTL on
that node, and the fencing counter (KeyName("fence", K) = K:fence, "-" when absent).
Then a summary: whether a holder is on a quorum of the nodes, the TTL that
quorum guarantees, the fence, and the holder's metadata ('redlock run'
stores "HOST pid PID: COMMAND"). --election NAME reads the key of the
election NAME (redlock:election:NAME, as 'redlock elect' and the
library's Election use it): its holder is the leader, its metadata
"term N: VALUE" (or "term N #S: VALUE" after the leader's S-th
Proclaim). Exits 0 when every node answered, 69 when some did not.

` + statusHealthUsage + `
Flags:
`

// cmdStatus implements `redlock status`.
func cmdStatus(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	var nodes, key, election, prefix, guard string
	var timeout time.Duration
	fs := newFlagSet("redlock status")
	fs.StringVar(&nodes, "nodes", "", "comma-separated node URLs (default: $"+envNodes+")")
	fs.StringVar(&key, "key", "", "the lock's key (this or --election)")
	fs.StringVar(&election, "election", "", "the `name` of an election, whose key is read instead of --key")
	fs.StringVar(&prefix, "key-prefix", "", "`prefix` of the keys on the nodes, as given to redlock run (default: $"+envKeyPrefix+")")
	durationVar(fs, &timeout, "timeout", time.Second, "how long to wait for each node (a `duration`)")
	fs.StringVar(&guard, "restart-guard", "", "without --key: the restart guard (a `duration`) the lock's users set, which answers the warning of nodes without persistence (default: $"+envRestartGuard+", else off)")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, fs, statusUsage)
			return exitOK
		}
		return usageExit(err, "redlock status", stderr)
	}
	prefix = keyPrefix(prefix, env)
	var err error
	switch {
	case key != "" && election != "":
		err = usagef("--key and --election both given: give one")
	case election != "":
		key = redlock.KeyName("election", election)
	case key == "":
		return statusHealth(ctx, fs, nodes, guard, timeout, env, stdout, stderr)
	}
	switch {
	case err != nil:
	case guard != "":
		err = usagef("--restart-guard applies to the report without --key")
	case timeout <= 0:
		err = usagef("--timeout %v is not positive", timeout)
	case fs.NArg() > 0:
		err = usagef("unexpected argument %q", fs.Arg(0))
	}
	var specs []nodeSpec
	if err == nil {
		specs, err = parseNodes(nodes, env)
	}
	if err != nil {
		return usageExit(err, "redlock status", stderr)
	}
	clients, err := newClients(specs)
	if err != nil {
		return usageExit(libError(err), "redlock status", stderr)
	}
	defer closeAll(clients)
	r := &runner{specs: specs, clients: clients}
	if err := sameServer(specs, serverIDs(ctx, specs, clients, timeout)); err != nil {
		return usageExit(err, "redlock status", stderr)
	}
	var opts []redlock.Option
	if prefix != "" {
		opts = append(opts, redlock.WithKeyPrefix(prefix))
	}
	c, err := redlock.New(clients, opts...)
	if err != nil {
		return usageExit(r.usageError(err), "redlock status", stderr)
	}
	defer func() { _ = c.Close() }()
	h, err := c.Inspect(ctx, key, redlock.WithNodeTimeout(timeout))
	switch {
	case errors.Is(err, redlock.ErrInvalid):
		return usageExit(r.usageError(err), "redlock status", stderr)
	case err != nil:
		fmt.Fprintf(stderr, "redlock status: %v\n", libError(err))
		return exitFailure
	}
	printStatus(stdout, key, r, h)
	for _, n := range h.Nodes {
		if n.Err != nil {
			return exitUnavailable
		}
	}
	return exitOK
}

// serverIDs returns each node's run_id (INFO server), "" when unknown: a
// Redis Cluster node (its shards have run_ids of their own), a node that
// did not answer within timeout, or an ACL that refuses INFO.
func serverIDs(ctx context.Context, specs []nodeSpec, clients []redis.UniversalClient, timeout time.Duration) []string {
	ids := make([]string, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		if specs[i].cluster != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ictx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			out := make(chan string, 1)
			go func() {
				info, err := c.Info(ictx, "server").Result()
				if err != nil {
					out <- ""
					return
				}
				out <- infoField(info, "run_id")
			}()
			select {
			case ids[i] = <-out:
			case <-ictx.Done(): // a client that ignores deadlines
			}
		}()
	}
	wg.Wait()
	return ids
}

// sameServer returns a usage error when two nodes answered with one
// run_id: one server given under two names (redis://127.0.0.1:P and
// redis://localhost:P), which parseNodes cannot tell from the URLs. The
// library refuses such nodes the same way (redlock.ErrInvalid) on a
// lock's first round, but Inspect does not identify the nodes; status
// would count the server's key twice towards a quorum.
func sameServer(specs []nodeSpec, runIDs []string) error {
	seen := make(map[string]int, len(runIDs))
	for i, id := range runIDs {
		if id == "" {
			continue
		}
		if j, dup := seen[id]; dup {
			return usagef("node %d %q is node %d %q again (the same server, run_id %s): each node must be a distinct Redis master",
				i+1, specs[i].url, j+1, specs[j].url, id)
		}
		seen[id] = i
	}
	return nil
}

// printStatus prints the per-node table and the summary of h.
func printStatus(w io.Writer, key string, r *runner, h *redlock.Holding) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tREACHABLE\tHOLDER\tPTTL\tFENCE")
	onNodes := map[string]int{} // holder ID: on how many nodes
	var order []string          // holder IDs, by first sight
	up := 0
	var errs []string
	for _, n := range h.Nodes {
		name := r.nodeName(n.Node)
		url := "node " + strconv.Itoa(n.Node+1)
		if n.Node >= 0 && n.Node < len(r.specs) {
			url = r.specs[n.Node].url
		}
		if n.Err != nil {
			fmt.Fprintf(tw, "%s\tno\t-\t-\t-\n", url)
			errs = append(errs, fmt.Sprintf("%s: %v", name, libError(n.Err)))
			continue
		}
		up++
		holder, pttl, fence := "-", "-", "-"
		if n.Kind == "other" {
			holder = "?" // a value none of the library's locks writes
		}
		if len(n.Holders) > 0 {
			ids := make([]string, len(n.Holders))
			for i, x := range n.Holders {
				ids[i] = shortID(x.ID)
				if onNodes[ids[i]] == 0 {
					order = append(order, ids[i])
				}
				onNodes[ids[i]]++
			}
			holder = strings.Join(ids, ",")
			pttl = ttlString(n.Holders[0].TTL)
		}
		if n.Fence != 0 {
			fence = strconv.FormatInt(n.Fence, 10)
		}
		fmt.Fprintf(tw, "%s\tyes\t%s\t%s\t%s\n", url, holder, pttl, fence)
	}
	_ = tw.Flush()
	for _, e := range errs {
		fmt.Fprintln(w, e)
	}

	total := len(h.Nodes)
	quorum := total/2 + 1
	fmt.Fprintf(w, "\n%d of %d nodes reachable; quorum %d.\n", up, total, quorum)
	switch {
	case h.State == "held":
		for _, x := range h.Holders {
			id := shortID(x.ID)
			fmt.Fprintf(w, "%q is held by %s on %d of %d nodes, for at least %v (what a quorum guarantees)", key, id, onNodes[id], total, x.TTL.Round(time.Millisecond))
			if h.Fence != 0 && len(h.Holders) == 1 {
				fmt.Fprintf(w, ", fence %d", h.Fence)
			}
			fmt.Fprintln(w, ".")
			if x.Metadata != "" {
				fmt.Fprintf(w, "  metadata: %s\n", x.Metadata)
			}
		}
	case len(order) == 0 && up >= quorum:
		fmt.Fprintf(w, "%q is free on every reachable node.\n", key)
	case len(order) == 0:
		fmt.Fprintf(w, "%q is free on every reachable node, but too few nodes are reachable to take it.\n", key)
	default:
		fmt.Fprintf(w, "%q has no holder with a quorum:", key)
		for _, id := range order {
			fmt.Fprintf(w, " %s on %d;", id, onNodes[id])
		}
		fmt.Fprintln(w, " (an attempt in progress, a lost lock, or keys left to expire)")
	}
}

// ttlString shows a holder's TTL on one node: "no expiry" for a key
// without one.
func ttlString(d time.Duration) string {
	if d < 0 {
		return "no expiry"
	}
	return d.String()
}
