package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed543a70bd/redlock"
)

// status shows, per node, reachability, the holder's ID prefix (as
// Inspect gives it), its TTL on the node and the fence counter, then the
// TTL a quorum guarantees and the fence; it exits 69 once a node is down.
func TestStatus(t *testing.T) {
	nodes, clients, urls := cluster(t, 3)
	key := testKey(t)
	ctx := context.Background()

	r := cli(t, nil, "status", "--nodes", urls, "--key", key)
	if r.code != exitOK || !strings.Contains(r.stdout, "is free on every reachable node") {
		t.Fatalf("free key: want exit 0 and \"free\", got %d:\n%s%s", r.code, r.stdout, r.stderr)
	}

	c, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(ctx, key, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(ctx) }()
	for _, cl := range clients[:2] {
		if err := cl.Set(ctx, redlock.KeyName("fence", key), 42, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, func() bool { return get(t, clients[2], key) != "" }, "want the key on every node")

	r = cli(t, nil, "status", "--nodes", urls, "--key", key)
	if r.code != exitOK {
		t.Fatalf("held key: want exit 0, got %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	prefix := holderID(l.Token())
	lines := strings.Split(r.stdout, "\n")
	if !strings.HasPrefix(lines[0], "NODE") || len(lines) < 4 {
		t.Fatalf("want a table, got:\n%s", r.stdout)
	}
	for i, line := range lines[1:4] {
		f := strings.Fields(line)
		if len(f) != 5 || f[1] != "yes" || f[2] != prefix {
			t.Fatalf("node %d: want reachable, holder %s, got %q", i+1, prefix, line)
		}
		if d, err := time.ParseDuration(f[3]); err != nil || d <= 0 || d > 20*time.Second {
			t.Errorf("node %d: want a PTTL in (0, 20s], got %q", i+1, f[3])
		}
		want := "42"
		if i == 2 {
			want = "-"
		}
		if f[4] != want {
			t.Errorf("node %d: want fence %s, got %q", i+1, want, f[4])
		}
	}
	if !strings.Contains(r.stdout, "is held by "+prefix+" on 3 of 3 nodes, for at least ") || !strings.Contains(r.stdout, "(what a quorum guarantees), fence 42.\n") {
		t.Errorf("want a summary naming the holder, the TTL a quorum guarantees and the fence, got:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, l.Token()) {
		t.Errorf("want the token itself never shown, got:\n%s", r.stdout)
	}

	if err := nodes[1].Kill(); err != nil {
		t.Fatal(err)
	}
	r = cli(t, nil, "status", "--nodes", urls, "--key", key, "--timeout", "500ms")
	if r.code != exitUnavailable {
		t.Fatalf("node down: want exit %d, got %d:\n%s", exitUnavailable, r.code, r.stdout)
	}
	if f := strings.Fields(strings.Split(r.stdout, "\n")[2]); len(f) < 2 || f[1] != "no" || !strings.Contains(r.stdout, "node 2 (redis://"+nodes[1].Addr()+"): ") {
		t.Errorf("node down: want node 2 unreachable, with the reason, got:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "2 of 3 nodes reachable") || !strings.Contains(r.stdout, "held by "+prefix+" on 2 of 3") {
		t.Errorf("node down: want the holder still on a quorum, got:\n%s", r.stdout)
	}
}

// One server given under two names (127.0.0.1 and localhost) is one node
// twice: the URLs differ, so status tells them apart by the run_id in
// INFO server, as the library does, and refuses them with a usage error
// naming both, numbered from 1, before it prints a table that would count
// the server's key twice.
func TestStatusSameServerTwice(t *testing.T) {
	nodes, _, urls := cluster(t, 2)
	alias := strings.Replace(nodes[0].URL(), "127.0.0.1", "localhost", 1)
	r := cli(t, nil, "status", "--nodes", urls+","+alias, "--key", testKey(t))
	if r.code != exitUsage {
		t.Fatalf("want exit %d, got %d:\n%s%s", exitUsage, r.code, r.stdout, r.stderr)
	}
	want := fmt.Sprintf(`redlock status: node 3 %q is node 1 %q again (the same server, run_id `, alias, "redis://"+nodes[0].Addr())
	if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "Run 'redlock status -h' for usage.") {
		t.Errorf("want stderr containing %q and the usage hint, got:\n%s", want, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("want no table, got:\n%s", r.stdout)
	}

	// The two distinct servers alone are accepted.
	if r := cli(t, nil, "status", "--nodes", urls, "--key", testKey(t)); r.code != exitOK {
		t.Errorf("distinct nodes: want exit 0, got %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// A lock that `redlock run` holds carries who holds it: status shows the
// host, the pid and the command (run's default metadata), and --metadata
// replaces it.
func TestStatusShowsRunMetadata(t *testing.T) {
	_, _, urls := cluster(t, 3)
	key := testKey(t)
	dir := t.TempDir()
	started, goFile := filepath.Join(dir, "started"), filepath.Join(dir, "go")
	script := `echo yes >"$1"; while [ ! -f "$2" ]; do sleep 0.02; done`
	res := cliAsync(t, nil, "run", "--nodes", urls, "--key", key, "--", "sh", "-c", script, "sh", started, goFile)
	waitFile(t, started, 10*time.Second)
	r := cli(t, nil, "status", "--nodes", urls, "--key", key)
	want := "  metadata: " + whoAmI() + ": sh -c " + script + " sh " + started + " " + goFile + "\n"
	if r.code != exitOK || !strings.Contains(r.stdout, want) {
		t.Errorf("want exit 0 and %q, got %d:\n%s", want, r.code, r.stdout)
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := await(t, res, 10*time.Second); r.code != exitOK {
		t.Fatalf("run: want exit 0, got %d; stderr:\n%s", r.code, r.stderr)
	}

	key2 := testKey(t)
	started2 := filepath.Join(dir, "started2")
	res = cliAsync(t, nil, "run", "--nodes", urls, "--key", key2, "--metadata", "nightly backup job 7", "--", "sh", "-c", script, "sh", started2, goFile+"2")
	waitFile(t, started2, 10*time.Second)
	r = cli(t, nil, "status", "--nodes", urls, "--key", key2)
	if !strings.Contains(r.stdout, "  metadata: nightly backup job 7\n") {
		t.Errorf("--metadata: want it shown, got:\n%s", r.stdout)
	}
	if err := os.WriteFile(goFile+"2", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	await(t, res, 10*time.Second)
}
