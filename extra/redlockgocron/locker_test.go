package redlockgocron_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/extra/redlockgocron"
	"github.com/seed543a70bd/redlock/redlocktest"
)

// tickLog records which scheduler ran each tick, by the Unix second in
// which the run started: a cron timer never fires before its second, and
// Lock is bounded by the node timeout, so a run starts within its tick's
// second unless the machine stalls for most of a second.
type tickLog struct {
	mu   sync.Mutex
	runs map[int64][]int
	last int
}

func newTickLog() *tickLog { return &tickLog{runs: make(map[int64][]int), last: -1} }

func (l *tickLog) add(sched int) {
	sec := time.Now().Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[sec] = append(l.runs[sec], sched)
	l.last = sched
}

func (l *tickLog) lastRunner() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// check fails the test for any tick in [from, to] run more than once, and
// when more than maxMissed ticks of [from, to] outside skip were not run
// at all. It returns the ticks missed and a line of the runs per tick.
func (l *tickLog) check(t *testing.T, from, to int64, skip map[int64]bool, maxMissed int) (int, string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	missed := 0
	for sec := from; sec <= to; sec++ {
		runs := l.runs[sec]
		fmt.Fprintf(&b, "%d", len(runs))
		if skip[sec] {
			b.WriteString("*")
		}
		b.WriteString(" ")
		if len(runs) > 1 {
			t.Errorf("tick %d: want at most one run, got %d (schedulers %v)", sec, len(runs), runs)
		}
		if len(runs) == 0 && !skip[sec] {
			missed++
		}
	}
	if missed > maxMissed {
		t.Errorf("ticks missed outside start-up and the fault: want at most %d, got %d (runs per tick: %s)", maxMissed, missed, b.String())
	}
	return missed, b.String()
}

// replica is one scheduler with its own Client, as one replica of a
// service has.
type replica struct {
	s gocron.Scheduler
	c *redlock.Client
	l *redlockgocron.Locker
}

func newReplica(t *testing.T, c *redlock.Client, ttl time.Duration, opts ...redlockgocron.Option) replica {
	t.Helper()
	l, err := redlockgocron.New(c, ttl, opts...)
	if err != nil {
		t.Fatalf("New: want no error, got %v", err)
	}
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(l))
	if err != nil {
		t.Fatalf("NewScheduler: want no error, got %v", err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	return replica{s: s, c: c, l: l}
}

// Three schedulers, each with its own Client over the same three nodes,
// run an every-second job for 12s; after 6s the scheduler that ran the
// latest tick is shut down and its Client closed. Each tick runs at most
// once, strictly; outside the first tick and the two after the fault,
// at most 2 ticks (of about 8) may go unrun, for a machine that stalls
// past the per-node timeout on every replica at once.
func TestEachTickRunsOnceAcrossSchedulers(t *testing.T) {
	t.Parallel() // waits on ticks for seconds: beside the package's other long waits
	nodes := redlocktest.Start(t, 3)
	k := key(t)
	ticks := newTickLog()
	reps := make([]replica, 3)
	for i := range reps {
		c := newClient(t, nodes, redlock.WithNodeTimeout(200*time.Millisecond))
		reps[i] = newReplica(t, c, time.Second)
		job := reps[i].l.Job(func(ctx context.Context) error {
			ticks.add(i)
			return nil
		})
		if _, err := reps[i].s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(job), gocron.WithName(k)); err != nil {
			t.Fatalf("NewJob: want no error, got %v", err)
		}
	}
	for _, r := range reps {
		r.s.Start()
	}
	started := time.Now()

	time.Sleep(6 * time.Second) // the first phase of the scenario, not a wait for an event
	stopped := ticks.lastRunner()
	if stopped < 0 {
		t.Fatalf("no run in the first 6s")
	}
	if err := reps[stopped].s.Shutdown(); err != nil {
		t.Fatalf("Shutdown: want no error, got %v", err)
	}
	_ = reps[stopped].c.Close()
	fault := time.Now()

	time.Sleep(6 * time.Second)
	for i, r := range reps {
		if i != stopped {
			_ = r.s.Shutdown()
		}
	}
	end := time.Now()

	from, to := started.Unix()+2, end.Unix()-1
	skip := map[int64]bool{fault.Unix() + 1: true, fault.Unix() + 2: true}
	missed, line := ticks.check(t, from, to, skip, 2)
	t.Logf("runs per tick (* = after the fault, may be missed): %s; missed: %d", line, missed)

	after := 0
	ticks.mu.Lock()
	for sec, runs := range ticks.runs {
		if sec > fault.Unix() {
			for _, s := range runs {
				if s == stopped {
					t.Errorf("tick %d: run by the stopped scheduler %d", sec, s)
				}
				after++
			}
		}
	}
	ticks.mu.Unlock()
	if after < 3 {
		t.Errorf("runs after scheduler %d stopped: want at least 3, got %d", stopped, after)
	}
}

