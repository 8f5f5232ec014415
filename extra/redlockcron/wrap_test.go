package redlockcron_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockcron"
	"github.com/seed543a70bd/redlock/redlocktest"
)

// Three cron instances, each with its own Client over the same three
// nodes, run an every-second job wrapped by SkipIfLocked for 10s. Each
// tick (the Unix second in which its run started: cron never fires early)
// runs at most once, strictly; after the first tick, at most 2 ticks (of
// about 8) may go unrun, for a machine that stalls past the per-node
// timeout on every instance at once.
func TestEachTickRunsOnceAcrossCrons(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	k := key(t)
	var mu sync.Mutex
	runs := make(map[int64][]int)
	crons := make([]*cron.Cron, 3)
	logs := &logRec{}
	for i := range crons {
		c := newClient(t, nodes, redlock.WithNodeTimeout(200*time.Millisecond))
		crons[i] = cron.New(cron.WithSeconds())
		job := cron.NewChain(redlockcron.SkipIfLocked(c, k, time.Second, redlockcron.WithLogger(logs))).
			Then(cron.FuncJob(func() {
				sec := time.Now().Unix()
				mu.Lock()
				runs[sec] = append(runs[sec], i)
				mu.Unlock()
			}))
		if _, err := crons[i].AddJob("* * * * * *", job); err != nil {
			t.Fatalf("AddJob: want no error, got %v", err)
		}
	}
	for _, c := range crons {
		c.Start()
	}
	started := time.Now()
	time.Sleep(10 * time.Second) // the scenario's length, not a wait for an event
	for _, c := range crons {
		<-c.Stop().Done()
	}
	end := time.Now()

	mu.Lock()
	defer mu.Unlock()
	var line strings.Builder
	missed := 0
	for sec := started.Unix() + 2; sec <= end.Unix()-1; sec++ {
		fmt.Fprintf(&line, "%d ", len(runs[sec]))
		if len(runs[sec]) > 1 {
			t.Errorf("tick %d: want at most one run, got %d (instances %v)", sec, len(runs[sec]), runs[sec])
		}
		if len(runs[sec]) == 0 {
			missed++
		}
	}
	if missed > 2 {
		t.Errorf("ticks missed: want at most 2, got %d (runs per tick: %s)", missed, line.String())
	}
	t.Logf("runs per tick: %s; missed: %d; failed acquisitions (not contention): %v", line.String(), missed, logs.errors())
}

// A job that runs 1.5s with a 400ms TTL is not started again while it
// runs, by this wrapper or another instance's.
func TestJobOutlivingTTLNotStartedTwice(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	k := key(t)
	var inFlight, maxInFlight, runs atomic.Int64
	logs := &logRec{}
	job := cron.FuncJob(func() {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		runs.Add(1)
		time.Sleep(1500 * time.Millisecond) // the job's work
	})
	wrapped := make([]cron.Job, 3)
	for i := range wrapped {
		wrapped[i] = redlockcron.SkipIfLocked(newClient(t, nodes), k, 400*time.Millisecond, redlockcron.WithLogger(logs))(job)
	}
	var wg sync.WaitGroup
	for round := range 6 { // a tick every 300ms on every instance
		for _, w := range wrapped {
			wg.Go(w.Run)
		}
		if round < 5 {
			time.Sleep(300 * time.Millisecond)
		}
	}
	wg.Wait()
	if got := maxInFlight.Load(); got != 1 {
		t.Errorf("runs at once: want 1, got %d", got)
	}
	if logs.logged(redlock.ErrLockLost) {
		t.Errorf("a lock was lost: %v", logs.errors())
	}
	t.Logf("runs: %d of 18 attempts", runs.Load())
}

// A panicking job under cron.Recover: the panic is recovered and logged by
// cron, and the lock is released.
func TestPanickingJobReleasesLock(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	k := key(t)
	logs := &logRec{}
	job := cron.NewChain(
		cron.Recover(logs),
		redlockcron.SkipIfLocked(newClient(t, nodes), k, time.Second, redlockcron.WithMinHold(0), redlockcron.WithLogger(logs)),
	).Then(cron.FuncJob(func() { panic("job failed") }))
	job.Run()
	if errs := logs.errors(); len(errs) != 1 || errs[0].Error() != "job failed" {
		t.Errorf("logged: want the recovered panic, got %v", errs)
	}
	if !free(t, newClient(t, nodes), k) {
		t.Errorf("key after a panicking run: want free, got held")
	}
}

