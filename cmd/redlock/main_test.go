package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/redlocktest"
)

// The redlock binary, for the tests that need a real process (signals,
// concurrent runs). It is built on first use, so that fuzzing and the
// in-process tests do not pay for it.
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// redlockBin builds the binary once (go build -o DIR/redlock .) and returns
// its path.
func redlockBin(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "redlock-cli-*"); binErr != nil {
			return
		}
		path := filepath.Join(binDir, "redlock")
		out, err := exec.Command("go", "build", "-o", path, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		binPath = path
	})
	if binErr != nil {
		t.Fatalf("building redlock: %v", binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == superviseCmd {
		// In-process runs re-run this test binary as the supervisor.
		os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
	}
	// Tests kill nodes on purpose; go-redis would log every refused dial.
	redis.SetLogger(quietLogger{})
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	if code == 0 {
		// No goroutine of run or status outlives the call for long: a
		// go-redis pool's redial of a killed node sleeps a second before
		// it sees its client closed, and a Close that a bounded --wait
		// gave up on ends once the clients are closed.
		code = verifyNoLeaks(5 * time.Second)
	}
	os.Exit(code)
}

var keySeq atomic.Int64

// testKey returns a key unique to this test run.
func testKey(t testing.TB) string {
	return fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), keySeq.Add(1))
}

// cluster starts n nodes and returns them, a client for each, and their
// URLs as --nodes wants them.
func cluster(t testing.TB, n int) ([]*redlocktest.Node, []redis.UniversalClient, string) {
	t.Helper()
	nodes := redlocktest.Start(t, n)
	urls := make([]string, n)
	for i, nd := range nodes {
		urls[i] = "redis://" + nd.Addr()
	}
	return nodes, clients(t, nodes), strings.Join(urls, ",")
}

// result is what an in-process run returned.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the redlock command line in-process, bounded by 30s, with env
// as the environment seen for REDLOCK_NODES.
func cli(t testing.TB, env map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, args, func(k string) string { return env[k] }, &out, &errb)
	if ctx.Err() != nil {
		t.Fatalf("redlock %s: did not finish within 30s; stderr:\n%s", strings.Join(args, " "), errb.String())
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// cliAsync starts cli in a goroutine; the channel yields its result.
func cliAsync(t testing.TB, env map[string]string, args ...string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out, errb bytes.Buffer
		code := run(ctx, args, func(k string) string { return env[k] }, &out, &errb)
		ch <- result{code: code, stdout: out.String(), stderr: errb.String()}
	}()
	return ch
}

// await returns the result from ch, failing the test after d.
func await(t testing.TB, ch <-chan result, d time.Duration) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("redlock did not return within %v", d)
		return result{}
	}
}

// eventually polls cond every 10ms until it holds, failing after wait.
func eventually(t testing.TB, wait time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: "+format, append([]any{wait}, args...)...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFile waits up to d for path to exist and returns its content.
func waitFile(t testing.TB, path string, d time.Duration) string {
	t.Helper()
	var b []byte
	eventually(t, d, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil && len(b) > 0
	}, "want file %s, got none", path)
	return string(b)
}

// get returns key's value on c, "" when absent.
func get(t testing.TB, c redis.UniversalClient, key string) string {
	t.Helper()
	v, err := c.Get(context.Background(), key).Result()
	if err == redis.Nil {
		return ""
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// The redlock binary is the lean one, for production hosts: it links no
// module of the chaos suite's (the chaos module itself, Docker's client,
// dockertest, toxiproxy, Prometheus's client), which redlock-lab has.
// Before, demo and chaos were commands of this binary: 33 MB, 47
// modules.
func TestLeanBinaryLinksNoLabModule(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	mods := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		mods[m] = true
	}
	if !mods["github.com/redis/go-redis/v9"] {
		t.Fatalf("want go-redis among the modules linked, got %v", mods)
	}
	for m := range mods {
		for _, banned := range []string{"docker", "toxiproxy", "prometheus", "github.com/seed543a70bd/redlock/chaos"} {
			if strings.Contains(m, banned) {
				t.Errorf("want no %s module linked into redlock, got %s", banned, m)
			}
		}
	}
}

// clients returns one go-redis client per node, with the library's
// settings for lock nodes (redlock.NewClients), closed when t ends.
func clients(t testing.TB, nodes []*redlocktest.Node) []redis.UniversalClient {
	t.Helper()
	cs, err := redlock.NewClients(redlocktest.URLs(nodes)...)
	if err != nil {
		t.Fatalf("redlock.NewClients: want no error, got %v", err)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			_ = c.Close()
		}
	})
	return cs
}

// verifyNoLeaks checks, after the tests, that no goroutine outlived them,
// retrying for up to wait: a go-redis pool's redial of a killed node, or
// a release retry, ends a little after its test. It returns the exit
// code for TestMain: 0, or 1 after printing the goroutines left.
func verifyNoLeaks(wait time.Duration) int {
	deadline := time.Now().Add(wait)
	for {
		err := goleak.Find()
		if err == nil {
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "goleak: goroutines outlived the tests by %v: %v\n", wait, err)
			return 1
		}
		time.Sleep(100 * time.Millisecond) // polling: goroutines ending is not an event to await
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

// heldElsewhere takes key on clients for ttl, as another process would
// hold it, until the test ends, and returns its lock.
func heldElsewhere(t *testing.T, clients []redis.UniversalClient, key string, ttl time.Duration) *redlock.Lock {
	t.Helper()
	c, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(context.Background(), key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Unlock(context.Background()); _ = c.Close() })
	return l
}
