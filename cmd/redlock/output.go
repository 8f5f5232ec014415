package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sync"
)

// usageError is a problem with the command line: exit code 64.
type usageError struct {
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// usageExit prints a usage error, prefixed with prog, and returns its exit
// code: 0 for -h, 64 otherwise.
func usageExit(err error, prog string, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	fmt.Fprintf(stderr, "%s: %v\n", prog, err)
	fmt.Fprintf(stderr, "Run '%s -h' for usage.\n", prog)
	return exitUsage
}

// printUsage prints a command's help and flags, for -h. Errors in flags
// get the flag package's one-line message and a hint instead (usageExit).
func printUsage(fs *flag.FlagSet, text string) {
	fmt.Fprint(fs.Output(), text)
	fs.PrintDefaults()
}

// syncWriter serialises writes to a writer shared by redlock's messages
// and the command's output. An *os.File needs none (the command writes to
// its descriptor directly); other writers, as in tests, are written by
// os/exec's copying goroutines too.
type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (s syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// syncWriters wraps stdout and stderr unless they are files, with one
// lock when they are one writer.
func syncWriters(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	_, f1 := stdout.(*os.File)
	_, f2 := stderr.(*os.File)
	if f1 && f2 {
		return stdout, stderr
	}
	mu := new(sync.Mutex)
	out := syncWriter{mu, stdout}
	if t := reflect.TypeOf(stdout); t == reflect.TypeOf(stderr) && t.Comparable() && stdout == stderr {
		return out, out
	}
	return out, syncWriter{new(sync.Mutex), stderr}
}
