package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

// A lock held by someone else is not obtained within --wait: exit 75.
func TestRunNotObtained(t *testing.T) {
	_, clients, urls := cluster(t, 3)
	key := testKey(t)
	l := heldElsewhere(t, clients, key, 10*time.Second)
	for _, wait := range []string{"0", "1s"} {
		start := time.Now()
		r := cli(t, nil, "run", "--nodes", urls, "--key", key, "--wait", wait, "--", "sh", "-c", "echo ran")
		if r.code != exitNotObtained || r.stdout != "" {
			t.Fatalf("--wait %s: want exit %d and no command run, got %d, %q; stderr:\n%s", wait, exitNotObtained, r.code, r.stdout, r.stderr)
		}
		want := "held by another owner: " + holderID(l.Token()) + " holds 3 of 3 nodes"
		if !strings.Contains(r.stderr, "not obtained") || !strings.Contains(r.stderr, want) {
			t.Errorf("--wait %s: want the reason naming the holder, %q, got:\n%s", wait, want, r.stderr)
		}
		if wait == "1s" && !strings.Contains(r.stderr, "not obtained within 1s: held by another owner") {
			t.Errorf("--wait 1s: want the wait and the reason, got:\n%s", r.stderr)
		}
		if !strings.Contains(r.stderr, "node 2 (redis://") {
			t.Errorf("--wait %s: want per-node results, numbered from 1, got:\n%s", wait, r.stderr)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("--wait %s: want a prompt return, took %v", wait, el)
		}
	}
}

// Concurrent `redlock run` processes on one key serialize: the windows of
// their commands never overlap. The commands hold the lock for longer than
// half the TTL, so the lock is also extended on the way.
func TestRunSerializes(t *testing.T) {
	_, _, urls := cluster(t, 3)
	key := testKey(t)
	log := filepath.Join(t.TempDir(), "log")
	const procs = 3
	script := `echo "start $$" >>"$1"; sleep 1.1; echo "end $$" >>"$1"`
	bin := redlockBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, procs)
	out := make([][]byte, procs)
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, bin, "run", "--nodes", urls, "--key", key, "--ttl", "2s", "--", "sh", "-c", script, "sh", log)
			out[i], errs[i] = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("run %d: %v; output:\n%s", i, err, out[i])
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*procs {
		t.Fatalf("want %d lines, got:\n%s", 2*procs, b)
	}
	for i := 0; i < len(lines); i += 2 {
		pid, ok := strings.CutPrefix(lines[i], "start ")
		if !ok || lines[i+1] != "end "+pid {
			t.Fatalf("want each start followed by its own end (no overlap), got:\n%s", b)
		}
	}
}

