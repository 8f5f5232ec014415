//go:build !unix

package redisnode

import (
	"errors"
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func killGroup(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

func stopGroup(int) error { return errors.ErrUnsupported }
func contGroup(int) error { return errors.ErrUnsupported }

// reservePort does nothing here: see proc_unix.go.
func reservePort(int) (release func()) { return func() {} }
