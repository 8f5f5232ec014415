//go:build unix

package redisnode

import "syscall"

// The process is a group leader (Setpgid), so -pid signals the whole group.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }
func stopGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGSTOP) }
func contGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGCONT) }
