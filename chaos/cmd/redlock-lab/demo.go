package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/chaos"
	"github.com/seed543a70bd/redlock/chaos/internal/cliflag"
	"github.com/seed543a70bd/redlock/internal/redisnode"
)

const demoUsage = `Usage: redlock-lab demo [--workers 6] [--duration 10s] [--report report/demo]

Start 5 local redis-server nodes (appendonly yes, appendfsync always), run
workers that contend for one lock, kill a node while the lock is held and
restart it, then print what happened and write an HTML report. Exits 0
when the lock was obtained and no two workers ever held it at once
(violations = 0). Needs redis-server; 'make demo' installs it.

Flags:
`

const (
	demoNodes  = 5
	demoKey    = "redlock-demo"
	demoTTL    = time.Second
	demoLongEv = 20 // one hold in 20 outlasts half the TTL, so it is auto-extended
	demoVictim = 2  // the node killed and restarted: node 3
)

// Workers and nodes are numbered from 1 in all the demo prints and draws,
// as elsewhere in the CLI; in code and in the chaos.History they are
// 0-based indices.

// demoRun is the shared state of one demo.
type demoRun struct {
	rec *chaos.Recorder // attempts, holds and faults on one clock, for the checker and the report

	mu      sync.Mutex
	holder  int // worker holding now, -1 for none
	last    int // last worker that held, -1 before the first
	handoff int

	acquired, contended, failed, extended, lost atomic.Int64
	lastErr                                     atomic.Pointer[error] // of the last failed attempt
}

// cmdDemo implements `redlock demo`.
func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var workers int
	var dur time.Duration
	var reportDir string
	fs := newFlagSet("redlock-lab demo")
	fs.IntVar(&workers, "workers", 6, "contending workers")
	fs.DurationVar(&dur, "duration", 10*time.Second, "how long the workers run (a `duration`)")
	fs.StringVar(&reportDir, "report", filepath.Join("report", "demo"), "`directory` for the HTML report (index.html)")
	if err := cliflag.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, fs, demoUsage)
			return exitOK
		}
		return usageExit(err, "redlock-lab demo", stderr)
	}
	var err error
	switch {
	case workers < 2:
		err = fmt.Errorf("--workers %d: need at least 2 to contend", workers)
	case dur < time.Second:
		err = fmt.Errorf("--duration %v: need at least 1s", dur)
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err != nil {
		return usageExit(err, "redlock-lab demo", stderr)
	}
	if _, err := redisnode.LookPath(); err != nil {
		fmt.Fprintf(stderr, "redlock-lab demo: %v\n", err)
		return exitFailure
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()

	nodes, err := redisnode.StartN(demoNodes, redisnode.Options{AppendOnly: true})
	if err != nil {
		fmt.Fprintf(stderr, "redlock-lab demo: %v\n", err)
		return exitFailure
	}
	defer func() {
		for _, n := range nodes {
			_ = n.Close()
		}
	}()
	clients := make([]redis.UniversalClient, len(nodes))
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = "redis://" + n.Addr()
		clients[i] = redis.NewClient(&redis.Options{
			Addr: n.Addr(), DialTimeout: 250 * time.Millisecond,
			ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
			MaxRetries: -1, DialerRetries: 1,
		})
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	fmt.Fprintf(stdout, "Started %d redis-server nodes (appendonly yes, appendfsync always): %s\n", len(nodes), strings.Join(addrs, " "))
	fmt.Fprintf(stdout, "%d workers contend for %q (TTL %v) for %v; node %d will be killed while the lock is held, then restarted.\n\n", workers, demoKey, demoTTL, dur, demoVictim+1)

	d := &demoRun{rec: chaos.NewRecorder(chaos.NewClock()), holder: -1, last: -1}
	wctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	tty := chaos.IsTerminal(stdout)
	var out sync.Mutex // serialises stdout between the progress line and events
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		if tty {
			fmt.Fprint(stdout, "\r\033[K")
		}
		fmt.Fprintf(stdout, "%6.2fs  "+format+"\n", append([]any{d.rec.Clock().Now().Seconds()}, args...)...)
	}

	var wg sync.WaitGroup
	for w := range workers {
		c, err := redlock.New(clients)
		if err != nil {
			fmt.Fprintf(stderr, "redlock-lab demo: %v\n", err)
			return exitFailure
		}
		wg.Add(1)
		go func() { defer wg.Done(); d.worker(wctx, c, w) }()
	}
	wg.Add(2)
	go func() { defer wg.Done(); d.faults(wctx, nodes, dur, say) }()
	go func() {
		defer wg.Done()
		if tty {
			d.progress(wctx, dur, stdout, &out)
		}
	}()
	wg.Wait()
	if tty {
		fmt.Fprint(stdout, "\r\033[K")
	}

	h := d.rec.History()
	violations := chaos.Overlaps(h.Sections) // the chaos suite's checker: with a correct lock, none
	fmt.Fprintf(stdout, "\nSummary (%v, %d workers, %d nodes, quorum %d):\n", h.End.Round(10*time.Millisecond), workers, demoNodes, demoNodes/2+1)
	fmt.Fprintf(stdout, "  acquisitions  %6d\n", d.acquired.Load())
	fmt.Fprintf(stdout, "  hand-offs     %6d   (the lock passed from one worker to another)\n", d.handoffs())
	fmt.Fprintf(stdout, "  extensions    %6d   (long holds kept alive by auto-extension)\n", d.extended.Load())
	fmt.Fprintf(stdout, "  contended     %6d   (attempts that found the lock held)\n", d.contended.Load())
	fmt.Fprintf(stdout, "  errors        %6d   (attempts that failed for other reasons)\n", d.failed.Load())
	if p := d.lastErr.Load(); p != nil {
		last := explain(*p, addrs)
		fmt.Fprintf(stdout, "                         last: %s\n", strings.ReplaceAll(last, "\n", "\n                         "))
	}
	fmt.Fprintf(stdout, "  locks lost    %6d\n", d.lost.Load())
	fmt.Fprintf(stdout, "  violations    %6d   (two workers holding the lock at once)\n", len(violations))
	for i, v := range violations {
		if i == 5 {
			fmt.Fprintf(stdout, "                         ... and %d more\n", len(violations)-i)
			break
		}
		fmt.Fprintf(stdout, "                         %s\n", describe(h, v))
	}

	path, err := d.writeReport(reportDir, h, violations, workers, addrs)
	if err != nil {
		fmt.Fprintf(stderr, "redlock-lab demo: report: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "Report: %s\n", path)
	switch {
	case len(violations) > 0:
		fmt.Fprintf(stderr, "redlock-lab demo: %d violations\n", len(violations))
		return exitFailure
	case d.acquired.Load() == 0:
		fmt.Fprintln(stderr, "redlock-lab demo: no worker obtained the lock")
		return exitFailure
	}
	return exitOK
}

// progress redraws the live progress line until ctx is done.
func (d *demoRun) progress(ctx context.Context, dur time.Duration, w io.Writer, out *sync.Mutex) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		out.Lock()
		fmt.Fprintf(w, "\r\033[K%5.1fs/%v  acquisitions %d  hand-offs %d  extensions %d  errors %d  lost %d",
			d.rec.Clock().Now().Seconds(), dur, d.acquired.Load(), d.handoffs(), d.extended.Load(), d.failed.Load(), d.lost.Load())
		out.Unlock()
	}
}

