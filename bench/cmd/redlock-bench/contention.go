package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

// The contention scenario: many waiters on ONE key, each holding the
// lock 2 ms, then releasing and trying again at once. Every "client" is
// a library instance of its own over fresh go-redis clients (or, for
// rueidislock, its own rueidis client), as separate processes would have.
// Per case: acquisitions/s, the nodes' commands per acquisition (INFO
// commandstats), the wait's p50 and p99, and how evenly the waiters were
// served.

const (
	contentionHold   = 2 * time.Millisecond
	contentionWarmup = 300 * time.Millisecond
	// contentionGrace is how long past its measured window a case may
	// take to stop: its goroutines' ctx ends at the window's end, and a
	// goroutine not back by the hard deadline (warm-up + -cduration +
	// contentionGrace from the start) is left behind.
	contentionGrace = 10 * time.Second
	// contentionErrPause is a goroutine's pause after an error, so that
	// a library failing at once does not spin.
	contentionErrPause = time.Millisecond
)

// Names of the contention implementations (-cimpls), and the family
// cases' rows.
const (
	cOurs      = "ours"
	cRedsync   = "redsync"
	cOurs1     = "ours1"
	cRedislock = "redislock"
	cRueidis   = "rueidis"
	cFamily    = "family"

	implCRead = "redlock RLock ×3 + Lock ×1 (family)"
	implCPath = "redlock LockPath tree, tree/a, tree/a/b, tree/c (family)"
	implCSem  = "redlock Acquire limit 3 (family)"
)

var (
	allContentionImpls   = []string{cOurs, cRedsync, cOurs1, cRedislock, cRueidis, cFamily}
	allContentionWaiters = []int{1, 64, 256}
	// familyWaiters are the waiter counts of the family cases.
	familyWaiters = []int{1, 64}
)

// contentionOpts are the scenario's flags.
type contentionOpts struct {
	duration time.Duration // -cduration: the measured window of a case
	waiters  []int         // -waiters
	impls    []string      // -cimpls
}

// contentionSettings is the scenario's part of the JSON settings.
type contentionSettings struct {
	Duration string   `json:"duration"`
	Warmup   string   `json:"warmup"`
	Hold     string   `json:"hold"`
	Waiters  []int    `json:"waiters"`
	Impls    []string `json:"impls"`
}

func (o contentionOpts) settings() *contentionSettings {
	return &contentionSettings{Duration: o.duration.String(), Warmup: contentionWarmup.String(),
		Hold: contentionHold.String(), Waiters: o.waiters, Impls: o.impls}
}

