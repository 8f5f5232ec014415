// Command redlock holds Redlock distributed locks from the shell and
// shows who holds them. It is the lean command for production hosts: it
// links the library and go-redis, and nothing of the chaos suite (Docker's
// client, toxiproxy, Prometheus's client), which lives in redlock-lab
// (module chaos, chaos/cmd/redlock-lab: `redlock-lab demo`,
// `redlock-lab chaos`).
//
// Build it from a clone with `make cli` (into bin/redlock), or
//
//	go build -C cmd/redlock -o bin/redlock .
//
// `go install github.com/seed543a70bd/redlock/cmd/redlock@latest` works
// once a release is tagged (RELEASING.md): until then this module's
// go.mod has replace lines, which go install refuses.
//
// Commands:
//
//	redlock run --nodes URL,... --key K [--ttl 30s] [-w D] [-E code] [--multi] -- command [args...]
//	redlock elect --nodes URL,... [--ttl 30s] [-w D] [--value V] NAME -- command [args...]
//	redlock elect --observe --nodes URL,... NAME
//	redlock status --nodes URL,... --key K [--key-prefix P]
//	redlock status --nodes URL,... [--restart-guard D]
//	redlock version
//	redlock help [command]
//
// Nodes are go-redis URLs (redis://, rediss:// for TLS, user:password for
// ACLs, redis+cluster://, redis+sentinel://), from --nodes or the
// REDLOCK_NODES variable. Run 'redlock help' for the exit codes.
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
)

const usage = `Usage: redlock <command> [flags]

Commands:
  run      run a command while holding a lock, extending it, like flock(1)
  elect    run a command while leader of an election; --observe: follow its leaders
  status   show who holds a key (each node's holder, TTL and fence counter,
           and the holder's metadata); without --key, each node's health
  version  print the version
  help     print this help, or a command's: redlock help run

The demo and the chaos suite are in redlock-lab (make demo, make chaos).

Nodes are a comma-separated list of go-redis URLs, from --nodes or the
REDLOCK_NODES variable:
  redis://[user:password@]host:port[/db]   plain TCP (ACL user optional)
  rediss://[user:password@]host:port[/db]  TLS
  unix:///path/to/redis.sock               Unix socket
  redis+cluster://host:port[?addr=h2:p2]   a Redis Cluster, one node
  redis+sentinel://host:port?master_name=M a Sentinel-managed master
Query parameters of go-redis's ParseURL are accepted (dial_timeout=...).
REDLOCK_KEY_PREFIX and REDLOCK_RESTART_GUARD stand for --key-prefix and
--restart-guard.

Example (with docker-compose.yml: docker compose up -d):
  export REDLOCK_NODES=redis://localhost:6381,redis://localhost:6382,redis://localhost:6383,redis://localhost:6384,redis://localhost:6385
  redlock run --key nightly-backup --ttl 30s --wait 1m -- ./backup.sh

`

// quietLogger drops go-redis's log lines (refused dials to a node that is
// down are expected, and reported through the lock's errors).
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quietLogger{})
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run dispatches to a command and returns the exit code.
func run(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage+exitCodesHelp)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return cmdRun(ctx, rest, env, stdout, stderr)
	case "elect":
		return cmdElect(ctx, rest, env, stdout, stderr)
	case "status":
		return cmdStatus(ctx, rest, env, stdout, stderr)
	case "demo", "chaos":
		fmt.Fprintf(stderr, "redlock: %q is a command of redlock-lab, apart from this production binary: make %s, or redlock-lab %s\n", cmd, cmd, cmd)
		return exitUsage
	case superviseCmd: // hidden: see supervise_unix.go
		return cmdSupervise(rest, stderr)
	case "version":
		return cmdVersion(rest, stdout, stderr)
	case "--version", "-version":
		fmt.Fprintln(stdout, version())
		return exitOK
	case "help", "-h", "--help", "-help":
		if len(rest) > 0 && !isHelp(rest[0]) {
			// Each command prints its own usage for -h: `redlock help
			// run` is `redlock run -h`.
			return run(ctx, []string{rest[0], "-h"}, env, stdout, stderr)
		}
		fmt.Fprint(stdout, usage+exitCodesHelp)
		return exitOK
	}
	fmt.Fprintf(stderr, "redlock: unknown command %q\nRun 'redlock help' for usage.\n", cmd)
	return exitUsage
}

// isHelp reports whether arg asks for the general help: `redlock help
// help` and `redlock help --help` print it rather than recurse.
func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "--help", "-help":
		return true
	}
	return false
}

const versionUsage = `Usage: redlock version

Prints redlock's version: the module version, the VCS revision (when the
binary was built from a repository), the Go version, and the OS and
architecture. 'redlock --version' prints the same.
`

// cmdVersion implements `redlock version`: -h prints its usage, as for
// every other command, rather than the version.
func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("redlock version")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, fs, versionUsage)
			return exitOK
		}
		return usageExit(err, "redlock version", stderr)
	}
	if fs.NArg() > 0 {
		return usageExit(usagef("unexpected argument %q", fs.Arg(0)), "redlock version", stderr)
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
	return fmt.Sprintf("redlock %s%s %s %s/%s", v, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
