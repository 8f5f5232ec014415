package chaos

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
)

// Expect is what a scenario expects the checker to find.
type Expect string

const (
	// ExpectSafe: no violation, and the scenario's own checks (progress,
	// bounded latency) hold.
	ExpectSafe Expect = "safe"
	// ExpectViolations: the checker finds at least one violation. Such a
	// scenario breaks an assumption of Redlock on purpose, to show that
	// the assumption matters and that the checker can fail.
	ExpectViolations Expect = "violations"
	// ExpectUnavailable: no lock can be had while the fault lasts, and
	// no violation.
	ExpectUnavailable Expect = "unavailable"
)

// Params are the settings every scenario of a run shares.
type Params struct {
	// Duration is the length of a scenario's main phase. Scenarios made
	// of rounds run as many rounds as fit. Default: 3s (short), 20s.
	Duration time.Duration
	// TTL is the lock TTL. Default: 500ms.
	TTL time.Duration
	// Short is a quick pass: fewest rounds.
	Short bool
}

func (p *Params) defaults() {
	if p.Duration <= 0 {
		p.Duration = 20 * time.Second
		if p.Short {
			p.Duration = 3 * time.Second
		}
	}
	if p.TTL <= 0 {
		p.TTL = 500 * time.Millisecond
	}
}

// nodeTimeoutFor is the library's default per-node timeout for ttl.
func nodeTimeoutFor(ttl time.Duration) time.Duration { return redlock.DefaultNodeTimeout(ttl) }

// guard is the delay of a delayed restart and the restart guard: longer
// than any TTL in use.
func (p Params) guard() time.Duration { return p.TTL + p.TTL/2 }

// rounds is how many rounds of length per fit in Duration, at least n.
func (p Params) rounds(per time.Duration, n int) int {
	return max(n, int(p.Duration/per))
}

// Scenario is a named pattern of faults and the expectation that the
// suite asserts about it.
type Scenario struct {
	Name   string
	Expect Expect
	Doc    string // what it does and why it expects what it does

	cluster ClusterOptions
	run     func(ctx context.Context, e *env) error
}

// env is what a running scenario works with.
type env struct {
	p    Params
	rec  *Recorder
	cl   *Cluster
	res  Resource
	open sync.Map // *redlock.Lock -> Section, while held
	ids  atomic.Int32

	mu       sync.Mutex
	failures []string
}

// failf records a failed check of the scenario.
func (e *env) failf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failures = append(e.failures, fmt.Sprintf(format, args...))
}

// note records a phase marker.
func (e *env) note(format string, args ...any) {
	e.rec.Event(-1, EventNote, fmt.Sprintf(format, args...))
}

func (e *env) newClientID() int { return int(e.ids.Add(1)) }

// Result is the outcome of one scenario. Its JSON form is one element of
// the --json array.
type Result struct {
	Scenario     string   `json:"scenario"`
	Expect       Expect   `json:"expect"`
	Acquisitions int      `json:"acquisitions"`
	Violations   int      `json:"violations"`
	P50AcquireUS float64  `json:"p50_acquire_us"` // over every TryLock attempt, won or lost
	P99AcquireUS float64  `json:"p99_acquire_us"`
	Pass         bool     `json:"pass"`
	Attempts     int      `json:"attempts"`
	Faults       int      `json:"faults"`
	Nodes        int      `json:"nodes"`
	Seconds      float64  `json:"seconds"`
	Failures     []string `json:"failures,omitempty"`           // the checks that failed
	Examples     []string `json:"violation_examples,omitempty"` // the first few violations

	History History     `json:"-"`
	Found   []Violation `json:"-"`
}

// runScenario runs sc on fresh nodes from b and checks its history.
// mem selects the in-process resource instead of FencedSet on a
// storage node. live, when not nil, is given the recorder once it runs.
func runScenario(ctx context.Context, sc Scenario, p Params, b Backend, mem bool, live func(*Recorder)) Result {
	start := time.Now()
	res := Result{Scenario: sc.Name, Expect: sc.Expect}
	fail := func(err error) Result {
		res.Failures = append(res.Failures, err.Error())
		res.Seconds = time.Since(start).Seconds()
		return res
	}
	rec := NewRecorder(NewClock())
	opts := sc.cluster
	opts.Backend = b
	cl, err := NewCluster(ctx, rec, opts)
	if err != nil {
		return fail(fmt.Errorf("setup: %w", err))
	}
	defer cl.Close()
	res.Nodes = cl.N()
	e := &env{p: p, rec: rec, cl: cl, res: &MemResource{}}
	if !mem {
		node, err := b.Start(ctx, NodeOptions{})
		if err != nil {
			return fail(fmt.Errorf("setup: storage node: %w", err))
		}
		defer node.Close()
		rc := redis.NewClient(&redis.Options{Addr: node.Addr(), MaxRetries: -1})
		defer rc.Close()
		e.res = NewStoreResource(rc)
	}
	if live != nil {
		live(rec)
	}
	if err := sc.run(ctx, e); err != nil {
		e.failf("run: %v", err)
	}
	h := rec.History()
	found := Check(h)
	res.History, res.Found = h, found
	res.Acquisitions, res.Attempts, res.Violations = len(h.Sections), len(h.Attempts), len(found)
	for _, ev := range h.Events {
		if ev.Kind != EventNote {
			res.Faults++
		}
	}
	lat := make([]time.Duration, len(h.Attempts))
	for i, a := range h.Attempts {
		lat[i] = a.Latency
	}
	res.P50AcquireUS, res.P99AcquireUS = micros(percentile(lat, 0.50)), micros(percentile(lat, 0.99))
	for i, v := range found {
		if i == 5 {
			break
		}
		res.Examples = append(res.Examples, v.String())
	}
	res.Failures = append(res.Failures, e.failures...)
	switch sc.Expect {
	case ExpectViolations:
		if len(found) == 0 {
			res.Failures = append(res.Failures, "expected violations, found none")
		}
	default:
		if len(found) > 0 {
			res.Failures = append(res.Failures, fmt.Sprintf("expected no violations, found %d", len(found)))
		}
	}
	res.Pass = len(res.Failures) == 0
	res.Seconds = time.Since(start).Seconds()
	return res
}

// percentile returns the q-quantile of ds (nearest rank), 0 when empty.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func micros(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)*10) / 10 }

// latencies returns the latencies of the attempts that pass keep.
func latencies(h History, keep func(Attempt) bool) []time.Duration {
	var out []time.Duration
	for _, a := range h.Attempts {
		if keep(a) {
			out = append(out, a.Latency)
		}
	}
	return out
}
