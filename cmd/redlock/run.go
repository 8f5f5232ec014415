package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

const runUsage = `Usage: redlock run --nodes URL,... --key K [flags] -- command [args...]

Run command while holding the Redlock lock K on a majority of the nodes,
extending it in the background, like flock(1), etcdctl lock and consul
lock. SIGINT, SIGTERM and SIGHUP are passed on to the command. If the lock
is lost (no extension reached a quorum before its validity ran out), the
command's process group gets SIGTERM, then SIGKILL after --grace, and
redlock exits 70. The command runs in its own process group, so it cannot
read from the terminal, unless --foreground. On Linux that group is
SIGKILLed if redlock itself dies (even of kill -9).

The command sees REDLOCK_KEY (and REDLOCK_FENCE with --fence) in its
environment. Exit codes: see 'redlock help'.

Flags:
`

// Environment variables read when the flag is not given.
const (
	envRestartGuard = "REDLOCK_RESTART_GUARD"
	envKeyPrefix    = "REDLOCK_KEY_PREFIX"
)

// runConfig is the parsed command line of `redlock run`.
type runConfig struct {
	nodes        []nodeSpec
	key          string
	ttl          time.Duration
	wait         waitFlag
	grace        time.Duration
	nodeTimeout  time.Duration
	restartGuard time.Duration
	keyPrefix    string
	conflictCode int
	multi        bool
	fence        bool
	foreground   bool
	verbose      bool
	metadata     string
	command      []string
}

// errNotDuration is the one message of every bad duration, flag or
// environment variable.
var errNotDuration = errors.New("not a duration (e.g. 30s, 1m)")

// parseDuration is time.ParseDuration with errNotDuration.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errNotDuration
	}
	return d, nil
}

// durationFlag is a duration flag whose errors read as errNotDuration.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return "0s" // the zero value, for flag.PrintDefaults
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

// durationVar defines a duration flag with errNotDuration errors.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationFlag{p}, name, usage)
}

// waitFlag is --wait: unset means wait forever, 0 means one attempt.
type waitFlag struct {
	d   time.Duration
	set bool
}

func (w *waitFlag) String() string {
	if w == nil || !w.set {
		return "forever"
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return errors.New("negative")
	}
	w.d, w.set = d, true
	return nil
}

// newFlagSet returns a flag set whose errors come back to the caller
// unprinted, so that usageExit prints them once, with the command's
// prefix; -h comes back as flag.ErrHelp, for printUsage.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // see printUsage
	return fs
}

// runFlags are the flags that `redlock run` and `redlock elect` share and
// that need resolving after parsing (from the environment when not given).
type runFlags struct {
	nodes, guard string
}

// sharedFlags defines on fs the flags of run and elect: the nodes, the TTL,
// --wait, and how the command is supervised. noun names what is held ("the
// lock", "leadership") and lost ("a lost lock", "lost leadership").
func (c *runConfig) sharedFlags(fs *flag.FlagSet, f *runFlags, noun, lost string) {
	fs.StringVar(&f.nodes, "nodes", "", "comma-separated node URLs: redis://[user:password@]host:port[/db], rediss:// for TLS, redis+cluster://, redis+sentinel:// (default: $"+envNodes+")")
	durationVar(fs, &c.ttl, "ttl", 30*time.Second, "TTL of "+noun+": it is extended by this `duration` each time half of it is left")
	fs.Var(&c.wait, "wait", "wait up to this `duration` for "+noun+"; 0 makes one attempt (default: wait forever)")
	fs.Var(&c.wait, "w", "short for --wait (a `duration`)")
	fs.IntVar(&c.conflictCode, "conflict-exit-code", exitNotObtained, "exit `code` when "+noun+" is not obtained within --wait (like flock -E)")
	fs.IntVar(&c.conflictCode, "E", exitNotObtained, "short for --conflict-exit-code (an exit `code`)")
	durationVar(fs, &c.grace, "grace", 10*time.Second, "after "+lost+", the `duration` between SIGTERM and SIGKILL; 0 sends SIGKILL at once")
	durationVar(fs, &c.nodeTimeout, "node-timeout", 0, "per-node request timeout, a `duration` (default: ttl/20, clamped to [5ms, 200ms])")
	fs.StringVar(&f.guard, "restart-guard", "", "refuse the votes of nodes restarted less than this `duration` ago (WithRestartGuard; default: $"+envRestartGuard+", else off)")
	fs.StringVar(&c.keyPrefix, "key-prefix", "", "`prefix` of the keys on the nodes (WithKeyPrefix; default: $"+envKeyPrefix+")")
	fs.BoolVar(&c.foreground, "foreground", false, "run the command in redlock's process group, so that it can read from the terminal; "+lost+" then signals the command only, not its children")
}

