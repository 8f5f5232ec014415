package redlock

import (
	"context"
	"time"
)

// readFamily builds the family of a read lock on key.
func (c *Client) readFamily(key string, opts []LockOption) (*family, *config, error) {
	if key == "" {
		return nil, nil, invalidf("empty key")
	}
	f := &family{kind: kindRead, name: key, keys: []string{key, readersKey(key)}, wake: []string{key}}
	cfg, err := newFamily(c, f, opts)
	return f, cfg, err
}

// TryRLock makes one attempt to take a read lock on key for ttl on a
// quorum of nodes: the read side of a read-write lock whose write side is
// TryLock and Lock on key. Readers share the key; a writer is refused
// while a live reader holds it, readers while a writer does. A waiting
// Lock marks the key so that overlapping readers cannot keep it out for
// good: new readers are refused (ErrContended) while the mark lasts.
//
// Errors are those of TryLock, and ErrInvalid for an empty key,
// WithFencing, or a key a sharded node cannot keep with its readers in
// one slot (use a hash tag, "{doc:7}"). Details: docs/api.md#clienttryrlock.
func (c *Client) TryRLock(ctx context.Context, key string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	f, cfg, err := c.readFamily(key, opts)
	if err != nil {
		return nil, err
	}
	return tryFamily(ctx, c, f, ttl, cfg)
}

// RLock takes a read lock on key like TryRLock, retrying like Lock until
// it wins or ctx is done; it wakes when the writer releases (WithHandoff,
// default on), not when the last reader does: a waiting writer's mark
// (see TryRLock) then holds it off anyway. Errors are those of TryRLock
// and Lock.
func (c *Client) RLock(ctx context.Context, key string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	f, cfg, err := c.readFamily(key, opts)
	if err != nil {
		return nil, err
	}
	return lockLoop(ctx, c, f.keys, ttl, cfg, f)
}
