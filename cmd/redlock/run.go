package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
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

// parseRun parses the flags of `redlock run`. For -h it prints the usage
// to stdout and returns flag.ErrHelp; otherwise it returns a usage error.
func parseRun(args []string, env func(string) string, stdout io.Writer) (*runConfig, error) {
	var c runConfig
	var nodes, guard string
	fs := newFlagSet("redlock run")
	fs.StringVar(&nodes, "nodes", "", "comma-separated node URLs: redis://[user:password@]host:port[/db], rediss:// for TLS, redis+cluster://, redis+sentinel:// (default: $"+envNodes+")")
	fs.StringVar(&c.key, "key", "", "the lock's key (required)")
	durationVar(fs, &c.ttl, "ttl", 30*time.Second, "lock TTL: the lock is extended by this `duration` each time half of it is left")
	fs.Var(&c.wait, "wait", "wait up to this `duration` for the lock; 0 makes one attempt (default: wait forever)")
	fs.Var(&c.wait, "w", "short for --wait (a `duration`)")
	fs.IntVar(&c.conflictCode, "conflict-exit-code", exitNotObtained, "exit `code` when the lock is not obtained (like flock -E)")
	fs.IntVar(&c.conflictCode, "E", exitNotObtained, "short for --conflict-exit-code (an exit `code`)")
	durationVar(fs, &c.grace, "grace", 10*time.Second, "after a lost lock, the `duration` between SIGTERM and SIGKILL; 0 sends SIGKILL at once")
	durationVar(fs, &c.nodeTimeout, "node-timeout", 0, "per-node request timeout, a `duration` (default: ttl/20, clamped to [5ms, 200ms])")
	fs.StringVar(&guard, "restart-guard", "", "refuse the votes of nodes restarted less than this `duration` ago (WithRestartGuard; default: $"+envRestartGuard+", else off)")
	fs.StringVar(&c.keyPrefix, "key-prefix", "", "`prefix` of the keys on the nodes (WithKeyPrefix; default: $"+envKeyPrefix+")")
	fs.BoolVar(&c.multi, "multi", false, "need every node, not a majority (MultiLock)")
	fs.BoolVar(&c.fence, "fence", false, "also take a fencing token and pass it in REDLOCK_FENCE")
	fs.BoolVar(&c.foreground, "foreground", false, "run the command in redlock's process group, so that it can read from the terminal; a lost lock then signals the command only, not its children")
	fs.BoolVar(&c.verbose, "v", false, "report acquisition (with the token, as status's HOLDER shows it) and release on stderr")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, fs, runUsage)
		}
		return nil, err
	}
	c.command = fs.Args()
	switch {
	case c.key == "":
		return nil, usagef("--key is required")
	case c.ttl <= 0:
		return nil, usagef("--ttl %v is not positive", c.ttl)
	case c.grace < 0:
		return nil, usagef("--grace %v is negative", c.grace)
	case c.nodeTimeout < 0:
		return nil, usagef("--node-timeout %v is negative", c.nodeTimeout)
	case c.conflictCode < 0 || c.conflictCode > 255:
		return nil, usagef("--conflict-exit-code %d is not in 0..255", c.conflictCode)
	case len(c.command) == 0:
		return nil, usagef("no command: write redlock run [flags] -- command [args...]")
	}
	var err error
	if c.restartGuard, err = restartGuard(guard, env); err != nil {
		return nil, err
	}
	c.keyPrefix = keyPrefix(c.keyPrefix, env)
	specs, err := parseNodes(nodes, env)
	if err != nil {
		return nil, err
	}
	c.nodes = specs
	return &c, nil
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
func newLocker(clients []redis.UniversalClient, multi bool, opts []redlock.Option) (redlock.Locker, error) {
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
	var opts []redlock.Option
	if c.nodeTimeout > 0 {
		opts = append(opts, redlock.WithNodeTimeout(c.nodeTimeout))
	}
	if c.fence {
		opts = append(opts, redlock.WithFencing())
	}
	if c.restartGuard > 0 {
		opts = append(opts, redlock.WithRestartGuard(c.restartGuard))
	}
	if c.keyPrefix != "" {
		opts = append(opts, redlock.WithKeyPrefix(c.keyPrefix))
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
		fmt.Fprintf(stderr, "redlock run: acquired %q with token %s (status shows %s) on a quorum of %d nodes (validity %v%s)\n",
			c.key, l.Token(), shortToken(l.Token()), len(c.nodes), l.Validity().Round(time.Millisecond), fence)
	}
	return supervise(ctx, l, c, r, sigs, stdout, stderr)
}