// parseWaiters reads -waiters: comma-separated counts among 1, 64, 256.
func parseWaiters(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || !slices.Contains(allContentionWaiters, n) {
			return nil, fmt.Errorf("-waiters: %q is not one of 1,64,256", f)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// parseContentionImpls reads -cimpls.
func parseContentionImpls(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !slices.Contains(allContentionImpls, f) {
			return nil, fmt.Errorf("-cimpls: unknown %q; known: %s", f, strings.Join(allContentionImpls, ","))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// layout is how a waiter count is spread: clients × goroutines each.
func layout(waiters int) (clients, per int) {
	switch waiters {
	case 64:
		return 8, 8
	case 256:
		return 16, 16
	default:
		return 1, 1
	}
}

// contended is a contention row's own part (row.Contention).
type contended struct {
	Waiters    int     `json:"waiters"`
	Clients    int     `json:"clients"`
	CmdsPerAcq float64 `json:"cmds_per_acq,omitempty"`
	// Least, Median and Most are the acquisitions of single waiters
	// (goroutines) in the measured window.
	Least  int `json:"least"`
	Median int `json:"median"`
	Most   int `json:"most"`
	// VsOne is acq/s over the same implementation's 1-waiter rate.
	VsOne float64 `json:"vs_one_waiter,omitempty"`
	// OpenWaitMaxUs is the longest wait still open when the window
	// ended (not among the wait percentiles, which are of completed waits).
	OpenWaitMaxUs float64 `json:"open_wait_max_us,omitempty"`
	// AttemptsPerAcq and SplitPerAcq (ours only, from an observer): lock
	// rounds per acquisition, and split votes per acquisition: lost
	// rounds in which some node granted the key.
	AttemptsPerAcq float64 `json:"attempts_per_acq,omitempty"`
	SplitPerAcq    float64 `json:"split_votes_per_acq,omitempty"`
	// Commands are the nodes' calls per command over the window, summed
	// over the nodes (info and config, the bench's own, left out).
	Commands map[string]int64 `json:"commands,omitempty"`
}

// contender is one client of a case: a library instance over its own
// connections.
type contender struct {
	// acquire blocks until the case's lock is held or ctx ends, and
	// returns its release; slot picks the role in the family cases (the
	// goroutine's index, or with one waiter the attempt's).
	acquire func(ctx context.Context, slot int) (func(context.Context) error, error)
	close   func()
}

// contenderKind builds the contenders of one implementation.
type contenderKind struct {
	short, name string
	nodes       int
	waiters     []int // the counts it runs at, among -waiters
	new         func(cs []redis.UniversalClient, key string) (contender, error)
}

// fromMaker is a contender over an impl's blocking lock (ours, redsync,
// rueidislock): the same construction as the other scenarios.
func fromMaker(short string, m maker) contenderKind {
	return contenderKind{short: short, name: m.name, nodes: m.nodes, waiters: allContentionWaiters,
		new: func(cs []redis.UniversalClient, key string) (contender, error) {
			im, err := m.new(m.name, cs)
			if err != nil {
				return contender{}, err
			}
			if im.lock == nil {
				return contender{}, fmt.Errorf("%s has no blocking lock", m.name)
			}
			return contender{
				acquire: func(ctx context.Context, _ int) (func(context.Context) error, error) { return im.lock(ctx, key) },
				close: func() {
					if im.closer != nil {
						im.closer()
					}
				},
			}, nil
		}}
}

// redislockWaiting is bsm/redislock on the first node, waiting by
// retrying every 10 ms (LinearBackoff) with a limit it never reaches: it
// waits until the case's ctx deadline.
func redislockWaiting() contenderKind {
	return contenderKind{short: cRedislock, name: implRedislock, nodes: 1, waiters: allContentionWaiters,
		new: func(cs []redis.UniversalClient, key string) (contender, error) {
			c := redislock.New(cs[0])
			opt := &redislock.Options{RetryStrategy: redislock.LimitRetry(redislock.LinearBackoff(10*time.Millisecond), math.MaxInt32)}
			return contender{acquire: func(ctx context.Context, _ int) (func(context.Context) error, error) {
				l, err := c.Obtain(ctx, key, ttl, opt)
				if err != nil {
					return nil, err
				}
				return l.Release, nil
			}}, nil
		}}
}

// familyKind is a lock of our family under contention: ours on 5 nodes,
// defaults, lock takes the case's lock for the goroutine of slot.
func familyKind(name string, lock func(ctx context.Context, c *redlock.Client, key string, slot int) (*redlock.Lock, error)) contenderKind {
	return contenderKind{short: cFamily, name: name, nodes: 5, waiters: familyWaiters,
		new: func(cs []redis.UniversalClient, key string) (contender, error) {
			c, err := redlock.New(cs)
			if err != nil {
				return contender{}, err
			}
			return contender{
				acquire: func(ctx context.Context, slot int) (func(context.Context) error, error) {
					l, err := lock(ctx, c, key, slot)
					if err != nil {
						return nil, err
					}
					return l.Unlock, nil
				},
				close: func() { _ = c.Close() },
			}, nil
		}}
}

// roundCounter counts our lock rounds, and the split votes among them:
// lost rounds in which some node granted the key.
type roundCounter struct {
	lock, split atomic.Int64
}

// rounds observes every Client of our rows (one case runs at a time).
var rounds roundCounter

// observe counts the lock rounds among the library's events.
func (r *roundCounter) observe(e redlock.Event) {
	if e.Kind != "round" || e.Op != "lock" {
		return
	}
	r.lock.Add(1)
	if e.Err == nil {
		return
	}
	for _, n := range e.Nodes {
		if n.Status == "ok" {
			r.split.Add(1)
			return
		}
	}
}

func (r *roundCounter) reset() { r.lock.Store(0); r.split.Store(0) }

func (r *roundCounter) read() (lock, split int64) { return r.lock.Load(), r.split.Load() }

// contentionKinds are the implementations of the scenario, in the order
// they run.
func contentionKinds() []contenderKind {
	return []contenderKind{
		fromMaker(cOurs, ours(implOurs, redlock.WithObserver(rounds.observe))),
		fromMaker(cRedsync, redsyncImpl(implRedsync)),
		fromMaker(cOurs1, oursOne(implOurs1, redlock.WithObserver(rounds.observe))),
		redislockWaiting(),
		fromMaker(cRueidis, rueidislockImpl(implRueidis, false)),
		// Read locks with waiting writers: 3 of 4 goroutines read.
		familyKind(implCRead, func(ctx context.Context, c *redlock.Client, key string, slot int) (*redlock.Lock, error) {
			if slot%4 == 3 {
				return c.Lock(ctx, key, ttl)
			}
			return c.RLock(ctx, key, ttl)
		}),
		// Folder locks on related paths: "tree" conflicts with the
		// others, "tree/a" with "tree/a/b", "tree/c" only with "tree".
		familyKind(implCPath, func(ctx context.Context, c *redlock.Client, key string, slot int) (*redlock.Lock, error) {
			return c.LockPath(ctx, key+[]string{"/a", "/a/b", "", "/c"}[slot%4], ttl)
		}),
		familyKind(implCSem, func(ctx context.Context, c *redlock.Client, key string, _ int) (*redlock.Lock, error) {
			return c.Acquire(ctx, key, 3, ttl)
		}),
	}
}

// contention runs the scenario: every selected implementation at every
// selected waiter count (the family at 1 and 64), one case at a time.
func (e *env) contention() {
	o := e.cont
	meas := make([]*redis.Client, len(e.addrs))
	for i, a := range e.addrs {
		// The measurement client: one connection, opened before any
		// CONFIG RESETSTAT, that sends only CONFIG and INFO.
		meas[i] = redis.NewClient(&redis.Options{Addr: a, PoolSize: 1})
		defer meas[i].Close()
		if err := meas[i].Ping(e.ctx).Err(); err != nil {
			fmt.Fprintln(os.Stderr, "contention: measurement client:", err)
		}
	}
	seq := 0
	for _, k := range contentionKinds() {
		if !slices.Contains(o.impls, k.short) {
			continue
		}
		first := len(e.rows)
		for _, w := range o.waiters {
			if !slices.Contains(k.waiters, w) || e.ctx.Err() != nil {
				continue
			}
			seq++
			key := fmt.Sprintf("bench:contention:%d:%s:%d", seq, k.short, w)
			e.add(e.contentionCase(k, w, key, meas[:k.nodes]))
		}
		// Each row's rate against the same implementation's 1 waiter.
		var one float64
		for i := first; i < len(e.rows); i++ {
			if c := e.rows[i].Contention; c != nil && c.Waiters == 1 {
				one = e.rows[i].OpsPerSec
			}
		}
		for i := first; i < len(e.rows); i++ {
			if c := e.rows[i].Contention; c != nil && one > 0 {
				c.VsOne = e.rows[i].OpsPerSec / one
			}
		}
	}
}

// waiterStats is what one goroutine of a case recorded.
type waiterStats struct {
	mu       sync.Mutex
	acq      int
	waits    []time.Duration
	errs     int
	firstErr string
	open     time.Duration // the wait still open at the window's end
}

func (w *waiterStats) fail(err error) {
	w.mu.Lock()
	w.errs++
	if w.firstErr == "" {
		w.firstErr = err.Error()
	}
	w.mu.Unlock()
}

// contentionCase runs one case: waiters goroutines over layout(waiters)
// contenders of k on key, a warm-up, then the measured window.
func (e *env) contentionCase(k contenderKind, waiters int, key string, meas []*redis.Client) row {
	nClients, per := layout(waiters)
	r := row{Scenario: scenarioTitle[scContention], Impl: k.name,
		Contention: &contended{Waiters: waiters, Clients: nClients}}
	var conns [][]redis.UniversalClient
	var cons []contender
	defer func() {
		for _, c := range cons {
			if c.close != nil {
				c.close()
			}
		}
		for _, cs := range conns {
			closeAll(cs)
		}
		time.Sleep(settle)
	}()
	for range nClients {
		cs := clients(e.addrs, k.nodes)
		conns = append(conns, cs)
		c, err := k.new(cs, key)
		if err != nil {
			r.Errors++
			r.Note = err.Error()
			return r
		}
		cons = append(cons, c)
	}

	start := time.Now()
	winStart := start.Add(contentionWarmup)
	winEnd := winStart.Add(e.cont.duration)
	hard := winEnd.Add(contentionGrace)
	ctx, cancel := context.WithDeadline(e.ctx, hard)
	defer cancel()
	// Releases are not cut short by the end of the window.
	relCtx, relCancel := context.WithDeadline(context.WithoutCancel(e.ctx), hard.Add(5*time.Second))
	defer relCancel()
	var stop atomic.Bool
	var running atomic.Int64

	ws := make([]*waiterStats, waiters)
	var wg sync.WaitGroup
	for g := range waiters {
		w := &waiterStats{}
		ws[g] = w
		c := cons[g/per]
		wg.Add(1)
		running.Add(1)
		go func() {
			defer wg.Done()
			defer running.Add(-1)
			for i := 0; !stop.Load(); i++ {
				slot := g
				if waiters == 1 {
					slot = i
				}
				t0 := time.Now()
				var release func(context.Context) error
				for release == nil {
					rel, err := c.acquire(ctx, slot)
					if err == nil {
						release = rel
						break
					}
					if ctx.Err() != nil {
						if t0.Before(winEnd) {
							w.mu.Lock()
							w.open = winEnd.Sub(t0)
							w.mu.Unlock()
						}
						return
					}
					// A give-up (redsync's 32 tries) or an error: count
					// it and wait on, the wait still running from t0.
					w.fail(err)
					select {
					case <-ctx.Done():
					case <-time.After(contentionErrPause):
					}
				}
				now := time.Now()
				if !now.Before(winStart) && now.Before(winEnd) {
					w.mu.Lock()
					w.acq++
					w.waits = append(w.waits, now.Sub(t0))
					w.mu.Unlock()
				}
				time.Sleep(contentionHold)
				if err := release(relCtx); err != nil {
					w.fail(err)
				}
			}
		}()
	}

	// The window: CONFIG RESETSTAT at its start, INFO commandstats at
	// its end, on the nodes this implementation uses.
	var notes []string
	if sleepUntil(e.ctx, winStart) {
		for _, m := range meas {
			if err := m.ConfigResetStat(e.ctx).Err(); err != nil {
				notes = append(notes, "CONFIG RESETSTAT: "+err.Error())
			}
		}
	}
	rounds.reset()
	sleepUntil(e.ctx, winEnd)
	lockRounds, splitRounds := rounds.read()
	elapsed := time.Since(winStart)
	cmds := map[string]int64{}
	var calls int64
	for _, m := range meas {
		n, err := commandCalls(e.ctx, m, cmds)
		if err != nil {
			notes = append(notes, "INFO commandstats: "+err.Error())
		}
		calls += n
	}
	stop.Store(true)
	cancel()

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(hard)):
		notes = append(notes, fmt.Sprintf("%d of %d goroutines not back by the hard deadline (window end + %s): left behind",
			running.Load(), waiters, contentionGrace))
	}

	var all []time.Duration
	per1 := make([]int, 0, waiters)
	var open time.Duration
	var firstErr string
	for _, w := range ws {
		w.mu.Lock()
		all = append(all, w.waits...)
		per1 = append(per1, w.acq)
		open = max(open, w.open)
		r.Errors += w.errs
		if w.firstErr != "" && firstErr == "" {
			firstErr = w.firstErr
		}
		w.mu.Unlock()
	}
	if firstErr != "" {
		notes = append(notes, "first error: "+firstErr)
	}
	r.latencies(all)
	if elapsed > 0 {
		r.OpsPerSec = float64(len(all)) / elapsed.Seconds()
	}
	slices.Sort(per1)
	c := r.Contention
	c.Least, c.Median, c.Most = per1[0], per1[len(per1)/2], per1[len(per1)-1]
	c.OpenWaitMaxUs = float64(open) / float64(time.Microsecond)
	c.Commands = cmds
	if len(all) > 0 {
		c.CmdsPerAcq = float64(calls) / float64(len(all))
		if lockRounds > 0 {
			c.AttemptsPerAcq = float64(lockRounds) / float64(len(all))
			c.SplitPerAcq = float64(splitRounds) / float64(len(all))
		}
	}
	r.Note = strings.Join(notes, "; ")
	return r
}

// sleepUntil sleeps until t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// commandCalls sums the calls of INFO commandstats on c, leaving out the
// commands of the measurement itself (info, config), and adds each
// command's to into (subcommands under their command: "client|setinfo"
// counts as "client").
func commandCalls(ctx context.Context, c *redis.Client, into map[string]int64) (int64, error) {
	s, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, line := range strings.Split(s, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, stats, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		base, _, _ := strings.Cut(name, "|")
		if base == "info" || base == "config" {
			continue
		}
		for _, f := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return sum, errors.New("unreadable: " + line)
				}
				sum += n
				into[base] += n
			}
		}
	}
	return sum, nil
}

