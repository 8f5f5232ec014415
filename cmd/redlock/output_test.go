package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Bad flags and bad URLs are usage errors (64) whose message names the
// problem. None of these reach a node.
func TestUsageErrors(t *testing.T) {
	nodes := map[string]string{envNodes: "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3"}
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"no command", nil, nil, []string{"Usage: redlock <command>"}},
		{"unknown command", nil, []string{"lock"}, []string{`unknown command "lock"`}},
		{"run: unknown flag", nodes, []string{"run", "--key", "k", "--bogus", "--", "true"}, []string{"redlock run: flag provided but not defined: --bogus", "redlock run -h"}},
		{"run: no key", nodes, []string{"run", "--", "true"}, []string{"--key is required"}},
		{"run: no command", nodes, []string{"run", "--key", "k"}, []string{"no command"}},
		{"run: no nodes", nil, []string{"run", "--key", "k", "--", "true"}, []string{"no nodes", envNodes}},
		{"run: bad ttl", nodes, []string{"run", "--key", "k", "--ttl", "soon", "--", "true"}, []string{`invalid value "soon" for flag --ttl`}},
		{"run: negative ttl", nodes, []string{"run", "--key", "k", "--ttl", "-1s", "--", "true"}, []string{"--ttl -1s is not positive"}},
		{"run: ttl too short", nodes, []string{"run", "--key", "k", "--ttl", "1ms", "--", "true"}, []string{"ttl 1ms leaves no validity"}},
		{"run: negative wait", nodes, []string{"run", "--key", "k", "--wait", "-1s", "--", "true"}, []string{`invalid value "-1s" for flag --wait: negative`}},
		{"run: bad wait", nodes, []string{"run", "--key", "k", "--wait", "forever", "--", "true"}, []string{`flag --wait: not a duration`}},
		{"run: negative grace", nodes, []string{"run", "--key", "k", "--grace", "-1s", "--", "true"}, []string{"--grace -1s is negative"}},
		{"run: bad scheme", nil, []string{"run", "--nodes", "http://h:1", "--key", "k", "--", "true"}, []string{`"http://h:1"`, `scheme "http"`}},
		{"run: no scheme", nil, []string{"run", "--nodes", "redis://h:1,h:2", "--key", "k", "--", "true"}, []string{`node 2 "h:2"`, "no scheme"}},
		{"run: bare host:port", nil, []string{"run", "--nodes", "127.0.0.1:7381", "--key", "k", "--", "true"}, []string{`node 1 "127.0.0.1:7381"`, "write redis://host:port"}},
		{"status: bare host:port", nil, []string{"status", "--nodes", "127.0.0.1:7381", "--key", "k"}, []string{"redlock status: ", "write redis://host:port"}},
		{"run: ttl without unit", nodes, []string{"run", "--key", "k", "--ttl", "30", "--", "true"}, []string{`redlock run: invalid value "30" for flag --ttl: not a duration (e.g. 30s, 1m)`}},
		{"run: wait without unit", nodes, []string{"run", "--key", "k", "-w", "5", "--", "true"}, []string{`redlock run: invalid value "5" for flag -w: not a duration (e.g. 30s, 1m)`}},
		{"run: bad conflict code", nodes, []string{"run", "--key", "k", "-E", "300", "--", "true"}, []string{"--conflict-exit-code 300 is not in 0..255"}},
		{"run: bad restart guard", nodes, []string{"run", "--key", "k", "--restart-guard", "1", "--", "true"}, []string{`--restart-guard "1": not a duration`}},
		{"run: restart guard on a cluster", nil, []string{"run", "--nodes", "redis+cluster://h:1,redis://h:2,redis://h:3", "--restart-guard", "1m", "--key", "k", "--", "true"}, []string{"redlock run: invalid argument"}},
		{"run: key prefix with brace", nodes, []string{"run", "--key", "k", "--key-prefix", "{a}", "--", "true"}, []string{"redlock run: invalid argument", "brace"}},
		{"status: unknown flag", nodes, []string{"status", "--key", "k", "--bogus"}, []string{"redlock status: flag provided but not defined: --bogus"}},
		{"run: duplicate", nil, []string{"run", "--nodes", "redis://h:1,redis://h:1", "--key", "k", "--", "true"}, []string{`node 2 "redis://h:1" is node 1 "redis://h:1" again`}},
		{"run: password redacted", nil, []string{"run", "--nodes", "redis://u:hunter2@h:1/db", "--key", "k", "--", "true"}, []string{`"redis://u:xxxxx@h:1/db"`, "invalid database number"}},
		{"run: bad env", map[string]string{envNodes: "redis://h:1,"}, []string{"run", "--key", "k", "--", "true"}, []string{envNodes, "node 2 of 2 is empty"}},
		{"elect: no name", nodes, []string{"elect", "--", "true"}, []string{"redlock elect: no election name"}},
		{"elect: no command", nodes, []string{"elect", "leader"}, []string{"redlock elect: no command"}},
		{"elect: observe with a command", nodes, []string{"elect", "--observe", "leader", "--", "true"}, []string{"--observe runs no command"}},
		{"elect: flag after the name", nodes, []string{"elect", "leader", "--ttl", "-1s", "--", "true"}, []string{"--ttl -1s is not positive"}},
		{"elect: unknown flag", nodes, []string{"elect", "--bogus", "leader", "--", "true"}, []string{"redlock elect: flag provided but not defined: --bogus", "redlock elect -h"}},
		{"elect: no nodes", nil, []string{"elect", "leader", "--", "true"}, []string{"no nodes", envNodes}},
		{"status: restart guard with a key", nodes, []string{"status", "--key", "k", "--restart-guard", "1m"}, []string{"--restart-guard applies to the report without --key"}},
		{"status: key and election", nodes, []string{"status", "--key", "k", "--election", "e"}, []string{"--key and --election both given"}},
		{"status: bad url", nil, []string{"status", "--nodes", "redis://h:99999999", "--key", "k"}, []string{`"redis://h:99999999"`, "port 99999999 is not in 1..65535"}},
		{"status: extra argument", nodes, []string{"status", "--key", "k", "extra"}, []string{`unexpected argument "extra"`}},
		{"run: flag without its value", nodes, []string{"run", "--key"}, []string{"flag needs an argument: --key"}},
		{"run: short flag without its value", nodes, []string{"run", "--key", "k", "-w"}, []string{"flag needs an argument: -w"}},
		// The demo and the chaos suite are redlock-lab's; the lean binary
		// says where they went.
		{"demo", nil, []string{"demo"}, []string{`"demo" is a command of redlock-lab`, "make demo"}},
		{"chaos", nil, []string{"chaos", "--short"}, []string{`"chaos" is a command of redlock-lab`, "make chaos"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, tc.env, tc.args...)
			if r.code != exitUsage {
				t.Fatalf("want exit %d, got %d; stderr:\n%s", exitUsage, r.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("want stderr containing %q, got:\n%s", w, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "hunter2") {
				t.Errorf("want the password redacted, got:\n%s", r.stderr)
			}
		})
	}
}

