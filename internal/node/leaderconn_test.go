package node

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestOwnConnFits: which go-redis clients a leader takes a connection of
// its own from.
func TestOwnConnFits(t *testing.T) {
	tests := []struct {
		name string
		o    redis.Options
		want bool
	}{
		{"RESP2, default pool", redis.Options{Addr: "a:1", Protocol: 2, PoolSize: 20}, true},
		{"RESP3 (go-redis's default)", redis.Options{Addr: "a:1", Protocol: 3, PoolSize: 20}, true},
		{"pool of MinPoolForConn", redis.Options{Addr: "a:1", Protocol: 2, PoolSize: MinPoolForConn}, true},
		{"small pool", redis.Options{Addr: "a:1", Protocol: 2, PoolSize: MinPoolForConn - 1}, false},
		{"few active connections", redis.Options{Addr: "a:1", Protocol: 2, PoolSize: 20, MaxActiveConns: 2}, false},
		{"active connections below the pool", redis.Options{Addr: "a:1", Protocol: 2, PoolSize: 20, MaxActiveConns: MinPoolForConn}, false},
		{"active connections as many as the pool", redis.Options{Addr: "a:1", Protocol: 2, PoolSize: 20, MaxActiveConns: 20}, true},
		{"active connections above the pool", redis.Options{Addr: "a:1", Protocol: 2, PoolSize: 10, MaxActiveConns: 20}, true},
		{"failover client", redis.Options{Addr: FailoverAddr, Protocol: 2, PoolSize: 20}, false},
	}
	for _, tt := range tests {
		if got := ownConnFits(&tt.o); got != tt.want {
			t.Errorf("%s: want %v, got %v", tt.name, tt.want, got)
		}
	}
}