// supervise runs the command under l, extending l, forwarding signals,
// and terminating the command when l is lost. It releases l at the end.
func supervise(ctx context.Context, l *redlock.Lock, c *runConfig, r *runner, sigs <-chan os.Signal, stdout, stderr io.Writer) int {
	bg := context.WithoutCancel(ctx) // extension and release outlive ctx
	released := false
	defer func() {
		if !released { // lost or failed: free what nodes still hold our token
			if err := release(bg, l); err != nil && c.verbose {
				fmt.Fprintf(stderr, "redlock run: releasing %q: %v\n", c.key, r.explain(err))
			}
		}
	}()
	if err := l.AutoExtend(bg); err != nil {
		fmt.Fprintf(stderr, "redlock run: lock %q, before the command started: %v\n", c.key, r.explain(err))
		return exitLockLost
	}

	cmd := exec.Command(c.command[0], c.command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(os.Environ(), "REDLOCK_KEY="+c.key)
	if c.fence {
		cmd.Env = append(cmd.Env, "REDLOCK_FENCE="+strconv.FormatInt(l.Fence(), 10))
	}
	cmd.WaitDelay = time.Second // do not hang on output pipes held by grandchildren
	ch := newChild(cmd, c.foreground)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "redlock run: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotRun
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	lockDone, ctxDone := l.Done(), ctx.Done()
	var kill *time.Timer
	var killC <-chan time.Time
	defer func() {
		if kill != nil {
			kill.Stop()
		}
	}()
	// terminate says why (which may end with a line per node) and, on a
	// line of its own, what is done about it.
	terminate := func(why string) {
		lockDone, ctxDone = nil, nil
		fmt.Fprintf(stderr, "redlock run: %s\n", why)
		if c.grace == 0 {
			fmt.Fprintln(stderr, "redlock run: sending SIGKILL to the command")
			ch.signal(sigKill)
			return
		}
		fmt.Fprintf(stderr, "redlock run: sending SIGTERM to the command, SIGKILL in %v\n", c.grace)
		ch.signal(sigTerm)
		kill = time.NewTimer(c.grace)
		killC = kill.C
	}
	for {
		select {
		case <-exited:
			code := exitStatus(cmd.ProcessState)
			if err := l.Err(); errors.Is(err, redlock.ErrLockLost) {
				ch.killRest()        // whatever the command left running
				if lockDone != nil { // lost as the command ended
					fmt.Fprintf(stderr, "redlock run: lock %q: %v\n", c.key, r.explain(err))
				}
				return exitLockLost
			}
			released = true
			if err := release(bg, l); err != nil {
				fmt.Fprintf(stderr, "redlock run: releasing %q (what is left expires with the TTL): %v\n", c.key, r.explain(err))
			} else if c.verbose {
				fmt.Fprintf(stderr, "redlock run: released %q\n", c.key)
			}
			return code
		case s := <-sigs:
			ch.forward(s)
		case <-lockDone:
			terminate(fmt.Sprintf("lock %q: %v", c.key, r.explain(l.Err())))
		case <-ctxDone:
			terminate(fmt.Sprintf("cancelled: %v", context.Cause(ctx)))
		case <-killC:
			killC = nil
			ch.signal(sigKill)
		}
	}
}
