package main

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// envNodes is the environment variable read when --nodes is not given.
const envNodes = "REDLOCK_NODES"

// nodeSpec is one parsed node URL: a single server (opts), a Redis
// Cluster (cluster) or a Sentinel-managed master (failover).
type nodeSpec struct {
	url      string // redacted, for messages and tables
	id       string // what makes two specs the same node
	opts     *redis.Options
	cluster  *redis.ClusterOptions
	failover *redis.FailoverOptions
}

// parseNodes parses a comma-separated list of node URLs, taken from flag
// when it is not empty, else from the REDLOCK_NODES variable. Each URL is
// parsed by go-redis's ParseURL (redis://, rediss:// for TLS, unix://;
// user:password for ACLs; db number as the path; options such as
// dial_timeout as query parameters), ParseClusterURL (redis+cluster://,
// rediss+cluster://) or ParseFailoverURL (redis+sentinel://,
// rediss+sentinel://). It returns a usage error naming the URL (with its
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
		shown := redact(raw)
		spec, err := parseNode(raw)
		if err != nil {
			return nil, usagef("%s: node %d %q: %v", from, i+1, shown, err)
		}
		spec.url = shown
		if j, dup := seen[spec.id]; dup {
			return nil, usagef("%s: node %d %q is node %d %q again (%s): each node must be a distinct Redis master", from, i+1, shown, j+1, specs[j].url, spec.id)
		}
		seen[spec.id] = i
		specs = append(specs, spec)
	}
	return specs, nil
}

// Schemes of the node kinds beyond go-redis's ParseURL: a Redis Cluster
// (the lock's key lives on the master of its slot) or a master found
// through Sentinel. Each counts as one Redlock node.
const (
	clusterSuffix  = "+cluster"
	sentinelSuffix = "+sentinel"
)

// noScheme is the hint for a URL without a scheme.
const noScheme = "no scheme: write redis://host:port (or rediss:// for TLS)"

// parseNode parses one URL into a nodeSpec (url not set), with error
// messages that never repeat the URL itself (it may carry a password).
func parseNode(raw string) (nodeSpec, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		if strings.HasPrefix(raw, "unix:") {
			return nodeSpec{}, errors.New("write unix:///path/to/redis.sock")
		}
		// "host:port", "host", "[::1]:6379": a bare address.
		return nodeSpec{}, errors.New(noScheme)
	}
	base, kind := scheme, ""
	for _, k := range []string{clusterSuffix, sentinelSuffix} {
		if b, found := strings.CutSuffix(scheme, k); found {
			base, kind = b, k
		}
	}
	if kind == "" {
		o, err := parseServer(raw)
		if err != nil {
			return nodeSpec{}, err
		}
		return nodeSpec{opts: o, id: fmt.Sprintf("%s %s db %d", o.Network, o.Addr, o.DB)}, nil
	}
	if base != "redis" && base != "rediss" {
		return nodeSpec{}, fmt.Errorf("scheme %q is not redis%s:// or rediss%s://", scheme, kind, kind)
	}
	u, err := parseURL(raw)
	if err != nil {
		return nodeSpec{}, err
	}
	if err := checkHost(u); err != nil {
		return nodeSpec{}, err
	}
	inner := base + "://" + rest
	if kind == clusterSuffix {
		o, err := redis.ParseClusterURL(inner)
		if err != nil {
			return nodeSpec{}, goRedisError(err)
		}
		if err := checkPool(o.PoolSize, o.Protocol); err != nil {
			return nodeSpec{}, err
		}
		addrs := append([]string(nil), o.Addrs...)
		sort.Strings(addrs)
		return nodeSpec{cluster: o, id: "cluster " + strings.Join(addrs, ",")}, nil
	}
	o, err := redis.ParseFailoverURL(inner)
	if err != nil {
		return nodeSpec{}, goRedisError(err)
	}
	if o.MasterName == "" {
		return nodeSpec{}, errors.New("no master name: add ?master_name=NAME")
	}
	if err := checkPool(o.PoolSize, o.Protocol); err != nil {
		return nodeSpec{}, err
	}
	addrs := append([]string(nil), o.SentinelAddrs...)
	sort.Strings(addrs)
	return nodeSpec{failover: o, id: fmt.Sprintf("master %q db %d of sentinels %s", o.MasterName, o.DB, strings.Join(addrs, ","))}, nil
}

