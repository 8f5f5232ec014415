package main

import (
	"syscall"
	"time"
)

// sysProcAttr is for a command run without the supervisor (--foreground,
// or no executable to re-run): a process group of its own unless
// foreground, and SIGKILL when redlock dies. Pdeathsig fires when the OS
// thread that forked the command exits; the Go runtime only retires
// threads locked with runtime.LockOSThread, so in practice it fires when
// redlock exits.
func sysProcAttr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup, Pdeathsig: syscall.SIGKILL}
}

// supervisorAttr starts the supervisor as the leader of a new process
// group, with SIGTERM as its parent-death signal: it catches it, sees
// that redlock is gone, and SIGKILLs its group (supervise_unix.go).
func supervisorAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// parentPoll is how often the supervisor checks that redlock is alive
// without a signal to tell it: never on Linux, where Pdeathsig does.
const parentPoll time.Duration = 0
