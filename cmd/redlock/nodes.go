package main

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// envNodes is the environment variable read when --nodes is not given.
const envNodes = "REDLOCK_NODES"

// nodeSpec is one parsed node URL.
type nodeSpec struct {
	url  string // redacted, for messages and tables
	opts *redis.Options
}

// parseNodes parses a comma-separated list of node URLs, taken from flag
// when it is not empty, else from the REDLOCK_NODES variable. Each URL is
// parsed by go-redis's ParseURL (redis://, rediss:// for TLS, unix://;
// user:password for ACLs; db number as the path; options such as
// dial_timeout as query parameters). It returns a usage error naming the
// URL (with its password redacted) for an empty list or element, a bad
// scheme or URL, or a node given twice (same address and db).
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
		o, err := parseNode(raw)
		if err != nil {
			return nil, usagef("%s: node %d %q: %v", from, i+1, shown, err)
		}
		id := fmt.Sprintf("%s %s/%d", o.Network, o.Addr, o.DB)
		if j, dup := seen[id]; dup {
			return nil, usagef("%s: node %d %q is node %d again (%s db %d): each node must be a distinct Redis master", from, i+1, shown, j+1, o.Addr, o.DB)
		}
		seen[id] = i
		specs = append(specs, nodeSpec{url: shown, opts: o})
	}
	return specs, nil
}

// parseNode parses one URL, with error messages that never repeat the URL
// itself (it may carry a password).
func parseNode(raw string) (*redis.Options, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("not a URL: %v", err)
	}
	switch u.Scheme {
	case "redis", "rediss", "unix":
	case "":
		return nil, errors.New("no scheme: write redis://host:port (or rediss:// for TLS)")
	default:
		if u.Opaque != "" && !strings.Contains(raw, "://") { // "localhost:6379" parses as scheme "localhost"
			return nil, errors.New("no scheme: write redis://host:port (or rediss:// for TLS)")
		}
		return nil, fmt.Errorf("scheme %q is not redis://, rediss:// or unix://", u.Scheme)
	}
	if u.Scheme != "unix" {
		if u.Hostname() == "" {
			return nil, errors.New("no host: write redis://host:port")
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return nil, fmt.Errorf("port %s is not in 1..65535", p)
			}
		}
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "redis: "))
	}
	// Values ParseURL accepts but go-redis cannot use: a negative pool size
	// makes NewClient panic, and only RESP 2 and 3 exist.
	if o.PoolSize < 0 {
		return nil, fmt.Errorf("pool_size=%d is negative", o.PoolSize)
	}
	if o.Protocol != 0 && o.Protocol != 2 && o.Protocol != 3 {
		return nil, fmt.Errorf("protocol=%d is not 2 or 3", o.Protocol)
	}
	return o, nil
}

// redact hides the password of a URL, also in strings that url.Parse
// rejects.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
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
		o := *s.opts
		if o.DialTimeout == 0 {
			o.DialTimeout = defaultDialTimeout
		}
		if o.ReadTimeout == 0 {
			o.ReadTimeout = defaultIOTimeout
		}
		if o.WriteTimeout == 0 {
			o.WriteTimeout = defaultIOTimeout
		}
		if o.DialerRetries == 0 {
			o.DialerRetries = 1
		}
		out[i] = redis.NewClient(&o)
	}
	return out
}

// closeAll closes every client.
func closeAll(cs []redis.UniversalClient) {
	for _, c := range cs {
		_ = c.Close()
	}
}
