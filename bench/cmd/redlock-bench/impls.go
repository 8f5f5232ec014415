package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/seed543a70bd/redlock"
)

// ttl is the lease every implementation asks for.
const ttl = 10 * time.Second

var errNotOK = errors.New("not obtained or not released")

// impl is one way to take and release a lock.
type impl struct {
	name string
	// cycle takes key and releases it once; it is the measured operation.
	cycle func(ctx context.Context, key string) error
	// lock blocks (retrying) until key is held and returns its release.
	// nil for the raw floors, which have no waiting, and for the cases of
	// no hand-off scenario (the lock family's).
	lock func(ctx context.Context, key string) (func(context.Context) error, error)
	// closer, if set, releases what the impl holds besides its clients.
	closer func()
}

// maker builds an impl over go-redis clients (one per node; single-node
// impls use the first).
type maker struct {
	name  string
	nodes int
	new   func(name string, cs []redis.UniversalClient) (impl, error)
	// addrs, if set, are the nodes this maker runs on in place of its
	// scenario's (the slow scenario's unfaulted reference).
	addrs []string
}

// locker is what the suite needs of our Client (and of a MultiLock).
type locker interface {
	Lock(ctx context.Context, key string, ttl time.Duration, opts ...redlock.LockOption) (*redlock.Lock, error)
}

var _ locker = (*redlock.Client)(nil)

// ours is this library's Client with opts.
func ours(name string, opts ...redlock.Option) maker {
	return oursFrom(name, func(cs []redis.UniversalClient) (locker, error) {
		return redlock.New(cs, opts...)
	})
}

// oursOne is this library's Client with opts on the first node alone
// (quorum 1 of 1): the single-Redis deployment, against redislock and
// rueidislock.
func oursOne(name string, opts ...redlock.Option) maker {
	m := ours(name, opts...)
	m.nodes = 1
	return m
}

// oursTwo is two Clients of this library on the same nodes, whose lock
// alternates between them: in the hand-off scenario the holder and the
// waiter are on different Clients, as in two processes, so the waiter is
// woken by the nodes' release announcements (pub/sub), not in process.
func oursTwo(name string) maker {
	return oursFrom(name, func(cs []redis.UniversalClient) (locker, error) {
		a, err := redlock.New(cs)
		if err != nil {
			return nil, err
		}
		b, err := redlock.New(cs)
		if err != nil {
			_ = a.Close()
			return nil, err
		}
		return &alternating{ls: []*redlock.Client{a, b}}, nil
	})
}

// alternating is a locker whose calls go to its Clients in turn.
type alternating struct {
	ls    []*redlock.Client
	calls atomic.Uint64
}

// Close closes both Clients.
func (a *alternating) Close() error {
	for _, c := range a.ls {
		_ = c.Close()
	}
	return nil
}

func (a *alternating) Lock(ctx context.Context, key string, ttl time.Duration, opts ...redlock.LockOption) (*redlock.Lock, error) {
	return a.ls[(a.calls.Add(1)-1)%uint64(len(a.ls))].Lock(ctx, key, ttl, opts...)
}

// oursFrom is our lock built by build (New, or a variant such as MultiLock).
func oursFrom(name string, build func([]redis.UniversalClient) (locker, error)) maker {
	return maker{name: name, nodes: 5, new: func(name string, cs []redis.UniversalClient) (impl, error) {
		c, err := build(cs)
		if err != nil {
			return impl{}, err
		}
		var closer func()
		if cl, ok := c.(interface{ Close() error }); ok {
			closer = func() { _ = cl.Close() }
		}
		return impl{
			name:   name,
			closer: closer,
			cycle: func(ctx context.Context, key string) error {
				l, err := c.Lock(ctx, key, ttl)
				if err != nil {
					return err
				}
				return l.Unlock(ctx)
			},
			lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
				l, err := c.Lock(ctx, key, ttl)
				if err != nil {
					return nil, err
				}
				return l.Unlock, nil
			},
		}, nil
	}}
}

// redsyncImpl is go-redsync/redsync v4 over the go-redis v9 adapter, one
// NewMutex per lock as its README shows.
func redsyncImpl(name string, opts ...redsync.Option) maker {
	return maker{name: name, nodes: 5, new: func(name string, cs []redis.UniversalClient) (impl, error) {
		pools := make([]redsyncredis.Pool, len(cs))
		for i, c := range cs {
			pools[i] = goredis.NewPool(c)
		}
		rs := redsync.New(pools...)
		all := append([]redsync.Option{redsync.WithExpiry(ttl)}, opts...)
		unlock := func(m *redsync.Mutex) func(context.Context) error {
			return func(ctx context.Context) error {
				ok, err := m.UnlockContext(ctx)
				if err == nil && !ok {
					err = errNotOK
				}
				return err
			}
		}
		return impl{
			name: name,
			cycle: func(ctx context.Context, key string) error {
				m := rs.NewMutex(key, all...)
				if err := m.LockContext(ctx); err != nil {
					return err
				}
				ok, err := m.UnlockContext(ctx)
				if err == nil && !ok {
					err = errNotOK
				}
				return err
			},
			lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
				m := rs.NewMutex(key, all...)
				if err := m.LockContext(ctx); err != nil {
					return nil, err
				}
				return unlock(m), nil
			},
		}, nil
	}}
}

