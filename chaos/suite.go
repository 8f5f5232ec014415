package chaos

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Suite runs scenarios one after another, each on fresh nodes, and checks
// each one's history. Run it from code to use another Backend, or through
// Command (the `redlock-lab chaos` CLI).
type Suite struct {
	Params

	// Scenarios are the names to run, in the suite's order. Default: all.
	Scenarios []string
	// Backend starts the nodes. Default: Local{}.
	Backend Backend
	// MemResource protects an in-process resource instead of
	// redlock.FencedSet on a storage node. Default: false.
	MemResource bool
	// Progress receives a line per finished scenario and, with Live, a
	// progress line redrawn in place. Default: nil, silent.
	Progress io.Writer
	// Live redraws a progress line in place (for a terminal) while a
	// scenario runs.
	Live bool
}

// Run runs the selected scenarios and returns one Result each. A
// scenario that fails its expectation is a Result with Pass false, not
// an error; the error is for an unknown scenario name or a cancelled ctx
// (the results so far are returned with it).
//
// Run does not change go-redis's global logger: killed nodes make it log
// refused dials unless the caller silences it (Command does).
func (s *Suite) Run(ctx context.Context) ([]Result, error) {
	scs, err := Select(s.Scenarios)
	if err != nil {
		return nil, err
	}
	p := s.Params
	p.defaults()
	b := s.Backend
	if b == nil {
		b = Local{}
	}
	var out []Result
	for i, sc := range scs {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		label := fmt.Sprintf("[%2d/%d] %-20s", i+1, len(scs), sc.Name)
		var stopLive func()
		live := func(rec *Recorder) {
			if s.Progress != nil && s.Live {
				stopLive = s.live(label, rec)
			}
		}
		r := runScenario(ctx, sc, p, b, s.MemResource, live)
		if stopLive != nil {
			stopLive()
		}
		if s.Progress != nil {
			fmt.Fprintln(s.Progress, resultLine(label, r))
			for _, f := range r.Failures {
				fmt.Fprintf(s.Progress, "        - %s\n", f)
			}
		}
		out = append(out, r)
	}
	return out, ctx.Err()
}

// live redraws label's progress line every 250ms until stopped, then
// clears it.
func (s *Suite) live(label string, rec *Recorder) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(s.Progress, "\r\033[K")
				return
			case <-t.C:
				h := rec.History()
				faults := 0
				for _, ev := range h.Events {
					if ev.Kind != EventNote {
						faults++
					}
				}
				fmt.Fprintf(s.Progress, "\r\033[K%s %5.1fs  held %d  acquisitions %d  attempts %d  violations %d  faults %d",
					label, h.End.Seconds(), rec.Held(), len(h.Sections), len(h.Attempts), len(Check(h)), faults)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// resultLine is the one-line outcome of a scenario.
func resultLine(label string, r Result) string {
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%s %s  expect %-11s acquisitions %-5d violations %-4d p50 %s p99 %s  %.1fs",
		verdict, strings.TrimSpace(label), r.Expect, r.Acquisitions, r.Violations,
		usString(r.P50AcquireUS), usString(r.P99AcquireUS), r.Seconds)
}

// usString formats microseconds for people.
func usString(us float64) string {
	if us >= 1000 {
		return fmt.Sprintf("%.1fms", us/1000)
	}
	return fmt.Sprintf("%.0fµs", us)
}