// checkShared returns a usage error for a bad value of a shared flag.
func (c *runConfig) checkShared() error {
	switch {
	case c.ttl <= 0:
		return usagef("--ttl %v is not positive", c.ttl)
	case c.grace < 0:
		return usagef("--grace %v is negative", c.grace)
	case c.nodeTimeout < 0:
		return usagef("--node-timeout %v is negative", c.nodeTimeout)
	case c.conflictCode < 0 || c.conflictCode > 255:
		return usagef("--conflict-exit-code %d is not in 0..255", c.conflictCode)
	}
	return nil
}

// resolve completes the shared flags from the environment: the restart
// guard, the key prefix and the nodes.
func (c *runConfig) resolve(f *runFlags, env func(string) string) error {
	var err error
	if c.restartGuard, err = restartGuard(f.guard, env); err != nil {
		return err
	}
	c.keyPrefix = keyPrefix(c.keyPrefix, env)
	c.nodes, err = parseNodes(f.nodes, env)
	return err
}

// options returns the library options of the shared flags.
func (c *runConfig) options() []redlock.Option {
	var opts []redlock.Option
	if c.nodeTimeout > 0 {
		opts = append(opts, redlock.WithNodeTimeout(c.nodeTimeout))
	}
	if c.restartGuard > 0 {
		opts = append(opts, redlock.WithRestartGuard(c.restartGuard))
	}
	if c.keyPrefix != "" {
		opts = append(opts, redlock.WithKeyPrefix(c.keyPrefix))
	}
	return opts
}

// parseRun parses the flags of `redlock run`. For -h it prints the usage
// to stdout and returns flag.ErrHelp; otherwise it returns a usage error.
func parseRun(args []string, env func(string) string, stdout io.Writer) (*runConfig, error) {
	var c runConfig
	var f runFlags
	var meta string
	fs := newFlagSet("redlock run")
	c.sharedFlags(fs, &f, "the lock", "a lost lock")
	fs.StringVar(&c.key, "key", "", "the lock's key (required)")
	fs.BoolVar(&c.multi, "multi", false, "need every node, not a majority (MultiLock)")
	fs.BoolVar(&c.fence, "fence", false, "also take a fencing token and pass it in REDLOCK_FENCE")
	fs.StringVar(&meta, "metadata", "", "`text` stored with the lock, which status shows (WithMetadata; default: \"HOST pid PID: COMMAND\", cut to 4 KiB; give another when the arguments hold secrets: anyone who reads the nodes reads it)")
	fs.BoolVar(&c.verbose, "v", false, "report acquisition (with the holder ID that status shows) and release on stderr")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, fs, runUsage)
		}
		return nil, err
	}
	c.command = fs.Args()
	if c.key == "" {
		return nil, usagef("--key is required")
	}
	if err := c.checkShared(); err != nil {
		return nil, err
	}
	if len(c.command) == 0 {
		return nil, usagef("no command: write redlock run [flags] -- command [args...]")
	}
	c.metadata = meta
	if meta == "" {
		c.metadata = runMetadata(c.command)
	}
	if err := c.resolve(&f, env); err != nil {
		return nil, err
	}
	return &c, nil
}

// whoAmI is "HOST pid PID", redlock's own process: the default of elect's
// --value and the start of run's metadata.
func whoAmI() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s pid %d", host, os.Getpid())
}

// runMetadata is run's default metadata: who runs which command, cut to
// 4096 bytes.
func runMetadata(argv []string) string {
	m := whoAmI() + ": " + strings.Join(argv, " ")
	if len(m) > 4096 {
		m = m[:4096]
	}
	return m
}

// restartGuard parses --restart-guard, else REDLOCK_RESTART_GUARD.
func restartGuard(flag string, env func(string) string) (time.Duration, error) {
	s, from := flag, "--restart-guard"
	if s == "" {
		s, from = env(envRestartGuard), envRestartGuard
	}
	if s == "" {
		return 0, nil
	}
	d, err := parseDuration(s)
	switch {
	case err != nil:
		return 0, usagef("%s %q: %v", from, s, err)
	case d < 0:
		return 0, usagef("%s %v is negative", from, d)
	}
	return d, nil
}

// keyPrefix returns --key-prefix, else REDLOCK_KEY_PREFIX.
func keyPrefix(flag string, env func(string) string) string {
	if flag != "" {
		return flag
	}
	return env(envKeyPrefix)
}