// findContention is the contention row of impl at waiters, whatever it
// measured (a case that got no acquisition is a result, not a gap).
func findContention(rows []row, impl string, waiters int) *row {
	for i := range rows {
		r := &rows[i]
		if r.Contention != nil && r.Impl == impl && r.Contention.Waiters == waiters {
			return r
		}
	}
	return nil
}

// contentionTargets are the scenario's goals, judged here (Result set):
// a ratio of 0 is then a FAIL, not a missing measurement. None when the
// scenario did not run.
func contentionTargets(rows []row) []target {
	if !slices.ContainsFunc(rows, func(r row) bool { return r.Contention != nil }) {
		return nil
	}
	var out []target
	// judge appends a goal; ok is false when a row it needs is missing
	// (n/a), bad when the rows are there but the measure has no value
	// (no acquisitions): FAIL.
	judge := func(name, basis string, v float64, ok, bad bool, limit float64, atMost, strict bool) {
		t := target{Name: name, Basis: basis, Measured: v, Limit: limit, AtMost: atMost, Unit: "×", strict: strict, Over: overEvery}
		switch {
		case !ok:
			t.Result, t.Measured = "n/a", 0
		case bad:
			t.Result = "FAIL"
		case atMost && v <= limit, !atMost && !strict && v >= limit, !atMost && strict && v > limit:
			t.Result = "pass"
		default:
			t.Result = "FAIL"
		}
		out = append(out, t)
	}
	rate := func(impl string, w int) (float64, bool) {
		if r := findContention(rows, impl, w); r != nil {
			return r.OpsPerSec, true
		}
		return 0, false
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	o1, ok1 := rate(implOurs, 1)
	o256, ok256 := rate(implOurs, 256)
	judge("contention: 256 waiters vs 1, acq/s", "redlock at 256 / redlock at 1",
		ratio(o256, o1), ok1 && ok256, o1 == 0, 0.8, false, false)
	rs256, okrs := rate(implRedsync, 256)
	judge("contention: 256 waiters vs redsync, acq/s", "redlock / redsync, 256 waiters",
		ratio(o256, rs256), ok256 && okrs, rs256 == 0, 1.5, false, false)
	if r1, r256 := findContention(rows, implOurs, 1), findContention(rows, implOurs, 256); r1 != nil && r256 != nil {
		c1, c256 := r1.Contention.CmdsPerAcq, r256.Contention.CmdsPerAcq
		judge("contention: cmds/acq at 256 vs 1", "redlock at 256 / redlock at 1, node commands per acquisition",
			ratio(c256, c1), true, c1 == 0 || c256 == 0, 2, true, false)
		c := r256.Contention
		judge("contention: least-served waiter at 256 vs median", "redlock at 256, least / median acquisitions of a goroutine",
			ratio(float64(c.Least), float64(c.Median)), true, c.Median == 0, 0.5, false, false)
		// The p99 wait against a turn of every waiter at the rate reached.
		judge("contention: p99 wait at 256 vs 256 / acq/s", "redlock at 256, p99 wait / (256 / acq/s)",
			ratio(r256.P99us/1e6, 256/max(o256, 1e-9)), true, o256 == 0 || r256.N == 0, 2, true, false)
	} else {
		judge("contention: cmds/acq at 256 vs 1", "redlock at 256 / redlock at 1, node commands per acquisition", 0, false, false, 2, true, false)
		judge("contention: least-served waiter at 256 vs median", "redlock at 256, least / median acquisitions of a goroutine", 0, false, false, 0.5, false, false)
		judge("contention: p99 wait at 256 vs 256 / acq/s", "redlock at 256, p99 wait / (256 / acq/s)", 0, false, false, 2, true, false)
	}
	one1, okone1 := rate(implOurs1, 1)
	one256, okone256 := rate(implOurs1, 256)
	judge("contention: 1 node, 256 waiters vs 1, acq/s", "redlock (1 node) at 256 / at 1",
		ratio(one256, one1), okone1 && okone256, one1 == 0, 0.8, false, false)
	rl256, okrl := rate(implRedislock, 256)
	judge("contention: 1 node, 256 waiters vs redislock", "redlock (1 node) / redislock (1 node), 256 waiters",
		ratio(one256, rl256), okone256 && okrl, rl256 == 0, 1, false, true)
	ru256, okru := rate(implRueidis, 256)
	judge("contention: 1 node, 256 waiters vs rueidislock", "redlock (1 node) / rueidislock (1 node), 256 waiters",
		ratio(one256, ru256), okone256 && okru, ru256 == 0, 1, false, true)
	for _, f := range []string{implCRead, implCPath, implCSem} {
		f1, okf1 := rate(f, 1)
		f64, okf64 := rate(f, 64)
		judge("contention: "+f+", 64 waiters vs 1", "acq/s at 64 / at 1",
			ratio(f64, f1), okf1 && okf64, f1 == 0, 0.5, false, false)
	}
	// For reference.
	rs1, okrs1 := rate(implRedsync, 1)
	t := target{Name: "contention: redsync, 256 waiters vs 1, acq/s", Basis: "redsync at 256 / at 1",
		Measured: ratio(rs256, rs1), Unit: "×", Result: "info"}
	if !okrs || !okrs1 || rs1 == 0 {
		t.Result, t.Measured = "n/a", 0
	}
	out = append(out, t)
	return out
}

// contentionMarkdown prints the contention rows as their own table.
func contentionMarkdown(w io.Writer, rows []row) {
	var cr []row
	for _, r := range rows {
		if r.Contention != nil {
			cr = append(cr, r)
		}
	}
	if len(cr) == 0 {
		return
	}
	fmt.Fprintf(w, "Contention: one key, %s holds, waiters = clients × goroutines.\n\n", contentionHold)
	fmt.Fprintln(w, "| impl | waiters | acq/s | vs 1 waiter | cmds/acq | attempts/acq | split votes/acq | p50 wait | p99 wait | least/median/most | errors |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range cr {
		c := r.Contention
		vs := "–"
		if c.VsOne != 0 && c.Waiters != 1 {
			vs = fmt.Sprintf("%.2f×", c.VsOne)
		}
		cmds := "–"
		if c.CmdsPerAcq != 0 {
			cmds = fmt.Sprintf("%.1f", c.CmdsPerAcq)
		}
		att, split := "–", "–"
		if c.AttemptsPerAcq != 0 {
			att, split = fmt.Sprintf("%.2f", c.AttemptsPerAcq), fmt.Sprintf("%.3f", c.SplitPerAcq)
		}
		fmt.Fprintf(w, "| %s | %d (%d×%d) | %.0f | %s | %s | %s | %s | %s | %s | %d/%d/%d | %d |\n", r.Impl, c.Waiters, c.Clients, c.Waiters/max(c.Clients, 1),
			r.OpsPerSec, vs, cmds, att, split, fmtDur(r.P50us), fmtDur(r.P99us), c.Least, c.Median, c.Most, r.Errors)
	}
	fmt.Fprintln(w)
}