// Without cron.Recover the panic reaches Run's caller unchanged, and the
// lock (of SkipIfLocked and of Func) is still released.
func TestPanicPassesThrough(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	c := newClient(t, nodes)
	other := newClient(t, nodes)
	for name, mk := range map[string]func(k string) cron.Job{
		"SkipIfLocked": func(k string) cron.Job {
			return redlockcron.SkipIfLocked(c, k, time.Second, redlockcron.WithMinHold(0))(cron.FuncJob(func() { panic("job failed") }))
		},
		"Func": func(k string) cron.Job {
			return redlockcron.Func(c, k, time.Second, func(context.Context) error { panic("job failed") }, redlockcron.WithMinHold(0))
		},
	} {
		k := key(t)
		got := func() (v any) {
			defer func() { v = recover() }()
			mk(k).Run()
			return nil
		}()
		if got != "job failed" {
			t.Errorf("%s: want the job's panic, got %v", name, got)
		}
		if !free(t, other, k) {
			t.Errorf("%s: key after a panicking run: want free, got held", name)
		}
	}
}

// Many runs of one wrapped job at once (cron starts each tick's run on a
// goroutine of its own, whether the previous one ended or not): one runs.
func TestConcurrentRunsOneWinner(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	k := key(t)
	logs := &logRec{}
	var ran atomic.Int64
	job := redlockcron.SkipIfLocked(newClient(t, nodes), k, 2*time.Second, redlockcron.WithLogger(logs))(cron.FuncJob(func() {
		ran.Add(1)
		time.Sleep(200 * time.Millisecond) // hold while the others try
	}))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			<-start
			job.Run()
		})
	}
	close(start)
	wg.Wait()
	if got := ran.Load(); got != 1 {
		t.Errorf("runs: want 1, got %d", got)
	}
	if errs := logs.errors(); len(errs) != 0 {
		t.Errorf("errors logged: want none (contention is Info), got %v", errs)
	}
}

// DelayIfLocked runs the job once the holder releases, within maxWait;
// past maxWait it gives up, logs an error matching DeadlineExceeded, and
// does not run the job.
func TestDelayIfLocked(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	c := newClient(t, nodes)
	other := newClient(t, nodes)
	ctx := context.Background()

	k := key(t)
	held, err := other.TryLock(ctx, k, 10*time.Second)
	if err != nil {
		t.Fatalf("TryLock: want no error, got %v", err)
	}
	var ran atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		redlockcron.DelayIfLocked(c, k, time.Second, 10*time.Second)(cron.FuncJob(func() { ran.Store(true) })).Run()
	}()
	time.Sleep(200 * time.Millisecond) // let the waiter find the key held
	if ran.Load() {
		t.Fatalf("job ran while another owner held its key")
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: want no error, got %v", err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the delayed job did not run within 10s of the release")
	}
	if !ran.Load() {
		t.Errorf("delayed job: want run after the release, got not run")
	}

	k = key(t)
	held, err = other.TryLock(ctx, k, 10*time.Second)
	if err != nil {
		t.Fatalf("TryLock: want no error, got %v", err)
	}
	defer held.Unlock(ctx)
	logs := &logRec{}
	ran.Store(false)
	redlockcron.DelayIfLocked(c, k, time.Second, 300*time.Millisecond, redlockcron.WithLogger(logs))(cron.FuncJob(func() { ran.Store(true) })).Run()
	if ran.Load() {
		t.Errorf("job ran while another owner held its key")
	}
	if !logs.logged(context.DeadlineExceeded) || !logs.logged(redlock.ErrContended) {
		t.Errorf("logged: want an error matching DeadlineExceeded and ErrContended, got %v", logs.errors())
	}
}

// When the lock is lost while Func's fn runs (its key deleted on every
// node), fn's ctx is cancelled with a cause matching ErrLockLost and the
// loss is logged; a SkipIfLocked job cannot be stopped, and the loss is
// logged when it returns.
func TestLostLockCancelsFuncCtx(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	c := newClient(t, nodes)

	k := key(t)
	logs := &logRec{}
	var cause error
	redlockcron.Func(c, k, 300*time.Millisecond, func(ctx context.Context) error {
		delEverywhere(t, nodes, k)
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return errors.New("ctx not cancelled within 10s")
		}
	}, redlockcron.WithLogger(logs)).Run()
	if !errors.Is(cause, redlock.ErrLockLost) {
		t.Errorf("fn ctx cause: want ErrLockLost, got %v", cause)
	}
	if !logs.logged(redlock.ErrLockLost) || !logs.logged(context.Canceled) {
		t.Errorf("logged: want the loss and fn's error, got %v", logs.errors())
	}

	k = key(t)
	logs = &logRec{}
	redlockcron.SkipIfLocked(c, k, 300*time.Millisecond, redlockcron.WithLogger(logs))(cron.FuncJob(func() {
		delEverywhere(t, nodes, k)
		time.Sleep(time.Second) // past the next extension, which finds the key gone
	})).Run()
	if !logs.logged(redlock.ErrLockLost) {
		t.Errorf("logged: want the loss, got %v", logs.errors())
	}
}

