//go:build unix && !linux

package main

import "syscall"

// sysProcAttr: a process group of its own unless foreground (there is no
// parent-death signal outside Linux).
func sysProcAttr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup}
}
