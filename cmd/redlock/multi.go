package main

import (
	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

// newMultiLocker builds the locker behind --multi: a MultiLock, which
// needs every node (see docs/multilock.md).
func newMultiLocker(nodes []redis.UniversalClient, opts ...redlock.Option) (*redlock.Client, error) {
	m, err := redlock.NewMultiLock(nodes, opts...)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return m, nil
}
