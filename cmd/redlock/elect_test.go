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

	"github.com/seed543a70bd/redlock"
)

// The command runs as leader, sees the election's name and its term, and
// its exit code passes through; redlock resigns afterwards, so the
// election's key is gone from every node. Nodes come from REDLOCK_NODES.
func TestElectRunsCommandAsLeader(t *testing.T) {
	_, clients, urls := cluster(t, 3)
	name := testKey(t)
	env := map[string]string{envNodes: urls}
	for _, code := range []int{0, 7} {
		script := `test "$REDLOCK_ELECTION" = "` + name + `" && test "$REDLOCK_TERM" -gt 0 || exit 99; echo ran; exit ` + strconv.Itoa(code)
		r := cli(t, env, "elect", "--ttl", "2s", name, "--", "sh", "-c", script)
		if r.code != code {
			t.Fatalf("want exit %d, got %d; stderr:\n%s", code, r.code, r.stderr)
		}
		if r.stdout != "ran\n" {
			t.Errorf("want the command's output, got %q", r.stdout)
		}
		released(t, clients, redlock.KeyName("election", name), len(clients))
	}
	r := cli(t, env, "elect", name, "--", "no-such-command-for-redlock")
	if r.code != exitNotFound || !strings.Contains(r.stderr, "no-such-command-for-redlock") {
		t.Errorf("missing command: want exit %d naming it, got %d:\n%s", exitNotFound, r.code, r.stderr)
	}
	released(t, clients, redlock.KeyName("election", name), len(clients))
}

// `redlock status --election NAME` reads the election's key without the
// user spelling it: the leader's metadata, its term and value.
func TestStatusShowsElection(t *testing.T) {
	_, clients, urls := cluster(t, 3)
	name := testKey(t)
	c, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	lead, err := c.Election(name).Campaign(ctx, "host-a", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lead.Resign(ctx) }()
	r := cli(t, map[string]string{envNodes: urls}, "status", "--election", name)
	if want := fmt.Sprintf("term %d: host-a", lead.Lock().Fence()); r.code != exitOK || !strings.Contains(r.stdout, want) {
		t.Errorf("want exit 0 and %q, got %d:\n%s%s", want, r.code, r.stdout, r.stderr)
	}
}

// Two `redlock elect` processes on one name: only one runs its command at
// a time, the other takes over when the first's command exits, with a
// greater term. The commands outlast half the TTL, so the leadership is
// also extended on the way. While one leads, `elect -w 0` is refused with
// 75 and the leader's value.
func TestElectOneLeaderAtATime(t *testing.T) {
	_, _, urls := cluster(t, 3)
	name := testKey(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	const procs = 2
	script := `echo "start $$ $REDLOCK_TERM" >>"$1"; sleep 1.1; echo "end $$" >>"$1"; exit 3`
	bin := redlockBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	codes := make([]int, procs)
	out := make([][]byte, procs)
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, bin, "elect", "--nodes", urls, "--ttl", "2s", "--value", fmt.Sprintf("candidate-%d", i), name, "--", "sh", "-c", script, "sh", log)
			out[i], _ = cmd.CombinedOutput()
			codes[i] = cmd.ProcessState.ExitCode()
		}()
	}
	// While one of them leads, a third candidate that makes one attempt
	// is refused, and told who leads.
	waitFile(t, log, 10*time.Second)
	r := cli(t, nil, "elect", "--nodes", urls, "-w", "0", name, "--", "sh", "-c", "echo ran")
	if r.code != exitNotObtained || r.stdout != "" || !strings.Contains(r.stderr, "candidate-") {
		t.Errorf("-w 0 while led: want exit %d, no command run, and the leader's value, got %d, %q; stderr:\n%s", exitNotObtained, r.code, r.stdout, r.stderr)
	}
	wg.Wait()
	for i, code := range codes {
		if code != 3 {
			t.Fatalf("elect %d: want the command's exit 3, got %d; output:\n%s", i, code, out[i])
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
	last := int64(0)
	for i := 0; i < len(lines); i += 2 {
		f := strings.Fields(lines[i])
		if len(f) != 3 || f[0] != "start" || lines[i+1] != "end "+f[1] {
			t.Fatalf("want each start followed by its own end (no overlap), got:\n%s", b)
		}
		term, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || term <= last {
			t.Fatalf("want rising terms, got:\n%s", b)
		}
		last = term
	}
}

// A leader whose command is killed resigns (exit 128+9), and the waiting
// candidate's command starts at once: a hand-off, not a wait for the TTL
// (60s here).
func TestElectHandsOverWhenCommandKilled(t *testing.T) {
	_, _, urls := cluster(t, 3)
	name := testKey(t)
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	script := `echo $$ >"$1"; while :; do sleep 0.05; done`
	a := cliAsync(t, nil, "elect", "--nodes", urls, "--ttl", "60s", "--value", "a", name, "--", "sh", "-c", script, "sh", first)
	pid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, first, 10*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	b := cliAsync(t, nil, "elect", "--nodes", urls, "--ttl", "60s", "--value", "b", name, "--", "sh", "-c", `echo $REDLOCK_TERM >"$1"`, "sh", second)
	// b is waiting once it reads a as the leader (its first attempt lost).
	r := cli(t, nil, "elect", "--nodes", urls, "-w", "0", name, "--", "true")
	if r.code != exitNotObtained {
		t.Fatalf("want a leading, got exit %d; stderr:\n%s", r.code, r.stderr)
	}
	select {
	case r := <-b:
		t.Fatalf("b ran while a led: exit %d; stderr:\n%s", r.code, r.stderr)
	default:
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if r := await(t, a, 10*time.Second); r.code != exitSignal+int(syscall.SIGKILL) {
		t.Errorf("a: want exit %d, got %d; stderr:\n%s", exitSignal+int(syscall.SIGKILL), r.code, r.stderr)
	}
	if r := await(t, b, 10*time.Second); r.code != exitOK {
		t.Fatalf("b: want exit 0 (elected after a resigned), got %d; stderr:\n%s", r.code, r.stderr)
	}
	if term, err := strconv.Atoi(strings.TrimSpace(waitFile(t, second, time.Second))); err != nil || term < 2 {
		t.Errorf("b: want a term of 2 or more, got %q", waitFile(t, second, time.Second))
	}
}

// Leadership lost, because the election's key was deleted on a majority
// of nodes or because a majority of nodes died: the command's whole
// process group is killed (SIGTERM, then SIGKILL after --grace) and
// redlock exits 70, as run does.
func TestElectLeadershipLost(t *testing.T) {
	cases := []struct {
		name  string
		lose  func(t *testing.T, nodes []func() error, del func(i int))
		grace string
	}{
		{"keys deleted on a majority", func(t *testing.T, _ []func() error, del func(int)) { del(0); del(1) }, "10s"},
		{"majority of nodes killed", func(t *testing.T, kill []func() error, _ func(int)) {
			for _, k := range kill[:2] {
				if err := k(); err != nil {
					t.Fatal(err)
				}
			}
		}, "300ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes, clients, urls := cluster(t, 3)
			name := testKey(t)
			dir := t.TempDir()
			started := filepath.Join(dir, "started")
			// The command leaves a grandchild in its group: it must go
			// too. It ignores SIGTERM, so only the SIGKILL after
			// --grace ends it in the second case.
			script := `trap 'exit 3' TERM; sleep 60 & echo $$ >"$1"; while :; do sleep 0.05; done`
			if tc.grace == "300ms" {
				script = `trap '' TERM; sleep 60 & echo $$ >"$1"; while :; do sleep 0.05; done`
			}
			res := cliAsync(t, nil, "elect", "--nodes", urls, "--ttl", "1s", "--grace", tc.grace, name,
				"--", "sh", "-c", script, "sh", started)
			pid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, started, 10*time.Second)))
			if err != nil {
				t.Fatal(err)
			}
			pgid := pgidOf(t, pid)
			kill := make([]func() error, len(nodes))
			for i, n := range nodes {
				kill[i] = n.Kill
			}
			tc.lose(t, kill, func(i int) {
				if err := clients[i].Del(context.Background(), redlock.KeyName("election", name)).Err(); err != nil {
					t.Fatal(err)
				}
			})
			r := await(t, res, 15*time.Second)
			if r.code != exitLockLost {
				t.Fatalf("want exit %d (leadership lost), got %d; stderr:\n%s", exitLockLost, r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, "redlock elect: leadership of "+strconv.Quote(name)+": ") || !strings.Contains(r.stderr, "lost") {
				t.Errorf("want stderr to say the leadership was lost, got:\n%s", r.stderr)
			}
			eventually(t, 5*time.Second, func() bool { return len(liveInGroup(t, pgid)) == 0 },
				"want the command's process group gone, got processes %v", liveInGroup(t, pgid))
		})
	}
}

