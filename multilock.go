package redlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// MultiLock is a Client whose locks must be held on every one of its
// nodes, not on a majority: NewMultiLock makes one. Every method of
// Client works on it unchanged, with the quorum (Client.Quorum) N, and so
// does everything built on a Client (an Election, Inspect, the lock
// family), with every node as the quorum.
//
// It trades availability for tolerance of data loss: while any node is
// down or slow, no lock can be won (and a held lock can be neither
// extended nor proven released), but a lock stays exclusive as long as one
// node still holds its key, so up to N-1 nodes may lose their data
// without two holders. A round still decides early: an attempt fails as
// soon as one node refuses or fails. See docs/multilock.md for when to
// pick which.
type MultiLock = Client

// NewMultiLock returns a MultiLock over nodes, which must be independent
// Redis masters, as for New: its locks need every node. It does no I/O.
// Options and errors are those of New.
func NewMultiLock(nodes []redis.UniversalClient, opts ...Option) (*MultiLock, error) {
	return newClient(nodes, len(nodes), opts, false)
}

// TryLockKeys makes one attempt to acquire all of keys, as one lock, for
// ttl on a quorum of nodes. On each node the keys are taken in one script
// call, all or none: a node where any key is held by another owner grants
// none of them and counts as a refusal. The quorum is counted over nodes,
// as for one key. The returned *Lock covers every key: Unlock, Extend and
// Validity act on all of them at once (a node where one key is missing
// does not count for Extend); Key joins them with ",", Keys lists them.
// Two locks whose key sets overlap exclude each other; disjoint sets do
// not.
//
// Keys must be non-empty and distinct; their order does not matter. When
// a node is a Redis Cluster client (*redis.ClusterClient), every key must
// hash to the same slot, because one script call runs on one slot: give
// the keys a common hash tag, the text between the first "{" and the next
// "}", as in "{order:42}:items" and "{order:42}:stock". The keys are not
// split into one call per slot, which would make a node's grant no longer
// all or nothing. When a node is a *redis.Ring, which shards on the hash
// tag itself, every key must have the same hash tag.
//
// Errors are those of TryLock, and ErrInvalid for no keys, an empty or
// duplicate key, or keys a sharded node cannot take in one call; the
// error names the offending key. Nothing is sent for invalid input.
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
	return c.lock(ctx, keys, ttl, cfg, nil)
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
	if err := c.checkSharded(keys, cfg); err != nil {
		return nil, nil, err
	}
	return keys, cfg, nil
}