// describe tells of violation v in h (an overlap) with 1-based workers.
func describe(h chaos.History, v chaos.Violation) string {
	a, b := h.Sections[v.A], h.Sections[v.B]
	return fmt.Sprintf("workers %d and %d both held the lock from %.3fs to %.3fs",
		a.Client+1, b.Client+1, b.Acquired.Seconds(), min(a.End(), b.End()).Seconds())
}

// explain describes a failed attempt's error for the summary: its causes
// and, for a round, the votes and a line per node that did not grant,
// numbered from 1 and named by URL, as the redlock command says them.
func explain(err error, urls []string) string {
	causes := []struct {
		err error
		say string
	}{
		{redlock.ErrContended, "held by another owner"},
		{redlock.ErrUnreachable, "nodes unreachable"},
		{redlock.ErrExpired, "validity expired"},
		{context.Canceled, "cancelled"},
		{context.DeadlineExceeded, "deadline exceeded"},
	}
	var says []string
	for _, c := range causes {
		if errors.Is(err, c.err) {
			says = append(says, c.say)
		}
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		if len(says) == 0 {
			return strings.ReplaceAll(err.Error(), "redlock: ", "")
		}
		return strings.Join(says, ": ")
	}
	if len(says) == 0 {
		says = append(says, "not held")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s: %d of %d nodes agreed, %d needed)", strings.Join(says, ": "), qe.Op, qe.OK, len(qe.Nodes), qe.Quorum)
	for _, n := range qe.Nodes {
		if n.Status == "ok" {
			continue
		}
		st := n.Status
		switch n.Status {
		case "taken":
			st = "held by another owner"
		case "pending":
			st = "no answer before the outcome was decided"
		case "failed":
			st = "failed: " + strings.ReplaceAll(fmt.Sprint(n.Err), "redlock: ", "")
		}
		name := fmt.Sprintf("node %d", n.Node+1)
		if n.Node >= 0 && n.Node < len(urls) {
			name += " (" + urls[n.Node] + ")"
		}
		fmt.Fprintf(&b, "\n  %s: %s", name, st)
	}
	return b.String()
}

// sleepCtx sleeps for d or until ctx is done; it reports whether it slept.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
