package main

import (
	"strings"
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

func TestHelpAndVersion(t *testing.T) {
	r := cli(t, nil, "help")
	if r.code != exitOK {
		t.Fatalf("help: want exit 0, got %d", r.code)
	}
	for _, w := range []string{"run", "elect", "status", "redlock-lab", "Exit codes:", "64", "70", "75", envNodes, "rediss://"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("help: want %q in the output, got:\n%s", w, r.stdout)
		}
	}
	for _, cmd := range []string{"run", "status"} {
		r := cli(t, nil, "help", cmd)
		if r.code != exitOK || !strings.Contains(r.stdout, "Usage: redlock "+cmd) || !strings.Contains(r.stdout, "--key") {
			t.Errorf("help %s: want exit 0 and the command's usage with its flags, got %d:\n%s", cmd, r.code, r.stdout)
		}
	}
	r = cli(t, nil, "run", "-h")
	if r.code != exitOK || !strings.Contains(r.stdout, "--grace duration") {
		t.Errorf("run -h: want exit 0 and the flags, got %d:\n%s", r.code, r.stdout)
	}
	r = cli(t, nil, "version")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "redlock ") {
		t.Errorf("version: want exit 0 and a version, got %d: %q", r.code, r.stdout)
	}
}

// Every command answers -h, --help and `redlock help CMD` alike: exit 0
// and its own usage on stdout, as help that was asked for (`redlock run
// --help | less`), with nothing on stderr; never what the command does.
func TestEveryCommandHelp(t *testing.T) {
	for _, cmd := range []string{"run", "elect", "status", "version"} {
		for _, args := range [][]string{{cmd, "-h"}, {cmd, "--help"}, {cmd, "-help"}, {"help", cmd}} {
			r := cli(t, nil, args...)
			if r.code != exitOK || !strings.HasPrefix(r.stdout, "Usage: redlock "+cmd) || r.stderr != "" {
				t.Errorf("redlock %s: want exit 0 and the usage of %s on stdout alone, got %d:\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), cmd, r.code, r.stdout, r.stderr)
			}
			if strings.Contains(r.stdout+r.stderr, version()) {
				t.Errorf("redlock %s: want the usage, got the version:\n%s%s", strings.Join(args, " "), r.stdout, r.stderr)
			}
		}
	}
	// help asked about itself prints the general help, once.
	for _, args := range [][]string{{"help", "help"}, {"help", "--help"}, {"help", "-h"}, {"--help"}, {"-h"}} {
		r := cli(t, nil, args...)
		if r.code != exitOK || !strings.HasPrefix(r.stdout, "Usage: redlock <command>") || strings.Count(r.stdout, "Usage:") != 1 {
			t.Errorf("redlock %s: want exit 0 and the general help, got %d:\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	// version takes no argument; --version is the version.
	if r := cli(t, nil, "version", "extra"); r.code != exitUsage || !strings.Contains(r.stderr, `redlock version: unexpected argument "extra"`) {
		t.Errorf("version extra: want exit %d and the argument named, got %d: %s", exitUsage, r.code, r.stderr)
	}
	if r := cli(t, nil, "--version"); r.code != exitOK || r.stdout != version()+"\n" {
		t.Errorf("--version: want exit 0 and %q, got %d: %q", version(), r.code, r.stdout)
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
