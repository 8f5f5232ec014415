package redisproc

import "syscall"

// sysProcAttr makes the kernel SIGKILL the server when the benchmark dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
