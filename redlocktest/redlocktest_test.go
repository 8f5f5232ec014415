package redlocktest_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/redlocktest"
)

// ping returns the node's answer to PING within d.
func ping(t *testing.T, nd *redlocktest.Node, d time.Duration) error {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: nd.Addr(), MaxRetries: -1, DialerRetries: 1, ReadTimeout: d, WriteTimeout: d, DialTimeout: d})
	defer c.Close()
	return c.Ping(context.Background()).Err()
}

func TestStartKillRestartPause(t *testing.T) {
	nodes := redlocktest.Start(t, 2)
	if len(nodes) != 2 || nodes[0].Addr() == nodes[1].Addr() {
		t.Fatalf("want 2 nodes on distinct ports, got %v", redlocktest.URLs(nodes))
	}
	nd := nodes[0]
	if got, want := nd.URL(), "redis://"+nd.Addr(); got != want {
		t.Errorf("want URL %s, got %s", want, got)
	}
	if host, _, _ := net.SplitHostPort(nd.Addr()); host != "127.0.0.1" {
		t.Errorf("want a loopback address, got %s", nd.Addr())
	}
	if err := ping(t, nd, time.Second); err != nil {
		t.Fatalf("want PONG, got %v", err)
	}
	if err := nd.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := ping(t, nd, time.Second); err == nil {
		t.Fatal("want no answer from a killed node, got PONG")
	}
	if err := nd.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := ping(t, nd, time.Second); err != nil {
		t.Fatalf("want PONG after Restart, got %v", err)
	}
	if err := nd.Pause(); err != nil {
		t.Fatal(err)
	}
	err := ping(t, nd, 200*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("want a timeout from a paused node, got %v", err)
	}
	if err := nd.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := ping(t, nd, time.Second); err != nil {
		t.Fatalf("want PONG after Resume, got %v", err)
	}
	// A paused node is closed too, as Start's cleanup does.
	if err := nodes[1].Pause(); err != nil {
		t.Fatal(err)
	}
}

func TestStartNodesRefusesNoNodes(t *testing.T) {
	for _, n := range []int{0, -1} {
		if nodes, err := redlocktest.StartNodes(n); err == nil || !strings.Contains(err.Error(), "at least 1") {
			t.Errorf("StartNodes(%d): want an error, got %v, %v", n, nodes, err)
		}
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	nodes, err := redlocktest.StartNodes(1)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := nodes[0].Close(); err != nil {
			t.Fatalf("Close %d: %v", i+1, err)
		}
	}
	if err := ping(t, nodes[0], time.Second); err == nil {
		t.Fatal("want no answer from a closed node, got PONG")
	}
	if err := nodes[0].Restart(); err == nil {
		t.Fatal("want Restart of a closed node to fail")
	}
}