// pgidOf returns the process group of pid, from /proc (skipping the test
// where there is none).
func pgidOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Skip("no /proc to read process groups")
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:])) // state ppid pgrp ...
	pgid, err := strconv.Atoi(f[2])
	if err != nil {
		t.Fatalf("/proc/%d/stat: %v", pid, err)
	}
	return pgid
}

// --observe prints one line per leader, "TERM VALUE", in term order, and
// exits 0 on SIGINT. Each leader's command waits until the observer has
// printed it, so that none is skipped for being too short.
func TestElectObservePrintsLeadersInTermOrder(t *testing.T) {
	_, _, urls := cluster(t, 3)
	name := testKey(t)
	outFile := filepath.Join(t.TempDir(), "observed")
	f, err := os.Create(outFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	obs := exec.Command(redlockBin(t), "elect", "--observe", "--nodes", urls, name)
	obs.Stdout = f
	errb := &lockedBuffer{}
	obs.Stderr = errb
	if err := obs.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if obs.ProcessState == nil {
			_ = obs.Process.Kill()
			_ = obs.Wait()
		}
	})
	values := []string{"first leader", "second", "third"}
	for _, v := range values {
		wait := `while ! grep -q " $1\$" "$2"; do sleep 0.02; done`
		r := cli(t, nil, "elect", "--nodes", urls, "--value", v, name, "--", "sh", "-c", wait, "sh", v, outFile)
		if r.code != exitOK {
			t.Fatalf("elect %q: want exit 0, got %d; stderr:\n%s", v, r.code, r.stderr)
		}
	}
	if err := obs.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- obs.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("--observe did not exit within 10s of SIGINT; stderr:\n%s", errb)
	}
	if code := obs.ProcessState.ExitCode(); code != exitOK {
		t.Errorf("--observe after SIGINT: want exit 0, got %d; stderr:\n%s", code, errb)
	}
	b, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != len(values) {
		t.Fatalf("want %d lines, one per leader, got:\n%s", len(values), b)
	}
	last := int64(0)
	for i, l := range lines {
		term, value, _ := strings.Cut(l, " ")
		n, err := strconv.ParseInt(term, 10, 64)
		if err != nil || n <= last || value != values[i] {
			t.Fatalf("want \"TERM VALUE\" lines with rising terms and values %q in order, got:\n%s", values, b)
		}
		last = n
	}
}