// newLocker returns a Client over the nodes, or a MultiLock with --multi.
func newLocker(clients []redis.UniversalClient, multi bool, opts []redlock.Option) (*redlock.Client, error) {
	if multi {
		return newMultiLocker(clients, opts...)
	}
	return redlock.New(clients, opts...)
}

// cmdRun implements `redlock run`.
func cmdRun(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	stdout, stderr = syncWriters(stdout, stderr)
	c, err := parseRun(args, env, stdout)
	if err != nil {
		return usageExit(err, "redlock run", stderr)
	}
	opts := append(c.options(), redlock.WithMetadata(c.metadata))
	if c.fence {
		opts = append(opts, redlock.WithFencing())
	}
	// A bounded --wait ends by end, exit included (see acquire).
	var end time.Time
	if c.wait.set && c.wait.d > 0 {
		end = time.Now().Add(c.wait.d)
	}
	r := &runner{specs: c.nodes, flight: new(inflight), stored: c.keyPrefix + c.key,
		probe: max(2*c.effectiveNodeTimeout(), 100*time.Millisecond)}
	r.clients, err = newClients(c.nodes)
	if err != nil {
		return usageExit(libError(err), "redlock run", stderr)
	}
	for _, cl := range r.clients {
		cl.AddHook(r.flight)
	}
	defer closeAll(r.clients)
	lk, err := newLocker(r.clients, c.multi, opts)
	if err != nil {
		return usageExit(r.usageError(err), "redlock run", stderr)
	}
	// Before the go-redis clients close: releases in flight are waited
	// for and those that failed get one last attempt, so that the process
	// leaves no key behind it can still remove; by the end of a bounded
	// wait when the lock was not obtained.
	obtained := false
	defer func() {
		if obtained {
			_ = lk.Close()
		} else {
			closeBy(lk, end)
		}
	}()

	sigs := make(chan os.Signal, 4)
	stop := notifySignals(sigs)
	defer stop()

	l, code := acquire(ctx, lk, c, r, end, sigs, stderr)
	if l == nil {
		return code
	}
	obtained = true
	if c.verbose {
		fence := ""
		if c.fence {
			fence = fmt.Sprintf(", fence %d", l.Fence())
		}
		fmt.Fprintf(stderr, "redlock run: acquired %q with token %s (holder %s in status) on a quorum of %d nodes (validity %v%s)\n",
			c.key, l.Token(), holderID(l.Token()), len(c.nodes), l.Validity().Round(time.Millisecond), fence)
	}
	return supervise(ctx, l, c, r, sigs, stdout, stderr)
}

// supervise runs the command under l (see command.runUnder), extending
// l. It releases l at the end.
func supervise(ctx context.Context, l *redlock.Lock, c *runConfig, r *runner, sigs <-chan os.Signal, stdout, stderr io.Writer) int {
	bg := context.WithoutCancel(ctx) // extension and release outlive ctx
	if err := l.AutoExtend(bg); err != nil {
		fmt.Fprintf(stderr, "redlock run: lock %q, before the command started: %v\n", c.key, r.explain(err))
		releaseQuietly(bg, l, c, r, stderr)
		return exitLockLost
	}
	env := []string{"REDLOCK_KEY=" + c.key}
	if c.fence {
		env = append(env, "REDLOCK_FENCE="+strconv.FormatInt(l.Fence(), 10))
	}
	cmd := &command{prog: "redlock run", what: fmt.Sprintf("lock %q", c.key), argv: c.command, env: env,
		foreground: c.foreground, grace: c.grace, explain: r.explain}
	code, ended := cmd.runUnder(ctx, l, sigs, stdout, stderr)
	if !ended { // lost, or not started: free what nodes still hold our token
		releaseQuietly(bg, l, c, r, stderr)
		return code
	}
	if err := release(bg, l); err != nil {
		fmt.Fprintf(stderr, "redlock run: releasing %q (what is left expires with the TTL): %v\n", c.key, r.explain(err))
	} else if c.verbose {
		fmt.Fprintf(stderr, "redlock run: released %q\n", c.key)
	}
	return code
}

// releaseQuietly releases a lock that was lost or whose command did not
// start, reporting a failure with -v only: the exit code already says
// what went wrong.
func releaseQuietly(ctx context.Context, l *redlock.Lock, c *runConfig, r *runner, stderr io.Writer) {
	if err := release(ctx, l); err != nil && c.verbose {
		fmt.Fprintf(stderr, "redlock run: releasing %q: %v\n", c.key, r.explain(err))
	}
}
