package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// permitFamily builds the family of a permit of the semaphore key.
func (c *Client) permitFamily(key string, limit int, opts []LockOption) (*family, *config, error) {
	switch {
	case key == "":
		return nil, nil, invalidf("empty key")
	case limit < 1:
		return nil, nil, invalidf("semaphore limit %d is not positive", limit)
	}
	f := &family{kind: kindPermit, name: key, keys: []string{key}, wake: []string{key}, limit: limit,
		sem: wire.Semaphore{Name: key, Limit: limit}}
	if c != nil {
		f.need = max(c.need, semaphoreQuorum(len(c.nodes), limit))
	}
	cfg, err := newFamily(c, f, opts)
	return f, cfg, err
}

// TryAcquire makes one attempt to take a permit of the counting semaphore
// key, which admits at most limit holders at once, for ttl. A permit
// needs floor(limit*N/(limit+1))+1 of the N nodes, not a majority
// (docs/family.md), and every user of key must pass the same limit. The
// *Lock is the permit: Unlock returns it. key holds a sorted set on each
// node; give the semaphore a key of its own.
//
// Errors are those of TryLock (ErrContended when limit permits are held),
// and ErrInvalid for an empty key, limit < 1, WithFencing, or a limit
// other than the live permits'. Details: docs/api.md#clienttryacquire.
func (c *Client) TryAcquire(ctx context.Context, key string, limit int, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	f, cfg, err := c.permitFamily(key, limit, opts)
	if err != nil {
		return nil, err
	}
	return tryFamily(ctx, c, f, ttl, cfg)
}

// Acquire takes a permit of the semaphore key like TryAcquire, retrying
// like Lock until it wins or ctx is done; it wakes when a permit is
// returned (WithHandoff, default on). Errors are those of TryAcquire and
// Lock.
func (c *Client) Acquire(ctx context.Context, key string, limit int, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	f, cfg, err := c.permitFamily(key, limit, opts)
	if err != nil {
		return nil, err
	}
	return lockLoop(ctx, c, f.keys, ttl, cfg, f)
}

// errLimitMismatch is the node error of a permit refused because the
// semaphore's live permits were taken under another limit.
func errLimitMismatch(f *family) error {
	return wire.LimitMismatch(f.name, f.limit)
}

// limitMismatched reports whether a node refused a permit for its limit.
func limitMismatched(e *QuorumError) bool {
	for _, r := range e.Nodes {
		if r.Status == statusFailed && errors.Is(r.Err, ErrInvalid) {
			return true
		}
	}
	return false
}
