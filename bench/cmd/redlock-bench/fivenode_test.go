package main

import (
	"testing"

	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// Go-level benchmarks of one uncontended lock+unlock cycle on 5 nodes,
// ours against the raw, net.Conn and go-redis floors (gofloor.go), for
// profiling the gap that make bench's "vs raw floor" target measures:
//
//	go test -run '^$' -bench FiveNode -benchmem -cpuprofile cpu.prof ./cmd/redlock-bench

// benchFive times cycles of the impl that m builds on 5 fresh nodes, as
// benchOneNode does on one.
func benchFive(b *testing.B, m maker) {
	nodes, err := redisnode.StartN(5, redisnode.Options{})
	if err != nil {
		b.Fatalf("starting redis-server: %v", err)
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	cs := clients(addrs, 5)
	b.Cleanup(func() {
		closeAll(cs)
		for _, n := range nodes {
			_ = n.Close()
		}
	})
	im, err := m.new(m.name, cs)
	if err != nil {
		b.Fatal(err)
	}
	if im.closer != nil {
		b.Cleanup(im.closer)
	}
	benchImpl(b, im)
}

func BenchmarkFiveNodeOurs(b *testing.B)         { benchFive(b, ours(implOurs)) }
func BenchmarkFiveNodeRawFloor(b *testing.B)     { benchFive(b, rawFloor(implRawFloor)) }
func BenchmarkFiveNodeGoFloor(b *testing.B)      { benchFive(b, goFloor("go floor")) }
func BenchmarkFiveNodeGoRedisFloor(b *testing.B) { benchFive(b, goRedisFloor("go-redis floor")) }
