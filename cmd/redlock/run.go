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
read from the terminal, unless --foreground.

The command sees REDLOCK_KEY (and REDLOCK_FENCE with --fence) in its
environment. Exit codes: see 'redlock help'.

Flags:
`

// runConfig is the parsed command line of `redlock run`.
type runConfig struct {
	nodes       []nodeSpec
	key         string
	ttl         time.Duration
	wait        waitFlag
	grace       time.Duration
	nodeTimeout time.Duration
	multi       bool
	fence       bool
	foreground  bool
	verbose     bool
	command     []string
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
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (e.g. 30s, 1m)")
	}
	if d < 0 {
		return errors.New("negative")
	}
	w.d, w.set = d, true
	return nil
}

// parseRun parses the flags of `redlock run`. It returns flag.ErrHelp for
// -h, or a usage error.
func parseRun(args []string, env func(string) string, stderr io.Writer) (*runConfig, error) {
	var c runConfig
	var nodes string
	fs := flag.NewFlagSet("redlock run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // see printUsage
	fs.StringVar(&nodes, "nodes", "", "comma-separated node URLs: redis://[user:password@]host:port[/db], rediss:// for TLS (default: $"+envNodes+")")
	fs.StringVar(&c.key, "key", "", "the lock's key (required)")
	fs.DurationVar(&c.ttl, "ttl", 30*time.Second, "lock TTL; the lock is extended by this much each time half of it is left")
	fs.Var(&c.wait, "wait", "wait up to this `duration` for the lock; 0 makes one attempt (default: wait forever)")
	fs.DurationVar(&c.grace, "grace", 10*time.Second, "after a lost lock, time between SIGTERM and SIGKILL; 0 sends SIGKILL at once")
	fs.DurationVar(&c.nodeTimeout, "node-timeout", 0, "per-node request timeout (default: ttl/20, clamped to [5ms, 200ms])")
	fs.BoolVar(&c.multi, "multi", false, "need every node, not a majority (MultiLock)")
	fs.BoolVar(&c.fence, "fence", false, "also take a fencing token and pass it in REDLOCK_FENCE")
	fs.BoolVar(&c.foreground, "foreground", false, "run the command in redlock's process group, so that it can read from the terminal; a lost lock then signals the command only, not its children")
	fs.BoolVar(&c.verbose, "v", false, "report acquisition and release on stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs, runUsage)
			return nil, err
		}
		return nil, &usageError{msg: err.Error(), printed: true}
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
	case len(c.command) == 0:
		return nil, usagef("no command: write redlock run [flags] -- command [args...]")
	}
	specs, err := parseNodes(nodes, env)
	if err != nil {
		return nil, err
	}
	c.nodes = specs
	return &c, nil
}

// locker is what run needs of a *redlock.Client or *redlock.MultiLock.
type locker interface {
	TryLock(ctx context.Context, key string, ttl time.Duration, opts ...redlock.Option) (*redlock.Lock, error)
	Lock(ctx context.Context, key string, ttl time.Duration, opts ...redlock.Option) (*redlock.Lock, error)
	Close() error
}

var _ locker = (*redlock.Client)(nil)

// newLocker returns a Client over the nodes, or a MultiLock with --multi.
func newLocker(clients []redis.UniversalClient, multi bool, opts []redlock.Option) (locker, error) {
	if multi {
		return newMultiLocker(clients, opts...)
	}
	return redlock.New(clients, opts...)
}

// cmdRun implements `redlock run`.
func cmdRun(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	stdout, stderr = syncWriters(stdout, stderr)
	c, err := parseRun(args, env, stderr)
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
	clients := newClients(c.nodes)
	defer closeAll(clients)
	lk, err := newLocker(clients, c.multi, opts)
	if err != nil {
		return usageExit(err, "redlock run", stderr)
	}
	// Before the go-redis clients close: releases that failed get one
	// last attempt, so that the process leaves no key behind it can
	// still remove.
	defer lk.Close()

	sigs := make(chan os.Signal, 4)
	stop := notifySignals(sigs)
	defer stop()

	l, code := acquire(ctx, lk, c, sigs, stderr)
	// Runs before closeAll: let the last round's stragglers be cleaned up.
	defer settle(time.Now(), c)
	if l == nil {
		return code
	}
	if c.verbose {
		fmt.Fprintf(stderr, "redlock run: acquired %q on %d nodes (validity %v, fence %d)\n", c.key, len(c.nodes), l.Validity().Round(time.Millisecond), l.Fence())
	}
	return supervise(ctx, l, c, sigs, stdout, stderr)
}

// supervise runs the command under l, extending l, forwarding signals,
// and terminating the command when l is lost. It releases l at the end.
func supervise(ctx context.Context, l *redlock.Lock, c *runConfig, sigs <-chan os.Signal, stdout, stderr io.Writer) int {
	bg := context.WithoutCancel(ctx) // extension and release outlive ctx
	released := false
	defer func() {
		if !released { // lost or failed: free what nodes still hold our token
			if err := release(bg, l); err != nil && c.verbose {
				fmt.Fprintf(stderr, "redlock run: releasing %q: %v\n", c.key, err)
			}
		}
	}()
	if err := l.AutoExtend(bg); err != nil {
		fmt.Fprintf(stderr, "redlock run: lock %q lost before the command started: %v\n", c.key, err)
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
	terminate := func(why string) {
		lockDone, ctxDone = nil, nil
		if c.grace == 0 {
			fmt.Fprintf(stderr, "redlock run: %s; sending SIGKILL to the command\n", why)
			ch.signal(sigKill)
			return
		}
		fmt.Fprintf(stderr, "redlock run: %s; sending SIGTERM to the command, SIGKILL in %v\n", why, c.grace)
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
					fmt.Fprintf(stderr, "redlock run: lock %q lost: %v\n", c.key, err)
				}
				return exitLockLost
			}
			released = true
			if err := release(bg, l); err != nil {
				fmt.Fprintf(stderr, "redlock run: releasing %q: %v (it expires with its TTL)\n", c.key, err)
			} else if c.verbose {
				fmt.Fprintf(stderr, "redlock run: released %q\n", c.key)
			}
			return code
		case s := <-sigs:
			ch.forward(s)
		case <-lockDone:
			terminate(fmt.Sprintf("lock %q lost: %v", c.key, l.Err()))
		case <-ctxDone:
			terminate(fmt.Sprintf("cancelled: %v", context.Cause(ctx)))
		case <-killC:
			killC = nil
			ch.signal(sigKill)
		}
	}
}
