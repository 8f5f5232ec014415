package redlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Locker is what Client (a majority of nodes) and MultiLock (every
// node) share, so that code can take either: acquisitions of a key or of
// several keys, Do, and Close. See Client for what each method does and
// returns; the lock family (TryLockPath, TryRLock, TryAcquire) is the
// Client's alone.
type Locker interface {
	TryLock(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error)
	Lock(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error)
	TryLockKeys(ctx context.Context, keys []string, ttl time.Duration, opts ...Option) (*Lock, error)
	LockKeys(ctx context.Context, keys []string, ttl time.Duration, opts ...Option) (*Lock, error)
	Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) error, opts ...Option) error
	Close() error
}

var (
	_ Locker = (*Client)(nil)
	_ Locker = (*MultiLock)(nil)
)

// MultiLock acquires locks that must be held on every one of its nodes,
// not on a majority. It is safe for concurrent use and, like Client, does
// not own the go-redis clients.
//
// It trades availability for tolerance of data loss: while any node is
// down or slow, no lock can be won (and a held lock can be neither
// extended nor proven released), but a lock stays exclusive as long as one
// node still holds its key, so up to N-1 nodes may lose their data (a
// restart without persistence, a failover to a replica that lacked the
// key) without two holders. A majority Client, in the worst case (its
// holder won just a majority), gives a second holder the lock when one
// of those nodes loses its data. See docs/multilock.md for when to pick
// which.
//
// A round still decides early: an attempt fails as soon as one node
// refuses or fails, without waiting for the rest, and then releases every
// node it may have won, late replies included.
type MultiLock struct {
	c *Client // quorum = every node
}

// NewMultiLock returns a MultiLock over nodes, which must be independent
// Redis masters, as for New. Its locks need every node: the quorum is N.
// It does no I/O; each node is identified by its run_id on first contact.
// Options are those of New, with the same defaults.
//
// NewMultiLock returns an error matching ErrInvalid when nodes is empty,
// holds a nil client, holds the same client (or the same address and DB)
// twice (also ErrDuplicateNode), an option is out of range, or WithToken
// is given (it is a per-call option).
func NewMultiLock(nodes []redis.UniversalClient, opts ...Option) (*MultiLock, error) {
	c, err := newClient(nodes, len(nodes), opts, false)
	if err != nil {
		return nil, err
	}
	return &MultiLock{c: c}, nil
}

// check refuses a nil or zero MultiLock.
func (m *MultiLock) check() error {
	switch {
	case m == nil:
		return invalidf("nil *MultiLock")
	case m.c == nil:
		return invalidf("zero MultiLock: make one with NewMultiLock")
	}
	return nil
}

// Nodes returns how many nodes the MultiLock uses; every one must agree.
func (m *MultiLock) Nodes() int {
	if m == nil {
		return 0
	}
	return m.c.Nodes()
}

// TryLock makes one attempt to acquire key for ttl on every node.
//
// It returns a *Lock whose Validity is ttl - elapsed - drift, with elapsed
// measured until the last node granted. Extend and Unlock on that lock
// need every node too: once a node is lost (down, or its key gone),
// Extend returns an error matching ErrNotHeld whose *QuorumError names
// that node. It returns within the per-node timeout (default ttl/20,
// clamped to [5ms, 200ms]; see WithNodeTimeout) or when ctx is done,
// whichever is first, and as soon as one node refuses or fails.
//
// Errors are those of Client.TryLock: ErrInvalid for a nil *MultiLock, a
// nil ctx, an empty key, a bad ttl or option; otherwise an error matching
// ErrNotObtained and the reason: ErrContended (a node holds the key for
// another owner), ErrUnreachable (a node failed), ErrExpired or ctx.Err().
// Every failed attempt releases what it may have taken.
func (m *MultiLock) TryLock(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	return m.c.TryLock(ctx, key, ttl, opts...)
}

// Lock acquires key for ttl on every node like TryLock, retrying after a
// jittered delay (WithRetryDelay, default 50ms ± 50%) until it wins, ctx
// is done, or the retry budget (WithMaxTries, default: none) is spent.
// While a node is down every attempt fails, so give ctx a deadline.
//
// Errors are those of TryLock. When ctx ends the wait, the error matches
// ErrNotObtained, ctx.Err() and the reason of the last attempt that
// completed, as for Client.Lock. Bad input (ErrInvalid, including
// WithToken) is returned at once, without retrying.
func (m *MultiLock) Lock(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	return m.c.Lock(ctx, key, ttl, opts...)
}

// TryLockKeys makes one attempt to acquire all of keys, as one lock, for
// ttl on every node. See Client.TryLockKeys for how the keys are taken
// (all or none on each node) and what they must satisfy, and TryLock for
// the timing.
//
// Errors are those of TryLock, and ErrInvalid for no keys, an empty or
// duplicate key, or keys that a Redis Cluster (or Ring) node cannot take
// in one call; the error names the offending key.
func (m *MultiLock) TryLockKeys(ctx context.Context, keys []string, ttl time.Duration, opts ...Option) (*Lock, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	return m.c.TryLockKeys(ctx, keys, ttl, opts...)
}

// LockKeys acquires all of keys, as one lock, for ttl on every node,
// retrying like Lock. Its errors are those of TryLockKeys and Lock.
func (m *MultiLock) LockKeys(ctx context.Context, keys []string, ttl time.Duration, opts ...Option) (*Lock, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	return m.c.LockKeys(ctx, keys, ttl, opts...)
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
func (c *Client) TryLockKeys(ctx context.Context, keys []string, ttl time.Duration, opts ...Option) (*Lock, error) {
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
func (c *Client) LockKeys(ctx context.Context, keys []string, ttl time.Duration, opts ...Option) (*Lock, error) {
	keys, cfg, err := c.prepareKeys(keys, opts)
	if err != nil {
		return nil, err
	}
	return c.lock(ctx, keys, ttl, cfg, nil)
}

// prepareKeys validates keys for every node and returns a copy of them
// with the call's configuration.
func (c *Client) prepareKeys(keys []string, opts []Option) ([]string, *config, error) {
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

// Do is Client.Do with a lock that needs every node: it acquires key
// (waiting as Lock does), runs fn with auto-extension, and releases the
// lock when fn returns. fn's ctx is cancelled, with a cause matching
// ErrLockLost, as soon as an extension cannot reach every node before
// Validity falls to the loss margin (see Lock.Done). Errors are those of
// Client.Do.
func (m *MultiLock) Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) error, opts ...Option) error {
	if err := m.check(); err != nil {
		return err
	}
	return m.c.Do(ctx, key, ttl, fn, opts...)
}

// Close is Client.Close for the MultiLock's client. It returns nil; on a
// nil or zero MultiLock it does nothing.
func (m *MultiLock) Close() error {
	if m == nil {
		return nil
	}
	return m.c.Close()
}