// A node killed while the command runs does not break it: the lock is
// still extended by the other nodes, past its TTL, and the command's exit
// code passes through.
func TestRunSurvivesNodeKill(t *testing.T) {
	nodes, clients, urls := cluster(t, 5)
	key := testKey(t)
	dir := t.TempDir()
	started, goFile := filepath.Join(dir, "started"), filepath.Join(dir, "go")
	script := `echo yes >"$1"; while [ ! -f "$2" ]; do sleep 0.02; done; exit 4`
	res := cliAsync(t, nil, "run", "--nodes", urls, "--key", key, "--ttl", "2s", "--", "sh", "-c", script, "sh", started, goFile)
	waitFile(t, started, 10*time.Second)
	// Kill a node that holds the key, unless the holder has no more than
	// a bare quorum (a straggling grant may not have landed under load):
	// Redlock then cannot lose a node it holds, so kill one it does not.
	victim, holders := -1, 0
	for i, c := range clients {
		if get(t, c, key) != "" {
			holders++
			if victim < 0 {
				victim = i
			}
		}
	}
	if holders < 4 {
		for i, c := range clients {
			if get(t, c, key) == "" {
				victim = i
				break
			}
		}
	}
	if err := nodes[victim].Kill(); err != nil {
		t.Fatal(err)
	}
	live := append(append([]redis.UniversalClient(nil), clients[:victim]...), clients[victim+1:]...)
	// Wait for two extensions after the kill: each time, the PTTL on the
	// live nodes that hold the key jumps back up.
	ctx := context.Background()
	for range 2 {
		low := make([]time.Duration, len(clients))
		for i := range low {
			low[i] = time.Hour
		}
		eventually(t, 5*time.Second, func() bool {
			select {
			case r := <-res:
				t.Fatalf("redlock run ended early: exit %d; stderr:\n%s", r.code, r.stderr)
			default:
			}
			for i, c := range live {
				p := c.PTTL(ctx, key).Val()
				if p > 0 && p > low[i]+300*time.Millisecond {
					return true
				}
				if p > 0 {
					low[i] = min(low[i], p)
				}
			}
			return false
		}, "want the lock extended after node %d was killed", victim+1)
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := await(t, res, 10*time.Second)
	if r.code != 4 {
		t.Fatalf("want the command's exit code 4, got %d; stderr:\n%s", r.code, r.stderr)
	}
	released(t, live, key, len(live))
}

// SIGINT and SIGTERM sent to redlock reach the command, whose exit code
// passes through; a signal while waiting for the lock ends the wait.
func TestRunForwardsSignals(t *testing.T) {
	_, clients, urls := cluster(t, 3)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			key := testKey(t)
			ready := filepath.Join(t.TempDir(), "ready")
			script := `trap 'exit 5' ` + strings.TrimPrefix(sigName(sig), "SIG") + `; echo $$ >"$1"; while :; do sleep 0.05; done`
			cmd := exec.Command(redlockBin(t), "run", "--nodes", urls, "--key", key, "--", "sh", "-c", script, "sh", ready)
			out := startProc(t, cmd)
			waitFile(t, ready, 10*time.Second)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := waitProc(t, cmd, out); code != 5 {
				t.Fatalf("want the command's trap exit code 5, got %d; output:\n%s", code, out)
			}
			// Unlock waits for every node it can reach before the
			// process exits.
			released(t, clients, key, len(clients))
		})
	}
	t.Run("while waiting", func(t *testing.T) {
		key := testKey(t)
		c, err := redlock.New(clients)
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.TryLock(context.Background(), key, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Unlock(context.Background()) }()
		before := connections(t, clients[0])
		cmd := exec.Command(redlockBin(t), "run", "--nodes", urls, "--key", key, "--", "true")
		out := startProc(t, cmd)
		// Waiting means connected to the nodes and retrying.
		eventually(t, 10*time.Second, func() bool { return connections(t, clients[0]) > before },
			"want redlock run connected to node 1")
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		want := exitSignal + int(syscall.SIGTERM)
		if code := waitProc(t, cmd, out); code != want {
			t.Fatalf("want exit %d, got %d; output:\n%s", want, code, out)
		}
	})
}

// released waits until at least n of the nodes no longer hold key.
func released(t *testing.T, clients []redis.UniversalClient, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		free := 0
		var held strings.Builder
		for i, c := range clients {
			if v := get(t, c, key); v == "" {
				free++
			} else {
				fmt.Fprintf(&held, " node %d: %s;", i+1, v)
			}
		}
		if free >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5s: want %q released on %d nodes, got %d; held on%s", key, n, free, held.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// liveInGroup returns the processes of group pgid that are not zombies
// (in a container, nobody may reap orphaned zombies). It reads /proc and
// skips the test where there is none.
func liveInGroup(t *testing.T, pgid int) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		t.Skip("no /proc to list process groups")
	}
	var live []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) || f[0] == "Z" {
			continue
		}
		pid, _ := strconv.Atoi(strings.Fields(string(b))[0])
		live = append(live, pid)
	}
	return live
}

func sigName(s syscall.Signal) string {
	if s == syscall.SIGINT {
		return "INT"
	}
	return "TERM"
}