// Help writes every long flag as the docs and usage lines do, --key, and
// the one-letter ones with one dash, -w; the flag package's own listing
// says -key, which docs/cli.md never writes.
func TestHelpWritesLongFlagsWithTwoDashes(t *testing.T) {
	for cmd, flags := range map[string][]string{
		"run":    {"--nodes string", "--key string", "--ttl duration", "--wait duration", "-w duration", "-E code", "--conflict-exit-code code", "--grace duration", "--node-timeout duration", "--restart-guard duration", "--key-prefix prefix", "--multi", "--fence", "--foreground", "--metadata text", "-v"},
		"elect":  {"--nodes string", "--ttl duration", "--wait duration", "-w duration", "-E code", "--conflict-exit-code code", "--grace duration", "--node-timeout duration", "--restart-guard duration", "--key-prefix prefix", "--foreground", "--value value", "--observe", "-v"},
		"status": {"--nodes string", "--key string", "--election name", "--key-prefix prefix", "--timeout duration", "--restart-guard duration"},
	} {
		r := cli(t, nil, cmd, "--help")
		lines := map[string]bool{}
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(l, "  -") { // a one-letter boolean's usage follows a tab
				flag, _, _ := strings.Cut(strings.TrimPrefix(l, "  "), "\t")
				lines[flag] = true
			}
		}
		for _, f := range flags {
			if !lines[f] {
				t.Errorf("%s --help: want a line %q, got:\n%s", cmd, "  "+f, r.stdout)
			}
		}
		if len(lines) != len(flags) {
			t.Errorf("%s --help: want %d flag lines, got %d:\n%s", cmd, len(flags), len(lines), r.stdout)
		}
	}
}

