package main

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/redlocktest"
)

// status without --key prints one line a node and exits 0 while a
// quorum of nodes is healthy, 69 once it is not; each misconfiguration
// is a warning line.
func TestStatusHealth(t *testing.T) {
	good := redlocktest.Start(t, 3)
	for _, n := range good { // persistence on: no warning for its lack
		rc := redis.NewClient(&redis.Options{Addr: n.Addr()})
		if err := rc.ConfigSet(context.Background(), "appendonly", "yes").Err(); err != nil {
			t.Fatal(err)
		}
		_ = rc.Close()
	}
	url := func(i int) string { return "redis://" + good[i].Addr() }
	all := url(0) + "," + url(1) + "," + url(2)

	r := cli(t, nil, "status", "--nodes", all)
	if r.code != exitOK {
		t.Fatalf("healthy nodes: want exit 0, got %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(r.stdout, "\n")
	if !strings.HasPrefix(lines[0], "NODE") || len(lines) < 4 {
		t.Fatalf("want a table, got:\n%s", r.stdout)
	}
	for i, line := range lines[1:4] {
		f := strings.Fields(line)
		if len(f) != 9 || f[0] != url(i) || f[1] != "yes" || f[2] != "redis" || f[4] != "master" || !strings.HasPrefix(f[6], "aof") || f[7] != "noeviction" {
			t.Errorf("node %d: want a healthy Redis master with AOF, got %q", i+1, line)
		}
	}
	if strings.Contains(r.stdout, "warning:") || !strings.Contains(r.stdout, "3 of 3 nodes healthy; quorum 2: locks can be taken.") {
		t.Errorf("want no warning and a quorum, got:\n%s", r.stdout)
	}

	// One node down: still a quorum, and the node's error is said.
	down := closedAddr(t)
	r = cli(t, nil, "status", "--nodes", url(0)+","+url(1)+",redis://"+down)
	if r.code != exitOK || !strings.Contains(r.stdout, "connection refused") || !strings.Contains(r.stdout, "2 of 3 nodes healthy") {
		t.Errorf("one node down: want exit 0 and the node's error, got %d:\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A database index the server lacks and a node down: no quorum.
	r = cli(t, nil, "status", "--nodes", url(0)+","+url(1)+"/99,redis://"+down)
	if r.code != exitUnavailable {
		t.Errorf("no quorum: want exit %d, got %d:\n%s%s", exitUnavailable, r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"DB index is out of range", "database index is beyond the server's databases setting", "1 of 3 nodes healthy; quorum 2: no lock can be taken."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no quorum: want %q, got:\n%s", want, r.stdout)
		}
	}

	// One server under two names is a line of the report, not a usage
	// error as with --key.
	r = cli(t, nil, "status", "--nodes", all+",redis://localhost:"+port(t, good[0].Addr()))
	if r.code != exitOK || !strings.Contains(r.stdout, "warning: node 4 (localhost:") || !strings.Contains(r.stdout, "the same server as node 1") {
		t.Errorf("same server twice: want exit 0 and a warning, got %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// status's report warns of nodes without persistence unless the lock's
// users set a restart guard (--restart-guard, REDLOCK_RESTART_GUARD),
// and --restart-guard is refused with --key.
func TestStatusHealthRestartGuard(t *testing.T) {
	_, _, urls := cluster(t, 3)
	r := cli(t, nil, "status", "--nodes", urls)
	if r.code != exitOK || strings.Count(r.stdout, "warning:") != 3 || !strings.Contains(r.stdout, "no persistence") {
		t.Errorf("no persistence: want exit 0 and 3 warnings, got %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cli(t, nil, "status", "--nodes", urls, "--restart-guard", "30s")
	if r.code != exitOK || strings.Contains(r.stdout, "warning:") {
		t.Errorf("--restart-guard: want exit 0 and no warning, got %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cli(t, map[string]string{envRestartGuard: "30s"}, "status", "--nodes", urls)
	if r.code != exitOK || strings.Contains(r.stdout, "warning:") {
		t.Errorf("%s: want exit 0 and no warning, got %d:\n%s%s", envRestartGuard, r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{
		{"status", "--nodes", urls, "--key", "k", "--restart-guard", "30s"},
		{"status", "--nodes", urls, "--restart-guard", "soon"},
		{"status", "--nodes", urls, "--timeout", "0s"},
		{"status", "--nodes", urls, "extra"},
	} {
		if r := cli(t, nil, args...); r.code != exitUsage {
			t.Errorf("%q: want exit %d, got %d:\n%s%s", args, exitUsage, r.code, r.stdout, r.stderr)
		}
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// port returns the port of addr.
func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