// A job that runs 2.5s, with a 600ms TTL, on three schedulers ticking
// every second: no run starts while another runs, the lock is extended
// while the job runs, and the ticks that come during a run are skipped.
func TestJobOutlivingTTLNotStartedTwice(t *testing.T) {
	t.Parallel() // waits on ticks for seconds: beside the package's other long waits
	nodes := redlocktest.Start(t, 3)
	k := key(t)
	var inFlight, maxInFlight, runs, skipped, lost atomic.Int64
	var extensions atomic.Int64
	reps := make([]replica, 3)
	for i := range reps {
		reps[i] = newReplica(t, newClient(t, nodes), 600*time.Millisecond)
		job := reps[i].l.Job(func(ctx context.Context) error {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for {
				m := maxInFlight.Load()
				if n <= m || maxInFlight.CompareAndSwap(m, n) {
					break
				}
			}
			runs.Add(1)
			select {
			case <-time.After(2500 * time.Millisecond):
			case <-ctx.Done():
				if errors.Is(context.Cause(ctx), redlock.ErrLockLost) {
					lost.Add(1)
				}
				return context.Cause(ctx)
			}
			lock, ok := redlockgocron.FromContext(ctx)
			if !ok {
				t.Errorf("FromContext: want the run's lock, got none")
				return nil
			}
			extensions.Store(int64(lock.Extensions()))
			return nil
		})
		_, err := reps[i].s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(job), gocron.WithName(k),
			gocron.WithEventListeners(gocron.AfterLockError(func(uuid.UUID, string, error) { skipped.Add(1) })))
		if err != nil {
			t.Fatalf("NewJob: want no error, got %v", err)
		}
	}
	for _, r := range reps {
		r.s.Start()
	}
	eventually(t, 15*time.Second, "three runs started", func() bool { return runs.Load() >= 3 })
	for _, r := range reps {
		_ = r.s.Shutdown()
	}
	if got := maxInFlight.Load(); got != 1 {
		t.Errorf("runs at once: want 1, got %d", got)
	}
	if got := extensions.Load(); got < 2 {
		t.Errorf("extensions of a 2.5s run with a 600ms TTL: want at least 2, got %d", got)
	}
	if skipped.Load() == 0 {
		t.Errorf("ticks skipped while a run held the lock: want some, got 0")
	}
	if lost.Load() > 0 {
		t.Logf("runs that lost their lock (a stalled machine): %d", lost.Load())
	}
	t.Logf("runs: %d, skipped attempts: %d, extensions of the last run: %d", runs.Load(), skipped.Load(), extensions.Load())
}

// A job that panics under a scheduler that recovers it (an
// AfterJobRunsWithPanic listener) leaves no lock behind.
func TestPanickingJobReleasesLock(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	k := key(t)
	r := newReplica(t, newClient(t, nodes), time.Second, redlockgocron.WithMinHold(0))
	panicked := make(chan any, 1)
	job := r.l.Job(func(ctx context.Context) error { panic("job failed") })
	_, err := r.s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()), gocron.NewTask(job), gocron.WithName(k),
		gocron.WithEventListeners(gocron.AfterJobRunsWithPanic(func(_ uuid.UUID, _ string, v any) { panicked <- v })))
	if err != nil {
		t.Fatalf("NewJob: want no error, got %v", err)
	}
	r.s.Start()
	select {
	case v := <-panicked:
		if v != "job failed" {
			t.Errorf("recovered: want the job's panic, got %v", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the job did not run within 10s")
	}
	other := newClient(t, nodes)
	eventually(t, 5*time.Second, "the key is free after the panic", func() bool { return free(t, other, k) })
}

// A run Lock refuses (another holds the key) is skipped by gocron and
// reported to AfterLockError with an error matching ErrContended.
func TestHeldKeySkipsRun(t *testing.T) {
	nodes := redlocktest.Start(t, 3)
	k := key(t)
	other := newClient(t, nodes)
	held, err := other.TryLock(context.Background(), k, 10*time.Second)
	if err != nil {
		t.Fatalf("TryLock: want no error, got %v", err)
	}
	defer held.Unlock(context.Background())
	r := newReplica(t, newClient(t, nodes), time.Second)
	lockErr := make(chan error, 1)
	var ran atomic.Bool
	job := r.l.Job(func(ctx context.Context) error { ran.Store(true); return nil })
	_, err = r.s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()), gocron.NewTask(job), gocron.WithName(k),
		gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) { lockErr <- err })))
	if err != nil {
		t.Fatalf("NewJob: want no error, got %v", err)
	}
	r.s.Start()
	select {
	case err := <-lockErr:
		if !errors.Is(err, redlock.ErrContended) {
			t.Errorf("lock error: want ErrContended, got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no lock error within 10s")
	}
	_ = r.s.Shutdown()
	if ran.Load() {
		t.Errorf("job ran while another owner held its key")
	}
}