// Bad arguments never panic: Validate returns an error matching
// ErrInvalid, and the wrapped job is not run and logs it at every run.
func TestBadInputIsAnError(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	c := newClient(t, nodes)
	var nilClient *redlock.Client
	cases := map[string]struct {
		locker *redlock.Client
		key    string
		ttl    time.Duration
		opts   []redlockcron.Option
	}{
		"nil locker":        {nil, "k", time.Second, nil},
		"nil *Client":       {nilClient, "k", time.Second, nil},
		"empty key":         {c, "", time.Second, nil},
		"ttl below MinTTL":  {c, "k", redlockcron.MinTTL - 1, nil},
		"negative min hold": {c, "k", time.Second, []redlockcron.Option{redlockcron.WithMinHold(-1)}},
		"nil option":        {c, "k", time.Second, []redlockcron.Option{nil}},
		"nil logger":        {c, "k", time.Second, []redlockcron.Option{redlockcron.WithLogger(nil)}},
	}
	for name, tc := range cases {
		if err := redlockcron.Validate(tc.locker, tc.key, tc.ttl, tc.opts...); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("%s: Validate: want ErrInvalid, got %v", name, err)
		}
		logs := &logRec{}
		opts := append([]redlockcron.Option{redlockcron.WithLogger(logs)}, tc.opts...)
		ran := false
		job := cron.FuncJob(func() { ran = true })
		redlockcron.SkipIfLocked(tc.locker, tc.key, tc.ttl, opts...)(job).Run()
		redlockcron.DelayIfLocked(tc.locker, tc.key, tc.ttl, time.Second, opts...)(job).Run()
		redlockcron.Func(tc.locker, tc.key, tc.ttl, func(context.Context) error { ran = true; return nil }, opts...).Run()
		if ran {
			t.Errorf("%s: want the job not run, got run", name)
		}
		if name != "nil logger" && len(logs.errors()) != 3 {
			t.Errorf("%s: want 3 errors logged, got %v", name, logs.errors())
		}
	}
	logs := &logRec{}
	redlockcron.DelayIfLocked(c, key(t), time.Second, 0, redlockcron.WithLogger(logs))(cron.FuncJob(func() { t.Errorf("max wait 0: job run") })).Run()
	redlockcron.Func(c, key(t), time.Second, nil, redlockcron.WithLogger(logs)).Run()
	redlockcron.SkipIfLocked(c, key(t), time.Second, redlockcron.WithLogger(logs), redlockcron.WithLockOptions(redlock.WithNodeTimeout(-1)))(cron.FuncJob(func() { t.Errorf("a bad option per call: job run") })).Run()
	if errs := logs.errors(); len(errs) != 3 || !errors.Is(errs[0], redlock.ErrInvalid) || !errors.Is(errs[1], redlock.ErrInvalid) || !errors.Is(errs[2], redlock.ErrInvalid) {
		t.Errorf("max wait 0, nil fn, bad per-call option: want 3 errors matching ErrInvalid, got %v", errs)
	}
}

// A run shorter than the minimum hold keeps its key until the minimum
// hold ends; with no minimum hold the key is free when the job returns.
func TestMinHoldKeepsShortRunsKey(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	c := newClient(t, nodes)
	other := newClient(t, nodes)
	for _, minHold := range []time.Duration{0, time.Second} {
		k := key(t)
		var won time.Time
		redlockcron.SkipIfLocked(c, k, 2*time.Second, redlockcron.WithMinHold(minHold))(cron.FuncJob(func() { won = time.Now() })).Run()
		if won.IsZero() {
			t.Fatalf("min hold %v: job not run", minHold)
		}
		isFree := free(t, other, k)
		if minHold == 0 && !isFree {
			t.Errorf("min hold 0: want the key free after the run, got held")
		}
		if minHold > 0 {
			if isFree && time.Since(won) < minHold {
				t.Errorf("min hold %v: want the key held right after the run, got free", minHold)
			}
			eventually(t, minHold+5*time.Second, "key free after the min hold", func() bool { return free(t, other, k) })
		}
	}
}
