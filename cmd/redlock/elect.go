package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/seed543a70bd/redlock"
)

const electUsage = `Usage: redlock elect --nodes URL,... [flags] NAME -- command [args...]
       redlock elect --observe --nodes URL,... NAME

Campaign to be the leader of the election NAME (the library's Election, as
etcdctl elect), and run command while leader. The leadership is extended
in the background; another 'redlock elect' on NAME waits, and takes over
when this command exits (redlock then resigns) or when the leadership is
lost. If it is lost (no extension reached a quorum before its validity ran
out), the command's process group gets SIGTERM, then SIGKILL after
--grace, and redlock exits 70, as 'redlock run' does; the command's own
exit code passes through otherwise. SIGINT, SIGTERM and SIGHUP are passed
on to the command; while campaigning, they end the campaign (128+n).
--wait bounds the campaign: 75 (-E) when not elected within it.

The command sees REDLOCK_ELECTION (NAME) and REDLOCK_TERM (the term, a
fencing token greater than every earlier leader's) in its environment.

With --observe, redlock prints the leader, "TERM VALUE", on a line of its
own at each change of leader or of its value, in term order, until SIGINT
or SIGTERM (then it exits 0), as etcdctl elect -l does.

Exit codes: see 'redlock help'.

Flags:
`

// electConfig is the parsed command line of `redlock elect`.
type electConfig struct {
	runConfig
	name    string
	value   string
	observe bool
}

// parseElect parses the flags of `redlock elect`. Flags may come before
// and after NAME. For -h it prints the usage to stdout and returns
// flag.ErrHelp; otherwise it returns a usage error.
func parseElect(args []string, env func(string) string, stdout io.Writer) (*electConfig, error) {
	var c electConfig
	var f runFlags
	fs := newFlagSet("redlock elect")
	c.sharedFlags(fs, &f, "leadership", "lost leadership")
	fs.StringVar(&c.value, "value", "", "the leader's `value`, which --observe and status show (default: \"HOST pid PID\")")
	fs.BoolVar(&c.observe, "observe", false, "print the leader at each change, until interrupted; run no command")
	fs.BoolVar(&c.verbose, "v", false, "report the election (with the term) and the resignation on stderr")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, fs, electUsage)
		}
		return nil, err
	}
	// The flag package stops at NAME: parse what follows it too, up to
	// "--" or the command.
	rest := fs.Args()
	if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
		// "--" came before any NAME: what follows is the command.
		return nil, usagef("no election name: write redlock elect [flags] NAME -- command [args...]")
	}
	if len(rest) > 0 {
		c.name = rest[0]
		if err := parseFlags(fs, rest[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printUsage(stdout, fs, electUsage)
			}
			return nil, err
		}
		c.command = fs.Args()
	}
	switch {
	case c.name == "":
		return nil, usagef("no election name: write redlock elect [flags] NAME -- command [args...]")
	case c.observe && len(c.command) > 0:
		return nil, usagef("--observe runs no command, got %q", c.command[0])
	case !c.observe && len(c.command) == 0:
		return nil, usagef("no command: write redlock elect [flags] NAME -- command [args...]")
	}
	if err := c.checkShared(); err != nil {
		return nil, err
	}
	if c.value == "" {
		c.value = whoAmI()
	}
	if err := c.resolve(&f, env); err != nil {
		return nil, err
	}
	c.key = c.name
	return &c, nil
}

