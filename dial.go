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
// NewMultiLock; closing them is the caller's job. It does no I/O. URLs:
// redis://, rediss:// and unix:// (ParseURL), redis+cluster:// and
// rediss+cluster:// (a Redis Cluster as one node), redis+sentinel:// and
// rediss+sentinel:// (a master found through Sentinel). Where the URL
// leaves them unset, settings fail fast: 1s dial, read and write
// timeouts, one dial attempt, no command retries.
//
// Errors match ErrInvalid and name the URL, its password hidden: no
// URLs, an empty or unparsable URL, a bad setting, or one server given
// twice. Details: docs/api.md#newclients.
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
