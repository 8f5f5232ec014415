package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed543a70bd/redlock"
)

// A real command runs under the lock, sees REDLOCK_KEY, and its exit code
// passes through; the lock is released afterwards. Nodes come from
// REDLOCK_NODES.
func TestRunExitCodePassesThrough(t *testing.T) {
	_, clients, urls := cluster(t, 3)
	key := testKey(t)
	env := map[string]string{envNodes: urls}
	for _, code := range []int{0, 7} {
		script := `test "$REDLOCK_KEY" = "` + key + `" || exit 99; echo ran; exit ` + strconv.Itoa(code)
		r := cli(t, env, "run", "--key", key, "--ttl", "2s", "--", "sh", "-c", script)
		if r.code != code {
			t.Fatalf("want exit %d, got %d; stderr:\n%s", code, r.code, r.stderr)
		}
		if r.stdout != "ran\n" {
			t.Errorf("want the command's output, got %q", r.stdout)
		}
		released(t, clients, key, len(clients))
	}
	r := cli(t, env, "run", "--foreground", "--key", key, "--", "sh", "-c", "exit 3")
	if r.code != 3 {
		t.Errorf("--foreground: want exit 3, got %d; stderr:\n%s", r.code, r.stderr)
	}
	r = cli(t, env, "run", "--key", key, "--", "sh", "-c", "kill -TERM $$")
	if want := exitSignal + int(syscall.SIGTERM); r.code != want {
		t.Errorf("command killed by SIGTERM: want exit %d, got %d", want, r.code)
	}
	r = cli(t, env, "run", "--key", key, "--", "no-such-command-for-redlock")
	if r.code != exitNotFound || !strings.Contains(r.stderr, "no-such-command-for-redlock") {
		t.Errorf("missing command: want exit %d naming it, got %d:\n%s", exitNotFound, r.code, r.stderr)
	}
	released(t, clients, key, len(clients))
}

// A lock lost because a majority of nodes died terminates the command:
// SIGTERM to its process group, then SIGKILL after --grace; exit 70.
func TestRunLockLost(t *testing.T) {
	cases := []struct {
		name   string
		script string // $1: marker file written once running; $2: file for the TERM trap
		grace  string
		term   bool // the command sees SIGTERM and exits by itself
	}{
		{"command exits on SIGTERM", `trap 'echo term >"$2"; exit 3' TERM; echo $$ >"$1"; while :; do sleep 0.05; done`, "10s", true},
		{"command ignores SIGTERM", `trap '' TERM; echo $$ >"$1"; while :; do sleep 0.05; done`, "300ms", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes, _, urls := cluster(t, 3)
			key := testKey(t)
			dir := t.TempDir()
			started, termed := filepath.Join(dir, "started"), filepath.Join(dir, "term")
			res := cliAsync(t, nil, "run", "--nodes", urls, "--key", key, "--ttl", "1s", "--grace", tc.grace,
				"--", "sh", "-c", tc.script, "sh", started, termed)
			pid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, started, 10*time.Second)))
			if err != nil {
				t.Fatal(err)
			}
			// The group is the supervisor's, which the shell is in.
			pgid := pgidOf(t, pid)
			killedAt := time.Now()
			for _, n := range nodes[:2] {
				if err := n.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			r := await(t, res, 15*time.Second)
			if r.code != exitLockLost {
				t.Fatalf("want exit %d (lock lost), got %d; stderr:\n%s", exitLockLost, r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, "lost") {
				t.Errorf("want stderr to say the lock was lost, got:\n%s", r.stderr)
			}
			// What is done about it is a line of its own, not glued to
			// the last node's line of the reason.
			if !strings.Contains("\n"+r.stderr, "\nredlock run: sending SIGTERM to the command, SIGKILL in "+tc.grace+"\n") || strings.Contains(r.stderr, "; sending") {
				t.Errorf("want \"redlock run: sending SIGTERM ...\" on a line of its own, got:\n%s", r.stderr)
			}
			if el := time.Since(killedAt); el > 10*time.Second {
				t.Errorf("want the command ended within the TTL plus grace, took %v", el)
			}
			_, err = os.Stat(termed)
			if got := err == nil; got != tc.term {
				t.Errorf("want the TERM trap run = %v, got %v", tc.term, got)
			}
			// Nothing of the command's process group is left running.
			eventually(t, 5*time.Second, func() bool { return len(liveInGroup(t, pgid)) == 0 },
				"want the command's process group gone, got processes %v", liveInGroup(t, pgid))
		})
	}
}

// A command whose context ends while the lock is still held (redlock
// itself is told to stop) is ended as after a lost lock: SIGTERM to its
// process group, then SIGKILL after the grace, or SIGKILL at once with
// no grace, each step on a line of its own. The lock was held to the
// end, so the command's own status is the result, and ended says that
// the caller releases the lock.
func TestCommandEndedWhenContextEnds(t *testing.T) {
	_, clients, _ := cluster(t, 3)
	lk, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	// The TERM trap exits 9, so a SIGKILL sent where SIGTERM was due
	// (or the reverse) shows in the code.
	const script = `trap 'exit 9' TERM; echo $$ >"$1"; while :; do sleep 0.05; done`
	for _, tc := range []struct {
		name  string
		grace time.Duration
		want  int
		line  string
	}{
		{"grace", 10 * time.Second, 9, "redlock run: sending SIGTERM to the command, SIGKILL in 10s"},
		{"no grace", 0, exitSignal + int(syscall.SIGKILL), "redlock run: sending SIGKILL to the command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := testKey(t)
			l, err := lk.TryLock(context.Background(), key, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Unlock(context.Background()) })
			started := filepath.Join(t.TempDir(), "started")
			c := &command{
				prog:    "redlock run",
				what:    fmt.Sprintf("lock %q", key),
				argv:    []string{"sh", "-c", script, "sh", started},
				grace:   tc.grace,
				explain: func(err error) string { return err.Error() },
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			type ret struct {
				code  int
				ended bool
			}
			done := make(chan ret, 1)
			var stderr lockedBuffer
			go func() {
				code, ended := c.runUnder(ctx, l, nil, io.Discard, &stderr)
				done <- ret{code, ended}
			}()
			pid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, started, 10*time.Second)))
			if err != nil {
				t.Fatal(err)
			}
			pgid := pgidOf(t, pid)
			if len(liveInGroup(t, pgid)) == 0 {
				t.Fatalf("want the command running in process group %d, found none", pgid)
			}
			cancel(errors.New("told to stop"))
			var r ret
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("want runUnder to return after its context ended, still running; stderr:\n%s", stderr.String())
			}
			if r.code != tc.want || !r.ended {
				t.Errorf("want code %d and ended (the lock still held), got %d, %v; stderr:\n%s", tc.want, r.code, r.ended, stderr.String())
			}
			for _, want := range []string{"redlock run: cancelled: told to stop", tc.line} {
				if !strings.Contains("\n"+stderr.String(), "\n"+want+"\n") {
					t.Errorf("want the line %q, got:\n%s", want, stderr.String())
				}
			}
			if l.Err() != nil {
				t.Errorf("want the lock still held, got %v", l.Err())
			}
			eventually(t, 5*time.Second, func() bool { return len(liveInGroup(t, pgid)) == 0 },
				"want the command's process group gone, got processes %v", liveInGroup(t, pgid))
		})
	}
}
