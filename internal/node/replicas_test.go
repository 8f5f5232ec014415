package node

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// TestInstallReplicas: the WAIT timeout is rounded up to whole
// milliseconds (WAIT 0 would block forever), must stay below the
// client's ReadTimeout, and needs a client of one master.
func TestInstallReplicas(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 100 * time.Millisecond})
	defer c.Close()
	for _, tc := range []struct {
		in, want time.Duration
	}{
		{time.Nanosecond, time.Millisecond},
		{time.Millisecond, time.Millisecond},
		{1500 * time.Microsecond, 2 * time.Millisecond},
		{99 * time.Millisecond, 99 * time.Millisecond},
	} {
		n := &Node{Idx: 0, C: c}
		if err := n.InstallReplicas(1, tc.in); err != nil {
			t.Fatalf("%v: want it installed, got %v", tc.in, err)
		}
		if n.replicas.timeout != tc.want {
			t.Fatalf("%v: want a WAIT timeout of %v, got %v", tc.in, tc.want, n.replicas.timeout)
		}
	}
	for _, in := range []time.Duration{100 * time.Millisecond, time.Second} {
		if err := (&Node{C: c}).InstallReplicas(1, in); err == nil || !strings.Contains(err.Error(), "ReadTimeout") {
			t.Fatalf("%v: want it refused for the ReadTimeout, got %v", in, err)
		}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	if err := (&Node{C: cc}).InstallReplicas(1, time.Millisecond); err == nil {
		t.Fatal("a Cluster client: want it refused")
	}
}

// TestSynced: only a grant (StatusOK) of a request that writes a lock's
// state depends on WAIT's answer; too few replicas leaves the
// connection sound, a failed WAIT does not.
func TestSynced(t *testing.T) {
	n := &Node{replicas: &replicaSync{n: 2, timeout: time.Millisecond}}
	acquire := &wire.Request{Op: wire.OpAcquire}
	release := &wire.Request{Op: wire.OpRelease}
	ok := wire.Reply{St: wire.StatusOK}
	for _, tc := range []struct {
		name   string
		req    *wire.Request
		rep    wire.Reply
		a      acks
		want   wire.Status
		broken bool
	}{
		{"acknowledged", acquire, ok, acks{sent: true, got: 2}, wire.StatusOK, false},
		{"more than asked", acquire, ok, acks{sent: true, got: 3}, wire.StatusOK, false},
		{"too few", acquire, ok, acks{sent: true, got: 1}, wire.StatusFailed, false},
		{"WAIT failed", acquire, ok, acks{sent: true, err: errors.New("i/o timeout")}, wire.StatusFailed, true},
		{"WAIT not sent", acquire, ok, acks{}, wire.StatusFailed, true},
		{"refused", acquire, wire.Reply{St: wire.StatusTaken}, acks{sent: true}, wire.StatusTaken, false},
		{"a release", release, ok, acks{}, wire.StatusOK, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := n.synced(tc.req, tc.rep, tc.a)
			if got.St != tc.want {
				t.Fatalf("want status %v, got %v (%v)", tc.want, got.St, got.Err)
			}
			if got.St == wire.StatusFailed {
				if !errors.Is(got.Err, ErrNotReplicated) {
					t.Fatalf("want ErrNotReplicated, got %v", got.Err)
				}
				if connBroken(got) != tc.broken {
					t.Fatalf("want connBroken %v, got %v", tc.broken, !tc.broken)
				}
			}
		})
	}
	if got := (&Node{}).synced(acquire, ok, acks{}); got.St != wire.StatusOK {
		t.Fatalf("replica sync off: want the grant unchanged, got %v", got.St)
	}
}
