package redisnode

import "syscall"

// sysProcAttr puts redis-server in its own process group (so Kill/Pause reach
// its fork children too) and makes the kernel SIGKILL it if we die.
//
// Pdeathsig fires when the OS thread that forked the child exits; the Go
// runtime only retires threads locked with runtime.LockOSThread, so in
// practice it fires when the test binary exits.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
