//go:build unix && !linux

package redisnode

import "syscall"

// sysProcAttr puts redis-server in its own process group. There is no
// parent-death signal outside Linux: callers must Close their nodes.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