// redislockImpl is bsm/redislock on the first node: the single-node reference.
func redislockImpl(name string) maker {
	return maker{name: name, nodes: 1, new: func(name string, cs []redis.UniversalClient) (impl, error) {
		c := redislock.New(cs[0])
		return impl{name: name, cycle: func(ctx context.Context, key string) error {
			l, err := c.Obtain(ctx, key, ttl, nil)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}}, nil
	}}
}

// rueidislockImpl is rueidis's rueidislock on the first node, in the
// settings that make it a single-node lock comparable to ours: KeyMajority
// 1 (one key on one node; the default 2 writes 3 keys), NoLoopTracking
// (the node is Redis >= 7.0.5) and KeyValidity = ttl. Its own rueidis
// client (RESP3, auto-pipelining, client-side caching for the hand-off)
// is dialled from the first go-redis client's address; the go-redis
// clients are left unused.
//
// What it does beyond ours, counted in its numbers as in a user's: every
// lock is extended in the background (a goroutine and a timer per lock,
// extending every KeyValidity/2), and its release (the cancel func) waits
// until the release has landed on the node. With twoLockers, the holder
// and the waiter of the hand-off use a locker each (as two processes
// would, woken by the node's invalidation message); otherwise one locker,
// whose waiter is woken in process once the release has landed.
func rueidislockImpl(name string, twoLockers bool) maker {
	return maker{name: name, nodes: 1, new: func(name string, cs []redis.UniversalClient) (impl, error) {
		addr := cs[0].(*redis.Client).Options().Addr
		newLocker := func() (rueidislock.Locker, error) {
			return rueidislock.NewLocker(rueidislock.LockerOption{
				ClientOption:   rueidis.ClientOption{InitAddress: []string{addr}},
				KeyMajority:    1,
				NoLoopTracking: true,
				KeyValidity:    ttl,
			})
		}
		a, err := newLocker()
		if err != nil {
			return impl{}, err
		}
		lockers := []rueidislock.Locker{a}
		if twoLockers {
			b, err := newLocker()
			if err != nil {
				a.Close()
				return impl{}, err
			}
			lockers = append(lockers, b)
		}
		var calls atomic.Uint64 // lock alternates between the lockers
		release := func(cancel context.CancelFunc) func(context.Context) error {
			return func(context.Context) error {
				cancel() // returns once the release has landed
				return nil
			}
		}
		return impl{
			name: name,
			cycle: func(ctx context.Context, key string) error {
				_, cancel, err := a.TryWithContext(ctx, key)
				if err != nil {
					return err
				}
				cancel()
				return nil
			},
			lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
				l := lockers[(calls.Add(1)-1)%uint64(len(lockers))]
				_, cancel, err := l.WithContext(ctx, key)
				if err != nil {
					return nil, err
				}
				return release(cancel), nil
			},
			closer: func() {
				for _, l := range lockers {
					l.Close()
				}
			},
		}, nil
	}}
}

const floorToken = "bench-floor-token-0123456789abcdef"

// floorOne is the raw floor: SET NX PX then DEL on one node.
func floorOne(name string) maker {
	return maker{name: name, nodes: 1, new: func(name string, cs []redis.UniversalClient) (impl, error) {
		c := cs[0]
		return impl{name: name, cycle: func(ctx context.Context, key string) error {
			if err := floorSetNX(ctx, c, key); err != nil {
				return err
			}
			return c.Del(ctx, key).Err()
		}}, nil
	}}
}

// floorSetNX is the floors' acquire on one node: SET key NX PX ttl,
// errNotOK when the key was taken.
func floorSetNX(ctx context.Context, c redis.UniversalClient, key string) error {
	ok, err := c.SetNX(ctx, key, floorToken, ttl).Result()
	if err == nil && !ok {
		err = errNotOK
	}
	return err
}

// floorParallel is the raw floor on every node: SET NX PX on all nodes in
// parallel, wait for all, then DEL on all in parallel, wait for all.
func floorParallel(name string) maker {
	return maker{name: name, nodes: 5, new: func(name string, cs []redis.UniversalClient) (impl, error) {
		each := func(f func(c redis.UniversalClient) error) error {
			errs := make([]error, len(cs))
			var wg sync.WaitGroup
			for i, c := range cs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = f(c)
				}()
			}
			wg.Wait()
			return errors.Join(errs...)
		}
		return impl{name: name, cycle: func(ctx context.Context, key string) error {
			err := each(func(c redis.UniversalClient) error { return floorSetNX(ctx, c, key) })
			return errors.Join(err, each(func(c redis.UniversalClient) error {
				return c.Del(ctx, key).Err()
			}))
		}}, nil
	}}
}
