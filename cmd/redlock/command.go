package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"time"

	"github.com/seed543a70bd/redlock"
)

// hold is what a supervised command runs under: a lock (run) or a
// leadership's lock (elect). Done closes when it can no longer be proven held,
// and Err then matches redlock.ErrLockLost.
type hold interface {
	Done() <-chan struct{}
	Err() error
}

var _ hold = (*redlock.Lock)(nil)

// command is a command that run and elect start and supervise while they
// hold their lock: the one supervisor of both, so that a lost lock and a
// lost leadership end a command the same way.
type command struct {
	prog       string   // "redlock run", the prefix of every message
	what       string   // what may be lost, for messages: `lock "K"`
	argv       []string // the command and its arguments
	env        []string // added to redlock's environment
	foreground bool     // --foreground (see child)
	grace      time.Duration
	explain    func(error) string // a library error in the CLI's terms
}

// runUnder runs the command while h holds, forwarding sigs to it. When h
// is lost, or ctx ends, the command (its process group, see child) gets
// SIGTERM, then SIGKILL after c.grace. It returns the exit code, and
// ended = true when the command ran to its end under h, so that the
// caller releases h and reports a failed release; otherwise (h lost, or
// the command could not start) the code is redlock's own (70, 126, 127)
// and the caller releases what the nodes may still keep, quietly.
func (c *command) runUnder(ctx context.Context, h hold, sigs <-chan os.Signal, stdout, stderr io.Writer) (code int, ended bool) {
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(os.Environ(), c.env...)
	cmd.WaitDelay = time.Second // do not hang on output pipes held by grandchildren
	ch := newChild(cmd, c.foreground)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", c.prog, err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return exitNotFound, false
		}
		return exitCannotRun, false
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	lost, ctxDone := h.Done(), ctx.Done()
	var kill *time.Timer
	var killC <-chan time.Time
	defer func() {
		if kill != nil {
			kill.Stop()
		}
	}()
	// terminate says why (which may end with a line per node) and, on a
	// line of its own, what is done about it.
	terminate := func(why string) {
		lost, ctxDone = nil, nil
		fmt.Fprintf(stderr, "%s: %s\n", c.prog, why)
		if c.grace == 0 {
			fmt.Fprintf(stderr, "%s: sending SIGKILL to the command\n", c.prog)
			ch.signal(sigKill)
			return
		}
		fmt.Fprintf(stderr, "%s: sending SIGTERM to the command, SIGKILL in %v\n", c.prog, c.grace)
		ch.signal(sigTerm)
		kill = time.NewTimer(c.grace)
		killC = kill.C
	}
	for {
		select {
		case <-exited:
			if err := h.Err(); errors.Is(err, redlock.ErrLockLost) {
				ch.killRest()    // whatever the command left running
				if lost != nil { // lost as the command ended
					fmt.Fprintf(stderr, "%s: %s: %v\n", c.prog, c.what, c.explain(err))
				}
				return exitLockLost, false
			}
			return exitStatus(cmd.ProcessState), true
		case s := <-sigs:
			ch.forward(s)
		case <-lost:
			terminate(fmt.Sprintf("%s: %v", c.what, c.explain(h.Err())))
		case <-ctxDone:
			terminate(fmt.Sprintf("cancelled: %v", context.Cause(ctx)))
		case <-killC:
			killC = nil
			ch.signal(sigKill)
		}
	}
}
