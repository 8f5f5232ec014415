package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/redistest"
)

func TestMain(m *testing.M) {
	// Tests kill nodes on purpose; go-redis would log every refused dial.
	redis.SetLogger(quietLogger{})
	code := m.Run()
	if code == 0 {
		// No goroutine of demo or chaos outlives the call for long (a
		// go-redis pool's redial of a killed node sleeps a second before
		// it sees its client closed).
		code = redistest.VerifyNoLeaks(5 * time.Second)
	}
	os.Exit(code)
}

// result is what an in-process run returned.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the redlock-lab command line in-process, bounded by 2 minutes.
func cli(t testing.TB, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb)
	if ctx.Err() != nil {
		t.Fatalf("redlock-lab %s: did not finish within 2 minutes; stderr:\n%s", strings.Join(args, " "), errb.String())
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// Every command answers -h, --help and `redlock-lab help CMD` alike: exit
// 0 and its own usage on stdout, with its long flags after two dashes, as
// the docs write them.
func TestEveryCommandHelp(t *testing.T) {
	for cmd, flag := range map[string]string{"demo": "  --workers int", "chaos": "  --scenario string", "version": ""} {
		for _, args := range [][]string{{cmd, "-h"}, {cmd, "--help"}, {"help", cmd}} {
			r := cli(t, args...)
			if r.code != exitOK || !strings.HasPrefix(r.stdout, "Usage: redlock-lab "+cmd) || r.stderr != "" {
				t.Errorf("redlock-lab %s: want exit 0 and the usage of %s on stdout alone, got %d:\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), cmd, r.code, r.stdout, r.stderr)
			}
			if flag != "" && !strings.Contains(r.stdout, "\n"+flag+"\n") {
				t.Errorf("redlock-lab %s: want the flag line %q, got:\n%s", strings.Join(args, " "), flag, r.stdout)
			}
		}
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"help", "help"}} {
		r := cli(t, args...)
		if r.code != exitOK || !strings.HasPrefix(r.stdout, "Usage: redlock-lab <command>") || !strings.Contains(r.stdout, "demo") || !strings.Contains(r.stdout, "chaos") {
			t.Errorf("redlock-lab %s: want exit 0 and the general help, got %d:\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	if r := cli(t, "version"); r.code != exitOK || !strings.HasPrefix(r.stdout, "redlock-lab ") {
		t.Errorf("version: want exit 0 and a version, got %d: %q", r.code, r.stdout)
	}
}

// Bad flags and arguments are usage errors (64) whose one-line message
// names the problem, with a hint; none starts a node.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "Usage: redlock-lab <command>"},
		{[]string{"lock"}, `redlock-lab: unknown command "lock"`},
		{[]string{"demo", "--workers", "1"}, "redlock-lab demo: --workers 1: need at least 2"},
		{[]string{"demo", "--nodes", "redis://h:1"}, "redlock-lab demo: flag provided but not defined: --nodes"},
		{[]string{"demo", "--duration", "soon"}, `redlock-lab demo: invalid value "soon" for flag --duration`},
		{[]string{"demo", "stray"}, `redlock-lab demo: unexpected argument "stray"`},
		{[]string{"version", "extra"}, `redlock-lab version: unexpected argument "extra"`},
	} {
		r := cli(t, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("redlock-lab %s: want exit %d and stderr containing %q, got %d:\n%s", strings.Join(tc.args, " "), exitUsage, tc.want, r.code, r.stderr)
		}
	}
}