// lockedBuffer is an io.Writer safe for a process's output and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startProc starts cmd, collecting its output; it is killed if the test
// ends first.
func startProc(t *testing.T, cmd *exec.Cmd) *lockedBuffer {
	t.Helper()
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return out
}

// waitProc waits up to 10s for cmd and returns its exit code.
func waitProc(t *testing.T, cmd *exec.Cmd, out *lockedBuffer) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("redlock did not exit within 10s; output:\n%s", out)
		return -1
	}
}

// connections returns how many clients are connected to c's node.
func connections(t *testing.T, c redis.UniversalClient) int {
	t.Helper()
	list, err := c.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, "\n")
}

// --fence passes an increasing fencing token in REDLOCK_FENCE, and status
// shows the counter.
func TestRunFence(t *testing.T) {
	_, _, urls := cluster(t, 3)
	key := testKey(t)
	var fences []int
	for range 2 {
		r := cli(t, nil, "run", "--fence", "--nodes", urls, "--key", key, "--", "sh", "-c", `echo "$REDLOCK_FENCE"`)
		f, err := strconv.Atoi(strings.TrimSpace(r.stdout))
		if r.code != exitOK || err != nil || f <= 0 {
			t.Fatalf("want exit 0 and a positive REDLOCK_FENCE, got %d, %q; stderr:\n%s", r.code, r.stdout, r.stderr)
		}
		fences = append(fences, f)
	}
	if fences[1] <= fences[0] {
		t.Fatalf("want increasing fences, got %v", fences)
	}
	r := cli(t, nil, "status", "--nodes", urls, "--key", key)
	if want := strconv.Itoa(fences[1]); !strings.Contains(r.stdout, "  "+want+"\n") {
		t.Errorf("status: want the fence counter %s, got:\n%s", want, r.stdout)
	}
}

// Twenty quick runs of a command that exits at once: when redlock
// returns, every node has released the key (nothing waits for a TTL).
// Before, run returned once a majority had released, and its process
// exited before the rest landed: 1-4 of 10 runs left the key on one node.
func TestRunLeavesNoKey(t *testing.T) {
	_, clients, urls := cluster(t, 3)
	key := testKey(t)
	for i := range 20 {
		cmd := exec.Command(redlockBin(t), "run", "--nodes", urls, "--key", key, "--ttl", "30s", "--", "true")
		out := startProc(t, cmd)
		if code := waitProc(t, cmd, out); code != 0 {
			t.Fatalf("run %d: want exit 0, got %d; output:\n%s", i, code, out)
		}
		for n, c := range clients {
			if v := get(t, c, key); v != "" {
				t.Fatalf("run %d: want the key released on every node when redlock returns, node %d still holds %s", i, n+1, v)
			}
		}
	}
}

// One server under two names (127.0.0.1 and localhost), which only the
// library's identification of the nodes finds, is refused with both
// nodes named by URL, as status and a URL given twice name them. Before,
// run said "nodes 1 and 3 are the same server".
func TestRunSameServerTwiceNamesBothURLs(t *testing.T) {
	nodes, _, urls := cluster(t, 2)
	alias := strings.Replace(nodes[0].URL(), "127.0.0.1", "localhost", 1)
	r := cli(t, nil, "run", "--nodes", urls+","+alias, "--key", testKey(t), "--", "true")
	if r.code != exitUsage {
		t.Fatalf("want exit %d, got %d; stderr:\n%s", exitUsage, r.code, r.stderr)
	}
	want := fmt.Sprintf(`redlock run: node 3 %q is node 1 %q again (the same server, run_id `, alias, "redis://"+nodes[0].Addr())
	if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "): each node must be a distinct Redis master") {
		t.Errorf("want stderr containing %q, got:\n%s", want, r.stderr)
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

	l := heldElsewhere(t, clients, key, 20*time.Second)
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
