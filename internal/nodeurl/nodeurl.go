// Package nodeurl parses the URLs of Redlock nodes and builds their
// go-redis clients with settings for lock nodes: redlock.Dial and
// redlock.NewClients use it, and so does the CLI, so that the settings
// live in one place.
//
// go-redis assumptions, checked against v9.23.0: ParseURL,
// ParseClusterURL and ParseFailoverURL accept options as query
// parameters and return errors that begin with "redis: "; a negative
// PoolSize makes the client constructors panic; DialerRetries <= 0 means
// 5 dial attempts and MaxRetries 0 means 3 command retries, -1 none.
package nodeurl

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

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

// Settings for what the URL leaves unset. A lock node must fail fast:
// the lock's per-node timeout bounds every request anyway, and go-redis's
// own defaults (5s dial timeout, 5 dial attempts 100ms apart, 3 command
// retries with backoff) only keep requests to a dead node running in the
// background, and turn a refused connection, known at once, into a
// per-node timeout.
const (
	DialTimeout   = time.Second
	IOTimeout     = time.Second // read and write
	DialerRetries = 1           // dial attempts
	MaxRetries    = -1          // no command retries
)

// NewClient returns the go-redis client of s, with the fail-fast
// settings where the URL left them unset. adjust, when not nil, is then
// called with those settings as UniversalOptions and may change them:
// every field that the client's options share with UniversalOptions (by
// name and type) is read back, and Addrs sets the address(es); the kind
// of client (server, cluster, Sentinel) is the URL's. An adjustment that
// go-redis cannot use (a negative PoolSize, an unknown Protocol, no
// address) is an error.
func (s Spec) NewClient(adjust func(*redis.UniversalOptions)) (redis.UniversalClient, error) {
	switch {
	case s.Cluster != nil:
		o := *s.Cluster
		failFast(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.DialerRetries, &o.MaxRetries)
		if adjust != nil {
			u := redis.UniversalOptions{}
			copyShared(&u, &o)
			adjust(&u)
			copyShared(&o, &u)
			if err := checkAdjusted(o.PoolSize, o.Protocol, len(o.Addrs)); err != nil {
				return nil, err
			}
		}
		return redis.NewClusterClient(&o), nil
	case s.Failover != nil:
		o := *s.Failover
		failFast(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.DialerRetries, &o.MaxRetries)
		if adjust != nil {
			u := redis.UniversalOptions{}
			copyShared(&u, &o)
			u.Addrs = append([]string(nil), o.SentinelAddrs...)
			adjust(&u)
			copyShared(&o, &u)
			o.SentinelAddrs = u.Addrs
			if err := checkAdjusted(o.PoolSize, o.Protocol, len(o.SentinelAddrs)); err != nil {
				return nil, err
			}
		}
		return redis.NewFailoverClient(&o), nil
	case s.Opts != nil:
		o := *s.Opts
		failFast(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.DialerRetries, &o.MaxRetries)
		if adjust != nil {
			u := redis.UniversalOptions{}
			copyShared(&u, &o)
			u.Addrs = []string{o.Addr}
			adjust(&u)
			copyShared(&o, &u)
			if len(u.Addrs) != 1 {
				return nil, fmt.Errorf("%d addresses for one server: give Addrs one", len(u.Addrs))
			}
			o.Addr = u.Addrs[0]
			if err := checkAdjusted(o.PoolSize, o.Protocol, 1); err != nil {
				return nil, err
			}
		}
		return redis.NewClient(&o), nil
	}
	return nil, errors.New("empty node spec")
}

// failFast sets the timeouts, dial attempts and command retries the URL
// left unset.
func failFast(dial, read, write *time.Duration, dialerRetries, maxRetries *int) {
	if *dial == 0 {
		*dial = DialTimeout
	}
	if *read == 0 {
		*read = IOTimeout
	}
	if *write == 0 {
		*write = IOTimeout
	}
	if *dialerRetries == 0 {
		*dialerRetries = DialerRetries
	}
	if *maxRetries == 0 {
		*maxRetries = MaxRetries
	}
}

func checkAdjusted(poolSize, protocol, addrs int) error {
	if addrs == 0 {
		return errors.New("no address left after WithRedisOptions")
	}
	return checkPool(poolSize, protocol)
}

// copyShared copies into *dst the exported fields of *src that *dst has
// too, with the same name and type: the settings a server's, a
// cluster's or a Sentinel client's options share with UniversalOptions.
func copyShared(dst, src any) {
	d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	st, dt := s.Type(), d.Type()
	for i := range st.NumField() {
		f := st.Field(i)
		if !f.IsExported() {
			continue
		}
		g, ok := dt.FieldByName(f.Name)
		if !ok || !g.IsExported() || g.Type != f.Type || len(g.Index) != 1 {
			continue
		}
		d.Field(g.Index[0]).Set(s.Field(i))
	}
}
