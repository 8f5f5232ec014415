// Command redlock-lab shows and exercises Redlock on local redis-server
// nodes: a demo of contending workers with a node killed mid-lock, and
// the chaos suite. It is apart from the redlock command (cmd/redlock),
// which production hosts install, because the chaos suite links Docker's
// client, dockertest, toxiproxy and Prometheus's client: redlock stays
// lean, and this one has the lab.
//
// Build it from a clone with `make lab` (into bin/redlock-lab), or
//
//	go build -C chaos -o bin/redlock-lab ./cmd/redlock-lab
//
// `make demo` and `make chaos` build and run it.
//
// Commands:
//
//	redlock-lab demo [--workers 6] [--duration 10s] [--report report/demo]
//	redlock-lab chaos [--short] [--duration D] [--scenario NAME,...] [--json FILE] [--report DIR] [--backend local|docker|auto] [--list]
//	redlock-lab version
//	redlock-lab help [command]
//
// Both need redis-server on the PATH; `make demo` and `make chaos`
// install it with apt-get when it is missing.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/chaos"
	"github.com/seed543a70bd/redlock/chaos/internal/cliflag"
)

const usage = `Usage: redlock-lab <command> [flags]

Commands:
  demo     start 5 local redis-server nodes and show contending workers,
           with a node killed mid-lock and restarted
  chaos    run the chaos suite (redlock-lab chaos --list: its scenarios)
  version  print the version
  help     print this help, or a command's: redlock-lab help demo

redlock-lab needs redis-server on the PATH. The lock itself, for
production hosts, is the redlock command: redlock run, redlock status.

Exit codes:
  0   demo: the lock was obtained and no two workers held it at once;
      chaos: every scenario passed its expectation
  1   demo: a violation was seen, or no worker obtained the lock;
      chaos: a scenario failed; either: the nodes could not be started
  64  usage error: bad flag or argument, unknown scenario (EX_USAGE)
`

// Exit codes, as the redlock command's (sysexits(3) where one fits).
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = chaos.ExitUsage // 64
)

// quietLogger drops go-redis's log lines: the lab kills nodes on purpose,
// and every refused dial would be logged.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quietLogger{})
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a command and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "demo":
		return cmdDemo(ctx, rest, stdout, stderr)
	case "chaos":
		return cmdChaos(ctx, rest, stdout, stderr)
	case "version":
		return cmdVersion(rest, stdout, stderr)
	case "--version", "-version":
		fmt.Fprintln(stdout, version())
		return exitOK
	case "help", "-h", "--help", "-help":
		if len(rest) > 0 && !isHelp(rest[0]) {
			return run(ctx, []string{rest[0], "-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "redlock-lab: unknown command %q\nRun 'redlock-lab help' for usage.\n", cmd)
	return exitUsage
}

// isHelp reports whether arg asks for the general help.
func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "--help", "-help":
		return true
	}
	return false
}

// newFlagSet returns a flag set whose errors come back unprinted, for
// usageExit, and whose -h comes back as flag.ErrHelp, for printUsage.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// printUsage prints a command's help and its flags to w, for -h.
func printUsage(w io.Writer, fs *flag.FlagSet, text string) {
	fmt.Fprint(w, text)
	cliflag.PrintDefaults(w, fs)
}

// usageExit prints a usage error, prefixed with prog, and a hint, and
// returns exitUsage.
func usageExit(err error, prog string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "%s: %v\n", prog, err)
	fmt.Fprintf(stderr, "Run '%s -h' for usage.\n", prog)
	return exitUsage
}

const versionUsage = `Usage: redlock-lab version

Prints redlock-lab's version: the module version, the VCS revision (when
the binary was built from a repository), the Go version, and the OS and
architecture. 'redlock-lab --version' prints the same.
`

// cmdVersion implements `redlock-lab version`.
func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("redlock-lab version")
	if err := cliflag.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, fs, versionUsage)
			return exitOK
		}
		return usageExit(err, "redlock-lab version", stderr)
	}
	if fs.NArg() > 0 {
		return usageExit(fmt.Errorf("unexpected argument %q", fs.Arg(0)), "redlock-lab version", stderr)
	}
	fmt.Fprintln(stdout, version())
	return exitOK
}

// version describes the build: module version and VCS revision when known.
func version() string {
	v, rev := "(devel)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
		}
	}
	return fmt.Sprintf("redlock-lab %s%s %s %s/%s", v, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
