//go:build !linux

package main

import (
	"errors"

	"github.com/redis/go-redis/v9"
)

// rawFloor is Linux only (it calls poll(2) directly); elsewhere its row
// reports why it did not run.
func rawFloor(name string) maker {
	return maker{name: name, nodes: 5, new: func(name string, cs []redis.UniversalClient) (impl, error) {
		return impl{}, errors.New("raw floor: Linux only")
	}}
}
