package main

import (
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/cmd/redlock/internal/nodeurl"
)

// envNodes is the environment variable read when --nodes is not given.
const envNodes = "REDLOCK_NODES"

// nodeSpec is one parsed node URL: a single server (opts), a Redis
// Cluster (cluster) or a Sentinel-managed master (failover).
type nodeSpec struct {
	url      string // redacted, for messages and tables
	raw      string // as given, for newClients
	id       string // what makes two specs the same node
	opts     *redis.Options
	cluster  *redis.ClusterOptions
	failover *redis.FailoverOptions
}

// parseNodes parses a comma-separated list of node URLs, taken from flag
// when it is not empty, else from the REDLOCK_NODES variable. Each URL is
// parsed as redlock.NewClients parses it (redis://, rediss:// for TLS,
// unix://, redis+cluster://, redis+sentinel://; user:password for ACLs;
// db number as the path; options such as dial_timeout as query
// parameters). It returns a usage error naming the URL (with its
// password redacted) for an empty list or element, a bad scheme or URL,
// or a node given twice (same address and db).
func parseNodes(flag string, env func(string) string) ([]nodeSpec, error) {
	list, from := flag, "--nodes"
	if strings.TrimSpace(list) == "" {
		list, from = env(envNodes), envNodes
	}
	if strings.TrimSpace(list) == "" {
		return nil, usagef("no nodes: give --nodes redis://host:port,... or set %s", envNodes)
	}
	parts := strings.Split(list, ",")
	specs := make([]nodeSpec, 0, len(parts))
	seen := make(map[string]int, len(parts))
	for i, raw := range parts {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			return nil, usagef("%s: node %d of %d is empty (stray comma?)", from, i+1, len(parts))
		}
		ns, err := nodeurl.Parse(raw)
		shown := ns.Shown
		if err != nil {
			return nil, usagef("%s: node %d %q: %v", from, i+1, shown, err)
		}
		spec := nodeSpec{url: shown, raw: raw, id: ns.ID, opts: ns.Opts, cluster: ns.Cluster, failover: ns.Failover}
		if j, dup := seen[spec.id]; dup {
			return nil, usagef("%s: node %d %q is node %d %q again (%s): each node must be a distinct Redis master", from, i+1, shown, j+1, specs[j].url, spec.id)
		}
		seen[spec.id] = i
		specs = append(specs, spec)
	}
	return specs, nil
}

// newClients returns one go-redis client per node, with the library's
// settings for lock nodes (redlock.NewClients); the caller closes them.
func newClients(specs []nodeSpec) ([]redis.UniversalClient, error) {
	urls := make([]string, len(specs))
	for i, s := range specs {
		urls[i] = s.raw
	}
	return redlock.NewClients(urls...)
}

// closeAll closes every client.
func closeAll(cs []redis.UniversalClient) {
	for _, c := range cs {
		_ = c.Close()
	}
}
