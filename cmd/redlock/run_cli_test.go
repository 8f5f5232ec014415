package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed543a70bd/redlock"
)

// medianRun runs the built binary n times with args and returns the
// median wall time; each run must exit with want.
func medianRun(t *testing.T, n, want int, args ...string) time.Duration {
	t.Helper()
	times := make([]time.Duration, n)
	for i := range times {
		cmd := exec.Command(redlockBin(t), args...)
		out := startProc(t, cmd)
		start := time.Now()
		code := waitProc(t, cmd, out)
		times[i] = time.Since(start)
		if code != want {
			t.Fatalf("run %d: want exit %d, got %d; output:\n%s", i, want, code, out)
		}
	}
	slices.Sort(times)
	return times[n/2]
}

// A run adds no fixed delay: `run -- true` on a free lock, and `--wait 0`
// on a held one, take a few lock rounds, not a sleep. The bound is
// generous (a loaded machine, the race detector's build): it catches a
// fixed delay of hundreds of milliseconds coming back, not a slow round.
// Before, every run slept 400ms (two per-node timeouts) before exiting.
func TestRunPerRunTime(t *testing.T) {
	_, clients, urls := cluster(t, 3)
	key := testKey(t)
	redlockBin(t)
	const bound = time.Second
	if d := medianRun(t, 5, exitOK, "run", "--nodes", urls, "--key", key, "--", "true"); d > bound {
		t.Errorf("free lock: want a median run under %v, got %v", bound, d)
	}
	c, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(context.Background(), key, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(context.Background()) }()
	if d := medianRun(t, 5, exitNotObtained, "run", "--nodes", urls, "--key", key, "--wait", "0", "--", "true"); d > bound {
		t.Errorf("held lock, --wait 0: want a median run under %v, got %v", bound, d)
	}
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// redlock killed with SIGKILL takes the command's whole process group
// with it, grandchildren included: a shell's background sleep must not go
// on running without the lock. Before, the shell died (Pdeathsig) and the
// sleep kept running.
func TestRunKill9KillsGrandchildren(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc to watch processes")
	}
	_, _, urls := cluster(t, 3)
	key := testKey(t)
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	cmd := exec.Command(redlockBin(t), "run", "--nodes", urls, "--key", key, "--",
		"sh", "-c", `sleep 30 & echo $! >"$1"; wait`, "sh", pidFile)
	out := startProc(t, cmd)
	pid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, pidFile, 10*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if !alive(pid) {
		t.Fatalf("want the sleep running under redlock; output:\n%s", out)
	}
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	eventually(t, 5*time.Second, func() bool { return !alive(pid) },
		"want the grandchild (sleep, pid %d) killed after redlock's SIGKILL", pid)
	eventually(t, 5*time.Second, func() bool { return len(liveInGroup(t, pgid)) == 0 },
		"want the command's process group gone, got processes %v", liveInGroup(t, pgid))
}

