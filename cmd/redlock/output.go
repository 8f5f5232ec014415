package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"unicode"
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

// printUsage prints a command's help and flags to w (stdout: help asked
// for is the output, and exits 0). Errors in flags get a one-line message
// and a hint on stderr instead (usageExit).
func printUsage(w io.Writer, fs *flag.FlagSet, text string) {
	fmt.Fprint(w, text)
	printFlags(w, fs)
}

// printFlags writes fs's flags as flag.FlagSet.PrintDefaults does, but
// with long names after two dashes (--key) and one-letter names after
// one (-w), as the docs and the usage lines write them; the flag package
// prints one dash for both and accepts either.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	var b bytes.Buffer
	out := fs.Output()
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(out)
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		// A flag's line is "  -name [type]" (a one-letter boolean's
		// usage follows a tab on it); usage lines start with spaces and
		// a tab.
		if rest, ok := strings.CutPrefix(line, "  -"); ok {
			if name := strings.FieldsFunc(rest, unicode.IsSpace); len(name) > 0 && len(name[0]) > 1 {
				line = "  --" + rest
			}
		}
		fmt.Fprint(w, line)
	}
}

// flagNameRe finds the flag names in the flag package's parse errors
// ("flag provided but not defined: -nope", "invalid value ... for flag
// -ttl: ...", "flag needs an argument: -key"), one-letter names left out.
var flagNameRe = regexp.MustCompile(`(for flag|for|defined:|argument:) -([^-\s:][^\s:]+)`)

// parseFlags parses args into fs. It returns flag.ErrHelp for -h, --help
// and -help, or a usage error whose flag names read as printFlags writes
// them (--ttl, -w).
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usagef("%s", flagNameRe.ReplaceAllString(err.Error(), "$1 --$2"))
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
