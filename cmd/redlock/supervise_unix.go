//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// superviseCmd is the hidden command that runs the command of `redlock
// run` in its own process group and takes that group down when redlock
// dies.
//
// Why a separate process: a parent-death signal (Linux's Pdeathsig) set
// on the command reaches the command alone. A shell that runs `sleep 30 &`
// dies of it, and the sleep keeps running, without the lock, once nobody
// extends it. Nothing can catch SIGKILL sent to redlock itself, so the
// process that reacts must be another one: the supervisor, redlock re-run
// as `redlock __supervise PPID PATH ARGV...`, leads the new group, gets
// SIGTERM when redlock dies (Pdeathsig on Linux; elsewhere it polls its
// parent every parentPoll), and SIGKILLs the group, itself included.
// Signals sent to the group (a lost lock, forwarded signals) reach the
// supervisor too; it ignores them while redlock lives, and the command
// acts on them. It exits with the command's status (128+n for signal n).
const superviseCmd = "__supervise"

// superviseArgs wraps cmd so that the supervisor runs it. It returns
// false, leaving cmd as it is, when redlock cannot find its own
// executable or cmd cannot start anyway (cmd.Err: not found), so that the
// error is reported as before.
func superviseArgs(cmd *exec.Cmd) bool {
	if cmd.Err != nil {
		return false
	}
	self, err := os.Executable()
	if err != nil {
		return false
	}
	args := append([]string{self, superviseCmd, strconv.Itoa(os.Getpid()), cmd.Path}, cmd.Args...)
	cmd.Path, cmd.Args = self, args
	cmd.SysProcAttr = supervisorAttr()
	return true
}

// cmdSupervise implements superviseCmd: args are PPID PATH ARGV...
func cmdSupervise(args []string, stderr io.Writer) int {
	if len(args) < 3 {
		fmt.Fprintln(stderr, "redlock: "+superviseCmd+" is internal to redlock run")
		return exitUsage
	}
	ppid, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "redlock: "+superviseCmd+" is internal to redlock run")
		return exitUsage
	}
	// Every signal is caught: none may end the supervisor by default
	// while the command runs (SIGHUP, SIGUSR1, ...). The command starts
	// with default handlers all the same (exec resets caught signals).
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs)
	defer signal.Stop(sigs)
	orphaned := func() bool { return os.Getppid() != ppid }
	if orphaned() { // redlock died before the handlers were in place
		return exitSignal + int(syscall.SIGKILL)
	}
	cmd := &exec.Cmd{Path: args[1], Args: args[2:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "redlock run: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotRun
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	var tick <-chan time.Time
	if parentPoll > 0 {
		t := time.NewTicker(parentPoll)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-exited:
			return exitStatus(cmd.ProcessState)
		case <-sigs:
		case <-tick:
		}
		if orphaned() {
			_ = syscall.Kill(0, syscall.SIGKILL) // the group: the command, what it started, and this process
		}
	}
}
