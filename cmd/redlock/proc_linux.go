package main

import "syscall"

// sysProcAttr: a process group of its own unless foreground, and SIGKILL
// when redlock dies. Pdeathsig fires when the OS thread that forked the
// command exits; the Go runtime only retires threads locked with
// runtime.LockOSThread, so in practice it fires when redlock exits.
func sysProcAttr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup, Pdeathsig: syscall.SIGKILL}
}
