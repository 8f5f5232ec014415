package chaos_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/chaos"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

func proxyClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestProxyLatencyAndPartition(t *testing.T) {
	nodes := redistest.Nodes(t, 1)
	p, err := chaos.NewProxy("t", nodes[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	ctx := context.Background()
	c := proxyClient(t, p.Addr())
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("want PING through the proxy, got %v", err)
	}

	if err := p.SetLatency(60*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("want a slow PING, got %v", err)
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("want at least 60ms with the latency, got %v", d)
	}

	p.Heal()
	if err := p.Partition(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("want PING to time out across the partition, got a reply")
	}
	p.Heal()
	if err := proxyClient(t, p.Addr()).Ping(ctx).Err(); err != nil {
		t.Fatalf("want PING after Heal, got %v", err)
	}
}

func TestMemResource(t *testing.T) {
	var r chaos.MemResource
	ctx := context.Background()
	if err := r.Write(ctx, "k", 2, "a"); err != nil {
		t.Fatalf("want the first write accepted, got %v", err)
	}
	for _, f := range []int64{2, 1} {
		if err := r.Write(ctx, "k", f, "b"); !errors.Is(err, redlock.ErrStaleFence) {
			t.Errorf("want ErrStaleFence for fence %d, got %v", f, err)
		}
	}
	if err := r.Write(ctx, "k", 3, "c"); err != nil || r.Value("k") != "c" {
		t.Errorf("want fence 3 accepted and stored, got %v, %q", err, r.Value("k"))
	}
}

func TestStoreResource(t *testing.T) {
	nodes := redistest.Nodes(t, 1)
	r := chaos.NewStoreResource(redistest.Client(t, nodes[0]))
	ctx := context.Background()
	if err := r.Write(ctx, "res", 5, "a"); err != nil {
		t.Fatalf("want the first write accepted, got %v", err)
	}
	if err := r.Write(ctx, "res", 5, "b"); !errors.Is(err, redlock.ErrStaleFence) {
		t.Errorf("want ErrStaleFence for an equal fence, got %v", err)
	}
	if err := r.Write(ctx, "res", 6, "c"); err != nil {
		t.Errorf("want a larger fence accepted, got %v", err)
	}
}