// parseServer parses the URL of one server (redis://, rediss://, unix://).
func parseServer(raw string) (*redis.Options, error) {
	u, err := parseURL(raw)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "redis", "rediss", "unix":
	default:
		return nil, fmt.Errorf("scheme %q is not redis://, rediss://, unix://, redis+cluster:// or redis+sentinel://", u.Scheme)
	}
	if u.Scheme != "unix" {
		if err := checkHost(u); err != nil {
			return nil, err
		}
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return nil, goRedisError(err)
	}
	if err := checkPool(o.PoolSize, o.Protocol); err != nil {
		return nil, err
	}
	return o, nil
}

// parseURL is url.Parse with an error that does not repeat the URL.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("not a URL: %v", err)
	}
	return u, nil
}

// checkHost checks that a TCP URL names a host and a valid port.
func checkHost(u *url.URL) error {
	if u.Hostname() == "" {
		return errors.New("no host: write redis://host:port")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %s is not in 1..65535", p)
		}
	}
	return nil
}

// checkPool rejects values go-redis's parsers accept but its clients
// cannot use: a negative pool size makes NewClient panic, and only RESP 2
// and 3 exist.
func checkPool(poolSize, protocol int) error {
	if poolSize < 0 {
		return fmt.Errorf("pool_size=%d is negative", poolSize)
	}
	if protocol != 0 && protocol != 2 && protocol != 3 {
		return fmt.Errorf("protocol=%d is not 2 or 3", protocol)
	}
	return nil
}

// goRedisError drops the "redis: " prefix of go-redis's parse errors.
func goRedisError(err error) error {
	return errors.New(strings.TrimPrefix(err.Error(), "redis: "))
}

// redact hides the password of a URL, also in strings that url.Parse
// rejects.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		// Sentinel URLs may carry the master's password as a parameter.
		if q := u.Query(); q.Has("password") || q.Has("sentinel_password") {
			for _, k := range []string{"password", "sentinel_password"} {
				if q.Has(k) {
					q.Set(k, "xxxxx")
				}
			}
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// Client defaults for settings the URL leaves unset. A node that is down
// must fail fast: the lock's per-node timeout bounds every request anyway,
// and go-redis's own defaults (5s dial timeout, 5 dial attempts, 3 command
// retries) only keep requests to a dead node running in the background.
const (
	defaultDialTimeout = time.Second
	defaultIOTimeout   = time.Second
)

// newClients returns one go-redis client per node; the caller closes them.
func newClients(specs []nodeSpec) []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(specs))
	for i, s := range specs {
		switch {
		case s.cluster != nil:
			o := *s.cluster
			failFast(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.DialerRetries)
			out[i] = redis.NewClusterClient(&o)
		case s.failover != nil:
			o := *s.failover
			failFast(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.DialerRetries)
			out[i] = redis.NewFailoverClient(&o)
		default:
			o := *s.opts
			failFast(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.DialerRetries)
			out[i] = redis.NewClient(&o)
		}
	}
	return out
}

// failFast sets the timeouts and dial attempts the URL left unset.
func failFast(dial, read, write *time.Duration, dialerRetries *int) {
	if *dial == 0 {
		*dial = defaultDialTimeout
	}
	if *read == 0 {
		*read = defaultIOTimeout
	}
	if *write == 0 {
		*write = defaultIOTimeout
	}
	if *dialerRetries == 0 {
		*dialerRetries = 1
	}
}

// closeAll closes every client.
func closeAll(cs []redis.UniversalClient) {
	for _, c := range cs {
		_ = c.Close()
	}
}
