package redlock

import (
	"context"
	"strings"
	"time"
)

// splitPath normalizes path (one leading and one trailing "/" dropped)
// and returns its components.
func splitPath(path string) ([]string, error) {
	p := strings.TrimSuffix(strings.TrimPrefix(path, "/"), "/")
	if p == "" {
		return nil, invalidf("empty path %q", path)
	}
	comps := strings.Split(p, "/")
	for i, c := range comps {
		switch c {
		case "":
			return nil, invalidf("path %q has an empty component at position %d", path, i+1)
		case ".", "..":
			return nil, invalidf("path %q has a %q component at position %d: paths are not resolved, give the folder itself", path, c, i+1)
		}
	}
	return comps, nil
}

// pathFamily builds the family of a folder lock on path.
func (c *Client) pathFamily(path string, opts []LockOption) (*family, *config, error) {
	comps, err := splitPath(path)
	if err != nil {
		return nil, nil, err
	}
	holders, belows := pathKeys(comps)
	f := &family{
		kind: kindPath,
		name: strings.Join(comps, "/"),
		keys: append(holders, belows...),
		wake: holders,
	}
	cfg, err := newFamily(c, f, opts)
	return f, cfg, err
}

// TryLockPath makes one attempt to lock the folder path for ttl on a
// quorum of nodes. "a/b" and "/a/b/" are one folder; a path lock
// conflicts with another owner's live lock on the path, an ancestor or a
// descendant, by whole components ("a/b" with "a" and "a/b/c", not
// "a/bc"). An attempt costs O(depth) reads per node however many locks
// are held. Key returns the normalized path.
//
// Errors are those of TryLock, and ErrInvalid for an empty path or
// component, a "." or ".." component, WithFencing, or a tree a sharded
// node cannot keep in one slot. Details: docs/api.md#clienttrylockpath.
func (c *Client) TryLockPath(ctx context.Context, path string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	f, cfg, err := c.pathFamily(path, opts)
	if err != nil {
		return nil, err
	}
	return tryFamily(ctx, c, f, ttl, cfg)
}

// LockPath locks the folder path like TryLockPath, retrying like Lock
// (WithRetryDelay, default 50ms ± 50%; WithMaxTries, default none) until
// it wins or ctx is done. A waiter wakes as soon as a lock on the path,
// an ancestor or a descendant is released (WithHandoff, default on).
// Errors are those of TryLockPath and Lock.
func (c *Client) LockPath(ctx context.Context, path string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	f, cfg, err := c.pathFamily(path, opts)
	if err != nil {
		return nil, err
	}
	return lockLoop(ctx, c, f.keys, ttl, cfg, f)
}