// A timed-out wait says why: nodes unreachable, when too few answer.
func TestRunNotObtainedUnreachable(t *testing.T) {
	nodes, _, urls := cluster(t, 3)
	key := testKey(t)
	for _, n := range nodes[:2] {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	r := cli(t, nil, "run", "--nodes", urls, "--key", key, "-w", "300ms", "--", "true")
	if r.code != exitNotObtained {
		t.Fatalf("want exit %d, got %d; stderr:\n%s", exitNotObtained, r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "nodes unreachable") || !strings.Contains(r.stderr, "node 1 (redis://"+nodes[0].Addr()+"): failed") {
		t.Errorf("want the reason (nodes unreachable) and node 1 named by URL, got:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "node 0") || strings.Contains(r.stderr, "redlock: ") {
		t.Errorf("want 1-based nodes and no library prefix, got:\n%s", r.stderr)
	}
}

// Flock-style flags: -w is --wait, -E (--conflict-exit-code) chooses the
// code of a conflict, -v prints the token as status shows it, and no
// fence without --fence.
func TestRunFlockStyleFlags(t *testing.T) {
	_, clients, urls := cluster(t, 3)
	key := testKey(t)
	r := cli(t, nil, "run", "-v", "--nodes", urls, "--key", key, "--", "true")
	if r.code != exitOK {
		t.Fatalf("-v: want exit 0, got %d; stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "with token ") || strings.Contains(r.stderr, "fence") {
		t.Errorf("-v: want the token and no fence, got:\n%s", r.stderr)
	}
	r = cli(t, nil, "run", "-v", "--fence", "--nodes", urls, "--key", key, "--", "true")
	if !strings.Contains(r.stderr, ", fence ") || strings.Contains(r.stderr, "fence 0") {
		t.Errorf("-v --fence: want a positive fence, got:\n%s", r.stderr)
	}

	c, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(context.Background(), key, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(context.Background()) }()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"-w", "0"}, exitNotObtained},
		{[]string{"-w", "100ms", "-E", "3"}, 3},
		{[]string{"--wait=0", "--conflict-exit-code", "0"}, 0},
	} {
		args := append(append([]string{"run", "--nodes", urls, "--key", key}, tc.args...), "--", "sh", "-c", "echo ran")
		r := cli(t, nil, args...)
		if r.code != tc.want || r.stdout != "" {
			t.Errorf("%v: want exit %d and no command run, got %d, %q; stderr:\n%s", tc.args, tc.want, r.code, r.stdout, r.stderr)
		}
	}
	r = cli(t, nil, "status", "--nodes", urls, "--key", key)
	if !strings.Contains(r.stdout, holderID(l.Token())) {
		t.Errorf("status: want the holder's token prefix, got:\n%s", r.stdout)
	}
}

// --key-prefix and REDLOCK_KEY_PREFIX put the lock where an application
// with that prefix keeps it; --restart-guard and REDLOCK_RESTART_GUARD
// refuse the votes of nodes that just started.
func TestRunKeyPrefixAndRestartGuard(t *testing.T) {
	_, clients, urls := cluster(t, 3)
	key := testKey(t)
	c, err := redlock.New(clients, redlock.WithKeyPrefix("app1:"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(context.Background(), key, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(context.Background()) }()

	nodes := map[string]string{envNodes: urls}
	if r := cli(t, nodes, "run", "--key", key, "-w", "0", "--", "true"); r.code != exitOK {
		t.Errorf("no prefix: want exit 0 (another key), got %d; stderr:\n%s", r.code, r.stderr)
	}
	if r := cli(t, nodes, "run", "--key-prefix", "app1:", "--key", key, "-w", "0", "--", "true"); r.code != exitNotObtained {
		t.Errorf("--key-prefix: want exit %d (held under the prefix), got %d; stderr:\n%s", exitNotObtained, r.code, r.stderr)
	} else if !strings.Contains(r.stderr, holderID(l.Token())+" holds 3 of 3") {
		t.Errorf("--key-prefix: want the holder named, got:\n%s", r.stderr)
	}
	env := map[string]string{envNodes: urls, envKeyPrefix: "app1:"}
	if r := cli(t, env, "run", "--key", key, "-w", "0", "--", "true"); r.code != exitNotObtained {
		t.Errorf("%s: want exit %d, got %d; stderr:\n%s", envKeyPrefix, exitNotObtained, r.code, r.stderr)
	}
	if r := cli(t, env, "status", "--key", key); !strings.Contains(r.stdout, "held by "+holderID(l.Token())) {
		t.Errorf("status with %s: want the holder, got:\n%s", envKeyPrefix, r.stdout)
	}

	// The nodes started seconds ago: a guard of an hour refuses them all.
	key2 := testKey(t)
	for _, env := range []map[string]string{nodes, {envNodes: urls, envRestartGuard: "1h"}} {
		args := []string{"run", "--key", key2, "-w", "0", "--", "true"}
		if env[envRestartGuard] == "" {
			args = append([]string{"run", "--restart-guard", "1h"}, args[1:]...)
		}
		r := cli(t, env, args...)
		if r.code != exitNotObtained || !strings.Contains(r.stderr, "restarted") {
			t.Errorf("%v %v: want exit %d, nodes refused as restarted, got %d; stderr:\n%s", env, args, exitNotObtained, r.code, r.stderr)
		}
	}
	if r := cli(t, map[string]string{envNodes: urls, envRestartGuard: "soon"}, "run", "--key", key2, "--", "true"); r.code != exitUsage || !strings.Contains(r.stderr, envRestartGuard) {
		t.Errorf("bad %s: want exit %d naming it, got %d; stderr:\n%s", envRestartGuard, exitUsage, r.code, r.stderr)
	}
}
