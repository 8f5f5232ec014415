//go:build !unix

package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
)

// Outside Unix there are no process groups or SIGTERM: the command is
// killed outright when the lock is lost, and only os.Interrupt is caught.
var forwardedSignals = []os.Signal{os.Interrupt}

type child struct{ cmd *exec.Cmd }

func newChild(cmd *exec.Cmd, foreground bool) *child { return &child{cmd: cmd} }

// superviseCmd is the supervisor of Unix systems; there is none here.
const superviseCmd = "__supervise"

func cmdSupervise(args []string, stderr io.Writer) int {
	fmt.Fprintln(stderr, "redlock: "+superviseCmd+" is internal to redlock run on Unix")
	return exitUsage
}

func (c *child) forward(sig os.Signal) { _ = c.cmd.Process.Signal(sig) }

func (c *child) signal(os.Signal) { _ = c.cmd.Process.Kill() }

func (c *child) killRest() {}

func signalNumber(os.Signal) int { return 2 }

func exitStatus(ps *os.ProcessState) int { return ps.ExitCode() }

func notifySignals(ch chan<- os.Signal) (stop func()) {
	signal.Notify(ch, forwardedSignals...)
	return func() { signal.Stop(ch) }
}

var (
	sigTerm = os.Kill
	sigKill = os.Kill
)
