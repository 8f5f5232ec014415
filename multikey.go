package redlock

import (
	"context"
	"time"
)

// TryLockKeys makes one attempt to acquire all of keys, as one lock, for
// ttl on a quorum of nodes. On each node the keys are taken in one script
// call, all or none; the quorum is counted over nodes. The *Lock covers
// every key: Unlock, Extend and Validity act on all of them, and Key
// joins them with ",". On a Redis Cluster or Ring node every key must
// share a hash tag, as in "{order:42}:items" and "{order:42}:stock".
//
// Errors are those of TryLock, and ErrInvalid (naming the key) for no
// keys, an empty or duplicate key, or keys a sharded node cannot take in
// one call; nothing is sent then. Details: docs/api.md#clienttrylockkeys.
func (c *Client) TryLockKeys(ctx context.Context, keys []string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	keys, cfg, err := c.prepareKeys(keys, opts)
	if err != nil {
		return nil, err
	}
	token, err := cfg.newToken()
	if err != nil {
		return nil, err
	}
	return c.tryLock(ctx, keys, ttl, token, cfg, nil, 0)
}

// LockKeys acquires all of keys, as one lock, for ttl on a quorum of
// nodes, retrying after a jittered delay (WithRetryDelay, default 50ms ±
// 50%) until it wins, ctx is done, or the retry budget (WithMaxTries,
// default: none) is spent. The keys are taken as by TryLockKeys. Like
// Lock, a refused attempt marks those of keys that readers hold (see
// TryRLock).
//
// Errors are those of TryLockKeys. When ctx ends the wait, the error
// matches ErrNotObtained, ctx.Err() and the reason of the last attempt
// that completed, as for Lock. Bad input (ErrInvalid) is returned at
// once, without retrying.
func (c *Client) LockKeys(ctx context.Context, keys []string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	keys, cfg, err := c.prepareKeys(keys, opts)
	if err != nil {
		return nil, err
	}
	return lockLoop(ctx, c, keys, ttl, cfg, nil)
}

// prepareKeys validates keys for every node and returns a copy of them
// with the call's configuration.
func (c *Client) prepareKeys(keys []string, opts []LockOption) ([]string, *config, error) {
	keys, err := validKeys(keys)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := c.callConfig(opts) // also refuses a nil *Client
	if err != nil {
		return nil, nil, err
	}
	if err := checkSharded(c, keys, cfg); err != nil {
		return nil, nil, err
	}
	return keys, cfg, nil
}

// validKeys checks the keys of a multi-key call and returns a copy, so that
// the caller may reuse its slice while the lock is held. Duplicates are
// refused: the scripts would count a duplicated key twice, and Unlock
// would find it already deleted and report the lock as not held.
func validKeys(keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, invalidf("no keys")
	}
	seen := make(map[string]int, len(keys))
	for i, k := range keys {
		if k == "" {
			return nil, invalidf("empty key at index %d", i)
		}
		if j, dup := seen[k]; dup {
			return nil, invalidf("duplicate key %q at indexes %d and %d", k, j, i)
		}
		seen[k] = i
	}
	return append([]string(nil), keys...), nil
}
