//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

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

// superviseArgs puts the supervisor (this binary, __supervise PPID PATH
// ARGV...) in front of a command, and leaves a command that cannot start
// as it is, so that its error is reported as the command's.
func TestSuperviseArgsWrapsCommand(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Skip("no executable path:", err)
	}
	cmd := exec.Command("sh", "-c", "true")
	path := cmd.Path
	if !superviseArgs(cmd) {
		t.Fatal("want the command wrapped, got false")
	}
	want := []string{self, superviseCmd, strconv.Itoa(os.Getpid()), path, "sh", "-c", "true"}
	if cmd.Path != self || !slices.Equal(cmd.Args, want) || cmd.SysProcAttr == nil {
		t.Errorf("want path %s, args %q and the supervisor's attributes, got %s, %q, %v", self, want, cmd.Path, cmd.Args, cmd.SysProcAttr)
	}

	missing := exec.Command("no-such-command-for-redlock")
	if superviseArgs(missing) || missing.Path != "no-such-command-for-redlock" || len(missing.Args) != 1 {
		t.Errorf("a command not found: want it left as it is, got %s %q", missing.Path, missing.Args)
	}
}

// The supervisor refuses arguments it was not given by redlock run, runs
// nothing when redlock is already gone (its parent is not PPID), and
// otherwise exits as the command did: its code, 128+n for a signal, 127
// when not found, 126 when it cannot start.
func TestSuperviseExitStatus(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh:", err)
	}
	ppid := strconv.Itoa(os.Getppid())
	marker := filepath.Join(t.TempDir(), "ran")
	for _, tc := range []struct {
		name   string
		args   []string
		want   int
		stderr string
	}{
		{"no arguments", nil, exitUsage, "is internal to redlock run"},
		{"too few", []string{ppid, sh}, exitUsage, "is internal to redlock run"},
		{"bad ppid", []string{"x", sh, "sh", "-c", "true"}, exitUsage, "is internal to redlock run"},
		{"orphaned", []string{"-1", sh, "sh", "-c", `echo >"$1"`, "sh", marker}, exitSignal + int(syscall.SIGKILL), ""},
		{"exit code", []string{ppid, sh, "sh", "-c", "exit 3"}, 3, ""},
		{"signal", []string{ppid, sh, "sh", "-c", "kill -TERM $$"}, exitSignal + int(syscall.SIGTERM), ""},
		{"not found", []string{ppid, "/no/such/redlock-command", "redlock-command"}, exitNotFound, "redlock run: "},
		{"cannot start", []string{ppid, t.TempDir(), "dir"}, exitCannotRun, "redlock run: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if code := cmdSupervise(tc.args, &b); code != tc.want {
				t.Errorf("want exit %d, got %d; stderr:\n%s", tc.want, code, b.String())
			}
			if tc.stderr == "" && b.Len() != 0 || !strings.Contains(b.String(), tc.stderr) {
				t.Errorf("want stderr containing %q, got %q", tc.stderr, b.String())
			}
		})
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("orphaned: want the command not run, found its marker")
	}
}
