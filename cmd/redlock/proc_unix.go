//go:build unix

package main

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// forwardedSignals are passed on to the command.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// child is the command that run supervises.
//
// By default it runs in a process group of its own, as with timeout(1): a
// loss of the lock then reaches every process the command started (a
// shell's children too), and a Ctrl-C at the terminal reaches the command
// once, forwarded by redlock, not twice. The price: the command is not in
// the terminal's foreground group, and is stopped if it reads from it.
//
// With --foreground it stays in redlock's group, so it can read from the
// terminal; the terminal's SIGINT and SIGHUP then reach it directly and
// are not forwarded, and a lost lock signals the command alone, not the
// processes it started.
//
// Without --foreground the command runs under a supervisor that leads the
// group and SIGKILLs it if redlock itself dies, even of SIGKILL, since
// nobody would extend its lock any more (supervise_unix.go): at once on
// Linux, within parentPoll elsewhere. With --foreground only the command
// itself is SIGKILLed, and only on Linux (Pdeathsig).
type child struct {
	cmd   *exec.Cmd
	group bool
}

func newChild(cmd *exec.Cmd, foreground bool) *child {
	if foreground || !superviseArgs(cmd) {
		cmd.SysProcAttr = sysProcAttr(!foreground)
	}
	return &child{cmd: cmd, group: !foreground}
}

// forward passes on a signal that redlock received.
func (c *child) forward(sig os.Signal) {
	if !c.group && sig != syscall.SIGTERM {
		return // the terminal sent it to the command too
	}
	c.signal(sig)
}

// signal sends sig to the command (its group, by default), then SIGCONT
// so that a command stopped by the terminal (SIGTTIN) acts on it.
func (c *child) signal(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		_ = c.cmd.Process.Signal(sig)
		return
	}
	pid := c.cmd.Process.Pid
	if c.group {
		pid = -pid
	}
	if err := syscall.Kill(pid, s); errors.Is(err, syscall.ESRCH) {
		return // already gone
	}
	if s != syscall.SIGKILL {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}

// killRest SIGKILLs what is left of the command's process group after the
// command exited (nothing with --foreground: its pid may be reused).
func (c *child) killRest() {
	if c.group {
		c.signal(syscall.SIGKILL)
	}
}

// signalNumber returns the number of a signal for the 128+n exit code.
func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

// exitStatus returns the command's exit code, 128+n when a signal ended it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignal + int(ws.Signal())
	}
	return ps.ExitCode()
}

// notifySignals relays forwardedSignals to ch until stop is called.
func notifySignals(ch chan<- os.Signal) (stop func()) {
	signal.Notify(ch, forwardedSignals...)
	return func() { signal.Stop(ch) }
}

var (
	sigTerm os.Signal = syscall.SIGTERM
	sigKill os.Signal = syscall.SIGKILL
)
