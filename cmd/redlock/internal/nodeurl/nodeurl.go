// Package nodeurl parses the node URLs the CLI is given, so that it can
// name each node in messages and tables with its passwords hidden, tell a
// node given twice, and tell a Redis Cluster from a server. It parses
// them as redlock.NewClients does (the clients themselves are built by
// NewClients); the library's own parser is internal to the root module,
// which a released module does not import, so the CLI has its copy of
// the parsing and redaction. A change to one is made to both; the
// fuzz tests check that what this accepts, NewClients accepts.
//
// go-redis assumptions, checked against v9.23.0: ParseURL,
// ParseClusterURL and ParseFailoverURL accept options as query
// parameters and return errors that begin with "redis: "; a negative
// PoolSize makes the client constructors panic.
package nodeurl

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Spec is one parsed node URL: a single server (Opts), a Redis Cluster
// (Cluster) or a Sentinel-managed master (Failover); exactly one is set.
type Spec struct {
	Shown    string // the URL with its passwords redacted, for messages
	ID       string // what makes two specs the same node
	Opts     *redis.Options
	Cluster  *redis.ClusterOptions
	Failover *redis.FailoverOptions
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

// Parse parses one node URL: redis://, rediss:// (TLS) and unix:// by
// go-redis's ParseURL, redis+cluster:// and rediss+cluster:// by
// ParseClusterURL, redis+sentinel:// and rediss+sentinel:// by
// ParseFailoverURL. Its errors never repeat the URL, which may carry a
// password: the caller names it by Redact.
func Parse(raw string) (Spec, error) {
	spec, err := parse(raw)
	spec.Shown = Redact(raw)
	return spec, err
}

func parse(raw string) (Spec, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		if strings.HasPrefix(raw, "unix:") {
			return Spec{}, errors.New("write unix:///path/to/redis.sock")
		}
		// "host:port", "host", "[::1]:6379": a bare address.
		return Spec{}, errors.New(noScheme)
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
			return Spec{}, err
		}
		return Spec{Opts: o, ID: fmt.Sprintf("%s %s db %d", o.Network, o.Addr, o.DB)}, nil
	}
	if base != "redis" && base != "rediss" {
		return Spec{}, fmt.Errorf("scheme %q is not redis%s:// or rediss%s://", scheme, kind, kind)
	}
	u, err := parseURL(raw)
	if err != nil {
		return Spec{}, err
	}
	if err := checkHost(u); err != nil {
		return Spec{}, err
	}
	inner := base + "://" + rest
	if kind == clusterSuffix {
		o, err := redis.ParseClusterURL(inner)
		if err != nil {
			return Spec{}, goRedisError(err)
		}
		if err := checkPool(o.PoolSize, o.Protocol); err != nil {
			return Spec{}, err
		}
		addrs := append([]string(nil), o.Addrs...)
		sort.Strings(addrs)
		return Spec{Cluster: o, ID: "cluster " + strings.Join(addrs, ",")}, nil
	}
	o, err := redis.ParseFailoverURL(inner)
	if err != nil {
		return Spec{}, goRedisError(err)
	}
	if o.MasterName == "" {
		return Spec{}, errors.New("no master name: add ?master_name=NAME")
	}
	if err := checkPool(o.PoolSize, o.Protocol); err != nil {
		return Spec{}, err
	}
	addrs := append([]string(nil), o.SentinelAddrs...)
	sort.Strings(addrs)
	return Spec{Failover: o, ID: fmt.Sprintf("master %q db %d of sentinels %s", o.MasterName, o.DB, strings.Join(addrs, ","))}, nil
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

// Redact hides the passwords of a URL (its user info, and the password
// and sentinel_password parameters), also in strings that url.Parse
// rejects.
func Redact(raw string) string {
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
