package redlock

import (
	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock/internal/nodeurl"
)

// Dial returns a Client over one go-redis client per URL, each URL one
// independent Redis master (see New), built by NewClients with settings
// that make a node that is down fail fast. opts are New's. It does no
// I/O. For other go-redis settings (a TLSConfig, a Dialer), build the
// clients yourself and call New.
//
// The Client owns the go-redis clients: its Close closes them, after its
// own background work. (A Client made by New leaves its clients to the
// caller.)
//
// Errors match ErrInvalid: those of NewClients, naming the URL with its
// password hidden, and those of New for opts.
func Dial(urls []string, opts ...Option) (*Client, error) {
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	clients, err := newClientsFrom(urls, nil)
	if err != nil {
		return nil, err
	}
	c, err := newClient(clients, 0, opts, true)
	if err != nil {
		closeClients(clients)
		return nil, err
	}
	return c, nil
}

// NewClients returns one go-redis client per URL, for New or
// NewMultiLock, or for a caller that adds hooks of its own; closing them
// is the caller's job. It does no I/O.
//
// A URL is parsed by go-redis: redis://host:port/db and rediss:// (TLS)
// by ParseURL, unix:///path/to/redis.sock too; redis+cluster:// and
// rediss+cluster:// (a Redis Cluster, one node of the lock: the key
// lives on the master of its slot) by ParseClusterURL; redis+sentinel://
// and rediss+sentinel:// (a master found through Sentinel, named by
// ?master_name=) by ParseFailoverURL. User and password go in the URL's
// user info, other settings in its query (dial_timeout=2s, pool_size=20,
// max_retries=3, ...).
//
// Where the URL leaves them unset, the settings are those of a node that
// must fail fast rather than go-redis's defaults: a dial timeout of 1s
// (go-redis: 5s), read and write timeouts of 1s (3s), one dial attempt
// (5, 100ms apart) and no command retries (3, with backoff). The lock's
// per-node timeout (WithNodeTimeout) bounds every round anyway; go-redis's
// retries would only keep requests to a dead node running behind it, and
// a refused connection would show as a timeout rather than as
// "connection refused". go-redis still logs each failed dial through its
// process-wide logger (see redis.SetLogger), once per dial.
//
// Errors match ErrInvalid and name the URL, its password hidden: no
// URLs, an empty URL, a scheme other than those above, a URL go-redis
// cannot parse or settings it cannot use (a negative pool_size), and the
// same server, cluster or Sentinel master given twice (also
// "duplicate node" in its message). Servers reached under two names are caught later,
// by run_id, as for New.
func NewClients(urls ...string) ([]redis.UniversalClient, error) {
	return newClientsFrom(urls, nil)
}

func newClientsFrom(urls []string, adjust func(*redis.UniversalOptions)) ([]redis.UniversalClient, error) {
	if len(urls) == 0 {
		return nil, invalidf("no node URLs")
	}
	specs := make([]nodeurl.Spec, len(urls))
	seen := make(map[string]int, len(urls))
	for i, raw := range urls {
		if raw == "" {
			return nil, invalidf("node %d of %d: empty URL", i+1, len(urls))
		}
		spec, err := nodeurl.Parse(raw)
		if err != nil {
			return nil, invalidf("node %d %q: %v", i+1, spec.Shown, err)
		}
		if j, dup := seen[spec.ID]; dup {
			return nil, causef([]error{ErrInvalid}, "duplicate node: node %d %q is node %d again (%s)", i+1, spec.Shown, j+1, spec.ID)
		}
		seen[spec.ID] = i
		specs[i] = spec
	}
	clients := make([]redis.UniversalClient, 0, len(specs))
	for i, spec := range specs {
		rc, err := spec.NewClient(adjust)
		if err != nil {
			closeClients(clients)
			return nil, invalidf("node %d %q: %v", i+1, spec.Shown, err)
		}
		clients = append(clients, rc)
	}
	return clients, nil
}

// closeClients closes go-redis clients, ignoring their errors: a
// client's Close only reports what was already lost.
func closeClients(clients []redis.UniversalClient) {
	for _, rc := range clients {
		_ = rc.Close()
	}
}
