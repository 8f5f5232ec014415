package main

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed543a70bd/redlock"
)

// --wait bounds the whole wait, from the start to the exit: the last
// round's stragglers, the read of the holders and the clean-up of the
// clients fit inside it, whether the nodes refuse connections (killed),
// hang (stopped), or hold the lock for another owner while one hangs.
// Before, --wait 2s with two of three nodes killed returned after about
// 2.6s, with two stopped after 3s, held with one stopped after 3.5s: two
// per-node timeouts of stragglers, the holders' read and Close came after
// the wait.
func TestRunWaitBoundsTheWholeWait(t *testing.T) {
	const wait = 2 * time.Second
	const slack = 250 * time.Millisecond // a stalled, loaded machine
	for _, mode := range []string{"killed", "stopped", "held, one stopped"} {
		t.Run(mode, func(t *testing.T) {
			nodes, clients, urls := cluster(t, 3)
			key := testKey(t)
			t.Cleanup(func() {
				for _, n := range nodes {
					_ = n.Resume()
				}
			})
			switch mode {
			case "killed", "stopped":
				for _, n := range nodes[1:] {
					stop := n.Kill
					if mode == "stopped" {
						stop = n.Pause
					}
					err := stop()
					if err != nil {
						t.Fatal(err)
					}
				}
			default:
				c, err := redlock.New(clients)
				if err != nil {
					t.Fatal(err)
				}
				l, err := c.TryLock(context.Background(), key, 20*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				eventually(t, 5*time.Second, func() bool { return get(t, clients[2], key) != "" }, "want the key on every node")
				if err := nodes[2].Pause(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = nodes[2].Resume(); _ = l.Unlock(context.Background()) })
			}
			start := time.Now()
			r := cli(t, nil, "run", "--nodes", urls, "--key", key, "--wait", wait.String(), "--", "true")
			el := time.Since(start)
			if r.code != exitNotObtained || !strings.Contains(r.stderr, "not obtained within 2s") {
				t.Fatalf("want exit %d, not obtained, got %d; stderr:\n%s", exitNotObtained, r.code, r.stderr)
			}
			if el > wait+slack {
				t.Errorf("want redlock to return within --wait %v (+%v), took %v; stderr:\n%s", wait, slack, el, r.stderr)
			}
			if el < wait/2 {
				t.Errorf("want the attempts to go on for at least half of --wait %v, returned after %v", wait, el)
			}
		})
	}
}

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
	heldElsewhere(t, clients, key, 20*time.Second)
	if d := medianRun(t, 5, exitNotObtained, "run", "--nodes", urls, "--key", key, "--wait", "0", "--", "true"); d > bound {
		t.Errorf("held lock, --wait 0: want a median run under %v, got %v", bound, d)
	}
}
