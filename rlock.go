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
// TryLock and Lock on the same key. Readers share the key; a writer is
// refused while any live reader holds it, and readers while a writer
// does. A reader whose lease expired stops blocking writers.
//
// A writer that waits is not starved by readers that keep overlapping:
// each attempt of Lock (or LockKeys) that readers refuse marks the key
// on the nodes that refused it, for three retry delays (at least 100ms)
// plus the per-node timeout, or until the call's ctx deadline if that is
// sooner (at least 100ms), renewed by the next attempt. While the mark lasts, TryRLock and RLock
// are refused (ErrContended) unless the caller's token holds a live
// lease there, so the readers that hold the key leave and the writer
// gets in; the mark goes with the key at the last reader's release,
// whose announcement wakes the writer and not the waiting readers. A
// writer that gives up holds new readers off for the rest of its mark.
// TryLock does not mark: against readers that keep overlapping it keeps
// failing with ErrContended.
//
// Why a reader and a writer never both win: each needs a quorum (N/2+1)
// of the N nodes, two quorums share a node, and on that node the key
// holds either the writer's token or the readers' marker, never both:
// each script checks and sets the key atomically. On each node the lock
// key holds the value "redlock:readers", expiring with the latest live
// reader, and KeyName("readers", key) records each reader's expiry; a writer's
// ordinary acquire fails on the marker by itself, so the writer's path
// does not change.
//
// Errors are those of TryLock, and ErrInvalid for an empty key,
// WithFencing, or a key and KeyName("readers", key) that a sharded node cannot
// keep in one slot (give the key a hash tag, e.g. "{doc:7}").
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