// cmdElect implements `redlock elect`.
func cmdElect(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	stdout, stderr = syncWriters(stdout, stderr)
	c, err := parseElect(args, env, stdout)
	if err != nil {
		return usageExit(err, "redlock elect", stderr)
	}
	r := &runner{specs: c.nodes, flight: new(inflight), stored: c.keyPrefix + redlock.KeyName("election", c.name),
		probe: max(2*c.effectiveNodeTimeout(), 100*time.Millisecond)}
	r.clients, err = newClients(c.nodes)
	if err != nil {
		return usageExit(libError(err), "redlock elect", stderr)
	}
	for _, cl := range r.clients {
		cl.AddHook(r.flight)
	}
	defer closeAll(r.clients)
	client, err := redlock.New(r.clients, c.options()...)
	if err != nil {
		return usageExit(r.usageError(err), "redlock elect", stderr)
	}
	var end time.Time // a bounded --wait ends by end, exit included
	if c.wait.set && c.wait.d > 0 && !c.observe {
		end = time.Now().Add(c.wait.d)
	}
	elected := false
	defer func() {
		if elected {
			_ = client.Close()
		} else {
			closeBy(client, end)
		}
	}()
	e := client.Election(c.name)

	sigs := make(chan os.Signal, 4)
	stop := notifySignals(sigs)
	defer stop()
	if c.observe {
		return observe(ctx, e, sigs, stdout)
	}

	ld, code := campaign(ctx, e, c, r, end, sigs, stderr)
	if ld == nil {
		return code
	}
	elected = true
	if c.verbose {
		fmt.Fprintf(stderr, "redlock elect: leader of %q, term %d, value %q (validity %v)\n",
			c.name, ld.Lock().Fence(), ld.Value(), ld.Lock().Validity().Round(time.Millisecond))
	}
	env2 := []string{"REDLOCK_ELECTION=" + c.name, "REDLOCK_TERM=" + strconv.FormatInt(ld.Lock().Fence(), 10)}
	cmd := &command{prog: "redlock elect", what: fmt.Sprintf("leadership of %q", c.name), argv: c.command, env: env2,
		foreground: c.foreground, grace: c.grace, explain: r.explain}
	code, ended := cmd.runUnder(ctx, ld.Lock(), sigs, stdout, stderr)
	// Resign wakes the waiting candidates at once; after a loss it frees
	// what the nodes may still keep.
	err = ld.Resign(context.WithoutCancel(ctx))
	switch {
	case ended && err != nil:
		fmt.Fprintf(stderr, "redlock elect: resigning %q (what is left expires with the TTL): %v\n", c.name, r.explain(err))
	case ended && c.verbose:
		fmt.Fprintf(stderr, "redlock elect: resigned %q\n", c.name)
	}
	return code
}

// campaign waits to be elected, as --wait says, or returns nil and the
// exit code: 128+n for a signal, --conflict-exit-code when not elected
// within --wait, 64 for what the library refuses (a value over 4 KiB).
func campaign(ctx context.Context, e *redlock.Election, c *electConfig, r *runner, end time.Time, sigs <-chan os.Signal, stderr io.Writer) (*redlock.Leadership, int) {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if !end.IsZero() {
		var cancelT context.CancelFunc
		cctx, cancelT = context.WithDeadline(cctx, end.Add(-min(c.wait.d/2, 2*c.effectiveNodeTimeout())))
		defer cancelT()
	}
	var opts []redlock.LockOption
	if c.wait.set && c.wait.d == 0 {
		opts = append(opts, redlock.WithMaxTries(1)) // one attempt
	}
	got := make(chan os.Signal, 1)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case s := <-sigs:
			got <- s
			cancel(errSignal)
		case <-done:
		}
	}()
	ld, err := e.Campaign(cctx, c.value, c.ttl, opts...)
	close(done)
	<-finished
	var sig os.Signal
	select {
	case sig = <-got:
	default:
	}
	if err != nil || sig != nil {
		d := 2 * c.effectiveNodeTimeout()
		if !end.IsZero() {
			d = min(d, time.Until(end))
		}
		r.flight.quiesce(d) // see inflight
	}
	if sig != nil {
		if ld != nil {
			_ = ld.Resign(context.WithoutCancel(ctx))
		}
		fmt.Fprintf(stderr, "redlock elect: %v while campaigning for %q\n", sig, c.name)
		return nil, exitSignal + signalNumber(sig)
	}
	if err == nil {
		return ld, exitOK
	}
	if errors.Is(err, redlock.ErrInvalid) {
		return nil, usageExit(r.usageError(err), "redlock elect", stderr)
	}
	var when string
	switch {
	case c.wait.set && c.wait.d == 0:
		when = " (--wait 0: one attempt)"
	case c.wait.set:
		when = fmt.Sprintf(" within %v", c.wait.d)
	}
	// The library's message names the leader (its term and value) on
	// contention, and each node's answer.
	fmt.Fprintf(stderr, "redlock elect: not elected leader of %q%s: %v\n", c.name, when, libError(err))
	return nil, c.conflictCode
}

// observe prints the leader of e at each change, "TERM VALUE", until a
// signal arrives or ctx ends; then it returns 0.
func observe(ctx context.Context, e *redlock.Election, sigs <-chan os.Signal, stdout io.Writer) int {
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-octx.Done():
		}
	}()
	for l := range e.Observe(octx) {
		fmt.Fprintf(stdout, "%d %s\n", l.Term, l.Value)
	}
	return exitOK
}