// parseFlags names flags in its errors as help writes them: long names
// after two dashes, one-letter names after one, whichever the user
// typed; -h, --help and -help ask for help.
func TestParseFlagsNamesFlagsAsHelpWrites(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" for flag.ErrHelp
	}{
		{[]string{"--nope"}, "flag provided but not defined: --nope"},
		{[]string{"-nope"}, "flag provided but not defined: --nope"},
		{[]string{"-x"}, "flag provided but not defined: -x"},
		{[]string{"--ttl", "soon"}, `invalid value "soon" for flag --ttl: `},
		{[]string{"-ttl=soon"}, `invalid value "soon" for flag --ttl: `},
		{[]string{"--key"}, "flag needs an argument: --key"},
		{[]string{"-w"}, "flag needs an argument: -w"},
		{[]string{"-h"}, ""},
		{[]string{"--help"}, ""},
		{[]string{"-help"}, ""},
	} {
		fs := newFlagSet("redlock test")
		fs.String("key", "", "")
		fs.Duration("ttl", 0, "")
		fs.String("w", "", "")
		err := parseFlags(fs, tc.args)
		if tc.want == "" {
			if !errors.Is(err, flag.ErrHelp) {
				t.Errorf("%v: want flag.ErrHelp, got %v", tc.args, err)
			}
			continue
		}
		var ue *usageError
		if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: want a usage error starting %q, got %T %v", tc.args, tc.want, err, err)
		}
	}
	if err := parseFlags(newFlagSet("redlock test"), []string{"arg"}); err != nil {
		t.Errorf("a plain argument: want no error, got %v", err)
	}
}

// usageExit: help asked for exits 0 and prints nothing more; any other
// error is one line with the command's prefix and a hint, exit 64.
func TestUsageExit(t *testing.T) {
	var b strings.Builder
	if code := usageExit(flag.ErrHelp, "redlock run", &b); code != exitOK || b.Len() != 0 {
		t.Errorf("flag.ErrHelp: want exit 0 and nothing printed, got %d, %q", code, b.String())
	}
	b.Reset()
	code := usageExit(usagef("--ttl %s is not positive", "-1s"), "redlock run", &b)
	if want := "redlock run: --ttl -1s is not positive\nRun 'redlock run -h' for usage.\n"; code != exitUsage || b.String() != want {
		t.Errorf("want exit %d and %q, got %d, %q", exitUsage, want, code, b.String())
	}
}

// funcWriter is a writer of a type that cannot be compared.
type funcWriter func([]byte) (int, error)

func (f funcWriter) Write(p []byte) (int, error) { return f(p) }

// syncWriters leaves files alone and serialises the writes to any other
// writer, with one lock when stdout and stderr are one writer: the race
// detector sees concurrent writes to one buffer through both otherwise.
// Writers of a type that cannot be compared are told apart without a
// panic.
func TestSyncWritersSerialiseWrites(t *testing.T) {
	if out, errw := syncWriters(os.Stdout, os.Stderr); out != io.Writer(os.Stdout) || errw != io.Writer(os.Stderr) {
		t.Errorf("files: want them unwrapped, got %T, %T", out, errw)
	}

	var buf bytes.Buffer
	out, errw := syncWriters(&buf, &buf)
	if out != errw {
		t.Errorf("one writer: want one wrapper (one lock) for both, got two")
	}
	const goroutines, lines = 8, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		w := out
		if g%2 == 1 {
			w = errw
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range lines {
				fmt.Fprintln(w, "0123456789")
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(buf.String(), "0123456789\n"); got != goroutines*lines {
		t.Errorf("want %d whole lines, got %d", goroutines*lines, got)
	}

	var n atomic.Int64
	fw := funcWriter(func(p []byte) (int, error) { n.Add(int64(len(p))); return len(p), nil })
	out, errw = syncWriters(fw, fw)
	fmt.Fprint(out, "ab")
	fmt.Fprint(errw, "c")
	if n.Load() != 3 {
		t.Errorf("uncomparable writers: want 3 bytes written, got %d", n.Load())
	}
}
