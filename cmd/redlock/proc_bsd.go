//go:build unix && !linux

package main

import (
	"syscall"
	"time"
)

// sysProcAttr: a process group of its own unless foreground (there is no
// parent-death signal outside Linux).
func sysProcAttr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup}
}

// supervisorAttr starts the supervisor as the leader of a new process
// group.
func supervisorAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// parentPoll is how often the supervisor checks that redlock is alive:
// without a parent-death signal it notices redlock's death by being
// re-parented, within this much.
const parentPoll = 100 * time.Millisecond
