package redlock

import (
	"context"
	"fmt"
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

// newFamily validates what every family call needs and returns the
// call's configuration.
func newFamily(c *Client, f *family, opts []LockOption) (*config, error) {
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

// tryFamily is one attempt at a family lock.
func tryFamily(ctx context.Context, c *Client, f *family, ttl time.Duration, cfg *config) (*Lock, error) {
	token, err := cfg.newToken()
	if err != nil {
		return nil, err
	}
	return c.tryLock(ctx, f.keys, ttl, token, cfg, f, 0)
}
