package redlock

import (
	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/nodeurl"
)

// Dial returns a Client over one go-redis client per URL, each URL one
// independent Redis master (see New), built by NewClients with settings
// that make a node that is down fail fast. opts are New's, and
// WithRedisOptions adjusts the go-redis settings. It does no I/O.
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
	var adjust func(*redis.UniversalOptions)
	if cfg.redis != nil {
		adjust = cfg.redis.fn
	}
	clients, err := newClientsFrom(urls, adjust)
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
// a refused connection would show as ErrNodeTimeout rather than as
// "connection refused". go-redis still logs each failed dial through its
// process-wide logger (see redis.SetLogger), once per dial.
//
// Errors match ErrInvalid and name the URL, its password hidden: no
// URLs, an empty URL, a scheme other than those above, a URL go-redis
// cannot parse or settings it cannot use (a negative pool_size), and the
// same server, cluster or Sentinel master given twice (also
// ErrDuplicateNode). Servers reached under two names are caught later,
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
			return nil, causef([]error{ErrInvalid, ErrDuplicateNode}, "duplicate node: node %d %q is node %d again (%s)", i+1, spec.Shown, j+1, spec.ID)
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

// WithRedisOptions adjusts the go-redis settings of the clients Dial
// builds: fn is called once per URL with that URL's settings (the fail
// fast ones of NewClients where the URL left them unset) as
// redis.UniversalOptions, and what it sets is used: timeouts, pool,
// TLSConfig, credentials, Dialer, OnConnect, any field the server's,
// cluster's or Sentinel client's options share with UniversalOptions,
// and Addrs for the address(es). The kind of client is the URL's. For
// example, to let go-redis retry commands again:
//
//	redlock.WithRedisOptions(func(o *redis.UniversalOptions) { o.MaxRetries = 3 })
//
// It applies to Dial only: given to New, NewMultiLock or a call it is
// refused with ErrInvalid, and so is a nil fn. Default: none.
func WithRedisOptions(fn func(*redis.UniversalOptions)) Option {
	return func(c *config) {
		if fn == nil {
			c.err = invalidf("nil WithRedisOptions func")
			return
		}
		c.redis = &redisAdjust{fn: fn}
	}
}

// redisAdjust is WithRedisOptions' fn, behind a pointer so that a call's
// options can be told from the Client's.
type redisAdjust struct {
	fn func(*redis.UniversalOptions)
}

// closeClients closes go-redis clients, ignoring their errors: a
// client's Close only reports what was already lost.
func closeClients(clients []redis.UniversalClient) {
	for _, rc := range clients {
		_ = rc.Close()
	}
}
