package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

// Variants of our lock that came with later API: fencing tokens and
// MultiLock. Each function returns ok=false when its API is missing, and
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

func (f fenceCheck) Lock(ctx context.Context, key string, ttl time.Duration, opts ...redlock.Option) (*redlock.Lock, error) {
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
