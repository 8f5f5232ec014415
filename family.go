package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// The lock family: folder (path) locks, read locks and counting
// semaphores, each on the same quorum machinery as TryLock: one script
// call per node, rounds decided early, validity with drift, per-node
// timeouts, the release of partial wins, background release retries,
// hand-off to waiters, the observer and the key prefix. Each returns the
// same *Lock, so Unlock, Extend, AutoExtend, Done, Validity and Do-style
// use work unchanged. docs/family.md has the semantics, the quorum
// arithmetic and the per-node data layout.

// lockKind tells the family's locks apart; key locks have no family.
// Its values are the wire's (wire.Kind).
type lockKind uint8

const (
	kindKey    = lockKind(wire.KindKey)
	kindRead   = lockKind(wire.KindRead)
	kindPath   = lockKind(wire.KindPath)
	kindPermit = lockKind(wire.KindPermit)
)

func (k lockKind) String() string {
	switch k {
	case kindRead:
		return "read lock"
	case kindPath:
		return "path lock"
	case kindPermit:
		return "semaphore permit"
	}
	return "lock"
}

const (
	// reservedPrefix begins the library's own values, which no token may
	// begin with (WithToken).
	reservedPrefix = wire.ReservedPrefix
)

// kindOf returns the wire kind of a lock of family f (nil: a key lock).
func kindOf(f *family) wire.Kind {
	if f == nil {
		return wire.KindKey
	}
	return wire.Kind(f.kind)
}

// family describes a lock of the family: its kind, what Key returns, its
// keys on the nodes, and what its rounds need.
type family struct {
	kind  lockKind
	name  string         // what Key returns: the key, or the normalized path
	shown []string       // name, as the keys of errors and observer events
	keys  []string       // its keys on each node, before the key prefix
	wake  []string       // the keys whose release channels wake its waiters
	limit int            // kindPermit: at most limit holders
	sem   wire.Semaphore // kindPermit: name and limit, as the wire carries them
	need  int            // the quorum; 0: the client's
}

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

// newFamily validates what every family call needs and returns the
// call's configuration.
func (c *Client) newFamily(f *family, opts []LockOption) (*config, error) {
	cfg, err := c.callConfig(opts) // also refuses a nil *Client
	if err != nil {
		return nil, err
	}
	if cfg.fencing {
		return nil, invalidf("WithFencing applies to exclusive locks (TryLock, TryLockKeys), not to a %v", f.kind)
	}
	f.shown = []string{f.name}
	if c.shard != shardNone {
		if err := checkShards(cfg.nodeKeys(f.keys), c.shard); err != nil {
			return nil, fmt.Errorf("%w (a %v keeps its keys %q on each node, which must share a hash slot)", err, f.kind, f.keys)
		}
	}
	return cfg, nil
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
	cfg, err := c.newFamily(f, opts)
	return f, cfg, err
}

// readFamily builds the family of a read lock on key.
func (c *Client) readFamily(key string, opts []LockOption) (*family, *config, error) {
	if key == "" {
		return nil, nil, invalidf("empty key")
	}
	f := &family{kind: kindRead, name: key, keys: []string{key, readersKey(key)}, wake: []string{key}}
	cfg, err := c.newFamily(f, opts)
	return f, cfg, err
}

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
	cfg, err := c.newFamily(f, opts)
	return f, cfg, err
}

// TryLockPath makes one attempt to lock the folder path for ttl on a
// quorum of nodes. Paths are "/"-separated components; "a/b" and
// "/a/b/" are the same folder. A path lock conflicts with a live lock of
// another owner on the same path, on any ancestor, or on any descendant,
// by whole components: "a/b" conflicts with "a", "a/b" and "a/b/c", not
// with "a/bc", "a/b-1", "a/.b" or the sibling "a/c".
//
// An attempt costs O(depth) key reads on each node, however many locks
// are held: each folder keeps, beside its holder key, an intention record
// of the live locks below it (with their expiry, on the node's own
// clock), so a held descendant is seen at its ancestor without a scan. A
// lock whose holder vanished stops blocking once its lease expires.
// On a Redis Cluster node every key of one tree shares a hash slot: the
// first component is the hash tag (see KeyName("path", path)).
//
// The returned *Lock is like TryLock's: Key returns the normalized path.
// Errors are those of TryLock, and ErrInvalid for an empty path, an
// empty component ("a//b"), a "." or ".." component, WithFencing, or a
// tree a sharded node cannot keep in one slot.
func (c *Client) TryLockPath(ctx context.Context, path string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	f, cfg, err := c.pathFamily(path, opts)
	if err != nil {
		return nil, err
	}
	return c.tryFamily(ctx, f, ttl, cfg)
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
	return c.lock(ctx, f.keys, ttl, cfg, f)
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
	return c.tryFamily(ctx, f, ttl, cfg)
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
	return c.lock(ctx, f.keys, ttl, cfg, f)
}

// TryAcquire makes one attempt to take a permit of the counting semaphore
// key, which admits at most limit holders at once, for ttl. Each node
// admits at most limit live permits of key, and a permit must be granted
// by floor(limit*N/(limit+1))+1 of the N nodes, not a majority (docs/family.md). A
// permit whose holder vanished stops counting once its lease expires.
// Every user of a key must pass the same limit.
//
// The returned *Lock is the permit: Unlock returns it, Extend and
// AutoExtend keep it. The semaphore is a sorted set at key on each node
// (token to expiry on the node's clock, and a member recording the
// limit); use a key of its own.
//
// Errors are those of TryLock (ErrContended when limit permits are
// held), and ErrInvalid for an empty key, limit < 1, WithFencing, or a
// limit that differs from the one the live permits of key were taken
// under (Acquire does not retry it).
func (c *Client) TryAcquire(ctx context.Context, key string, limit int, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	f, cfg, err := c.permitFamily(key, limit, opts)
	if err != nil {
		return nil, err
	}
	return c.tryFamily(ctx, f, ttl, cfg)
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
	return c.lock(ctx, f.keys, ttl, cfg, f)
}

// semaphoreQuorum returns how many of nodes must grant a permit so that a
// semaphore of limit k never has more than k holders: floor(k*N/(k+1)) +
// 1. It returns 0 when nodes or limit is below 1.
//
// Why not a majority: with N = 5 and k = 2, holders A on nodes {0,1,2}, B
// on {2,3,4} and C on {0,1,3,4} leave no node above 2 permits, yet make 3
// holders. Proof that q = floor(kN/(k+1)) + 1 is enough: were k+1
// holders valid at once, each would hold a live permit on q nodes, (k+1)q
// permits in all, while the N nodes hold at most kN; but (k+1)q > kN.
// For k = 1 it is the majority N/2+1.
//
// What it costs: N - q nodes may be down (or refuse) and permits still be
// granted. For N = 5: limit 1 tolerates 2, limit 2 or 3 tolerates 1,
// limit 4 or more tolerates none; for N = 3: limit 1 tolerates 1, limit 2
// or more none.
func semaphoreQuorum(nodes, limit int) int {
	if nodes < 1 || limit < 1 {
		return 0
	}
	return limit*nodes/(limit+1) + 1
}

// tryFamily is one attempt at a family lock.
func (c *Client) tryFamily(ctx context.Context, f *family, ttl time.Duration, cfg *config) (*Lock, error) {
	token, err := cfg.newToken()
	if err != nil {
		return nil, err
	}
	return c.tryLock(ctx, f.keys, ttl, token, cfg, f, 0)
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
