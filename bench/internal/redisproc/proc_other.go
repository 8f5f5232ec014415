//go:build !linux

package redisproc

import "syscall"

// sysProcAttr: no parent-death signal outside Linux; Close kills by PID.
func sysProcAttr() *syscall.SysProcAttr { return nil }
