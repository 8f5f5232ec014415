package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

// Variants of our lock that came with later API: fencing tokens,
// MultiLock and the lock family (folder locks, semaphores). Each function returns ok=false when its API is missing, and
// its row then prints "n/a": should the API be renamed or removed, change
// only the body of its function here.

// fencingOn returns our lock with fencing tokens switched on. unfenced is
// set when a lock comes back with Fence() == 0, that is while the option
// exists but is not wired into acquisition yet; the row then says so.
func fencingOn(unfenced *atomic.Bool) (maker, bool) {
	m := oursFrom(implFencingOn, func(cs []redis.UniversalClient) (locker, error) {
		c, err := redlock.New(cs, redlock.WithFencing())
		if err != nil {
			return nil, err
		}
		return fenceCheck{c, unfenced}, nil
	})
	return m, true
}

// fenceCheck is a Client that notes locks without a fencing token.
type fenceCheck struct {
	*redlock.Client
	unfenced *atomic.Bool
}

func (f fenceCheck) Lock(ctx context.Context, key string, ttl time.Duration, opts ...redlock.LockOption) (*redlock.Lock, error) {
	l, err := f.Client.Lock(ctx, key, ttl, opts...)
	if err == nil && l.Fence() == 0 {
		f.unfenced.Store(true)
	}
	return l, err
}

// multiLock returns the all-nodes variant of our lock over the same nodes.
func multiLock() (maker, bool) {
	return oursFrom(implMultiLock, func(cs []redis.UniversalClient) (locker, error) {
		return redlock.NewMultiLock(cs)
	}), true
}

// oursTry is one attempt of this library's Client, made by try, and its
// Unlock: the uncontended cycle of a lock of the family and of its
// TryLock baseline.
func oursTry(name string, try func(ctx context.Context, c *redlock.Client, key string) (*redlock.Lock, error)) maker {
	return maker{name: name, nodes: 5, new: func(name string, cs []redis.UniversalClient) (impl, error) {
		c, err := redlock.New(cs)
		if err != nil {
			return impl{}, err
		}
		return impl{name: name, cycle: func(ctx context.Context, key string) error {
			l, err := try(ctx, c, key)
			if err != nil {
				return err
			}
			return l.Unlock(ctx)
		}}, nil
	}}
}

// tryLock is the family scenario's baseline: TryLock + Unlock.
func tryLock() maker {
	return oursTry(implTryLock, func(ctx context.Context, c *redlock.Client, key string) (*redlock.Lock, error) {
		return c.TryLock(ctx, key, ttl)
	})
}

// pathLock is a folder lock of depth 3, key + "/a/b": 3 holder keys read
// and an intention record on each of the 2 ancestors, on every node.
func pathLock() (maker, bool) {
	return oursTry(implLockPath, func(ctx context.Context, c *redlock.Client, key string) (*redlock.Lock, error) {
		return c.TryLockPath(ctx, key+"/a/b", ttl)
	}), true
}

// semaphore is a permit of a semaphore of limit 3 at key, which needs
// SemaphoreQuorum(5, 3) = 4 of the 5 nodes.
func semaphore() (maker, bool) {
	return oursTry(implAcquire, func(ctx context.Context, c *redlock.Client, key string) (*redlock.Lock, error) {
		return c.TryAcquire(ctx, key, 3, ttl)
	}), true
}
