package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

const statusUsage = `Usage: redlock status --nodes URL,... --key K [--timeout 1s] [--key-prefix P]

For each node: whether it answered, the holder's token (its first 8
characters, "-" when the key is free), the key's PTTL, and the fencing
counter (FenceKey(K) = K:fence, "-" when absent). Then a summary: whether
one token holds a quorum of the nodes. Exits 0 when every node answered,
69 when some did not.

Flags:
`

// tokenPrefix is how much of a holder's token status shows.
const tokenPrefix = 8

// nodeStatus is what status learnt from one node.
type nodeStatus struct {
	url   string
	err   error         // not reachable
	token string        // "" when the key is absent
	pttl  time.Duration // -2: no key, -1: no expiry
	fence string        // "" when absent
	runID string        // the server's run_id (INFO server), "" when unknown
}

// cmdStatus implements `redlock status`.
func cmdStatus(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	var nodes, key, prefix string
	var timeout time.Duration
	fs := newFlagSet("redlock status")
	fs.StringVar(&nodes, "nodes", "", "comma-separated node URLs (default: $"+envNodes+")")
	fs.StringVar(&key, "key", "", "the lock's key (required)")
	fs.StringVar(&prefix, "key-prefix", "", "`prefix` of the keys on the nodes, as given to redlock run (default: $"+envKeyPrefix+")")
	durationVar(fs, &timeout, "timeout", time.Second, "how long to wait for each node (a `duration`)")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, fs, statusUsage)
			return exitOK
		}
		return usageExit(err, "redlock status", stderr)
	}
	stored := keyPrefix(prefix, env) + key
	var err error
	switch {
	case key == "":
		err = usagef("--key is required")
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

	res := make([]nodeStatus, len(specs))
	var wg sync.WaitGroup
	for i := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = probeNode(ctx, clients[i], stored, timeout, specs[i].cluster == nil)
			res[i].url = specs[i].url
		}()
	}
	wg.Wait()
	if err := sameServer(specs, res); err != nil {
		return usageExit(err, "redlock status", stderr)
	}
	printStatus(stdout, key, res)
	for _, r := range res {
		if r.err != nil {
			return exitUnavailable
		}
	}
	return exitOK
}

// probeNode reads the key, its PTTL and its fence counter from one node,
// and, when identify is set, its run_id, bounded by timeout even if the
// client ignores context deadlines.
func probeNode(ctx context.Context, c redis.UniversalClient, key string, timeout time.Duration, identify bool) nodeStatus {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := make(chan nodeStatus, 1)
	go func() {
		var get, fence *redis.StringCmd
		var pttl *redis.DurationCmd
		var info *redis.StringCmd
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			get = p.Get(ctx, key)
			pttl = p.PTTL(ctx, key)
			fence = p.Get(ctx, redlock.FenceKey(key))
			if identify {
				info = p.Info(ctx, "server")
			}
			return nil
		})
		var s nodeStatus
		if err := pttl.Err(); err != nil {
			s.err = err // PTTL works on any key: the node did not answer, or refused us (NOAUTH)
			out <- s
			return
		}
		s.token, s.pttl, s.fence = value(get), pttl.Val(), value(fence)
		if info != nil && info.Err() == nil { // an ACL may refuse INFO: then unknown
			s.runID = infoField(info.Val(), "run_id")
		}
		out <- s
	}()
	select {
	case s := <-out:
		return s
	case <-ctx.Done():
		return nodeStatus{err: fmt.Errorf("no answer within %v", timeout)}
	}
}

// sameServer returns a usage error when two nodes answered with one
// run_id: one server given under two names (redis://127.0.0.1:P and
// redis://localhost:P), which parseNodes cannot tell from the URLs. The
// library refuses such nodes the same way (redlock.ErrDuplicateNode);
// status would count the server's key twice towards a quorum. A Redis
// Cluster node is not identified: its shards have run_ids of their own.
func sameServer(specs []nodeSpec, res []nodeStatus) error {
	seen := make(map[string]int, len(res))
	for i, r := range res {
		if r.runID == "" {
			continue
		}
		if j, dup := seen[r.runID]; dup {
			return usagef("node %d %q is node %d %q again (the same server, run_id %s): each node must be a distinct Redis master",
				i+1, specs[i].url, j+1, specs[j].url, r.runID)
		}
		seen[r.runID] = i
	}
	return nil
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

// printStatus prints the per-node table and the summary.
func printStatus(w io.Writer, key string, res []nodeStatus) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tREACHABLE\tHOLDER\tPTTL\tFENCE")
	holders := map[string]int{}
	up := 0
	var errs []string
	for i, r := range res {
		if r.err != nil {
			fmt.Fprintf(tw, "%s\tno\t-\t-\t-\n", r.url)
			errs = append(errs, fmt.Sprintf("node %d (%s): %v", i+1, r.url, r.err))
			continue
		}
		up++
		holder, pttl, fence := "-", "-", "-"
		if r.token != "" {
			holder = shortToken(r.token)
			holders[holder]++
			switch {
			case r.pttl == -1:
				pttl = "no expiry"
			case r.pttl >= 0:
				pttl = r.pttl.String()
			}
		}
		if r.fence != "" {
			fence = r.fence
		}
		fmt.Fprintf(tw, "%s\tyes\t%s\t%s\t%s\n", r.url, holder, pttl, fence)
	}
	_ = tw.Flush()
	for _, e := range errs {
		fmt.Fprintln(w, e)
	}

	quorum := len(res)/2 + 1
	fmt.Fprintf(w, "\n%d of %d nodes reachable; quorum %d.\n", up, len(res), quorum)
	switch {
	case len(holders) == 0 && up >= quorum:
		fmt.Fprintf(w, "%q is free on every reachable node.\n", key)
	case len(holders) == 0:
		fmt.Fprintf(w, "%q is free on every reachable node, but too few nodes are reachable to take it.\n", key)
	default:
		toks := make([]string, 0, len(holders))
		for t := range holders {
			toks = append(toks, t)
		}
		sort.Slice(toks, func(i, j int) bool {
			return holders[toks[i]] > holders[toks[j]] || holders[toks[i]] == holders[toks[j]] && toks[i] < toks[j]
		})
		if holders[toks[0]] >= quorum {
			fmt.Fprintf(w, "%q is held by %s on %d of %d nodes.\n", key, toks[0], holders[toks[0]], len(res))
		} else {
			fmt.Fprintf(w, "%q has no holder with a quorum:", key)
			for _, t := range toks {
				fmt.Fprintf(w, " %s on %d;", t, holders[t])
			}
			fmt.Fprintln(w, " (an attempt in progress, a lost lock, or keys left to expire)")
		}
	}
}

// shortToken returns the first tokenPrefix characters of a token.
func shortToken(t string) string {
	if len(t) > tokenPrefix {
		return t[:tokenPrefix]
	}
	return t
}
