package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// row is one measured line of the results.
type row struct {
	Scenario    string  `json:"scenario"`
	Impl        string  `json:"impl"`
	N           int     `json:"n,omitempty"` // latency samples, or completed cycles for throughput
	P50us       float64 `json:"p50_us,omitempty"`
	P90us       float64 `json:"p90_us,omitempty"`
	P99us       float64 `json:"p99_us,omitempty"`
	OpsPerSec   float64 `json:"ops_per_sec,omitempty"`
	AllocsPerOp float64 `json:"allocs_per_op,omitempty"`
	BytesPerOp  float64 `json:"bytes_per_op,omitempty"`
	// CPUus is the client process's CPU time (user + system) per cycle,
	// in µs: the nodes are other processes, and on a machine whose cores
	// the client shares with them, the client's CPU is the nodes' wait.
	CPUus float64 `json:"cpu_us,omitempty"`
	// NodeCPUus is the CPU time of the 5 redis-server processes per
	// cycle, in µs (/proc/PID/schedstat): what the requests cost them.
	NodeCPUus float64 `json:"node_cpu_us,omitempty"`
	Errors    int     `json:"errors"`
	NA        bool    `json:"na,omitempty"` // the API does not exist yet
	Note      string  `json:"note,omitempty"`
	// Contention is set on the contention scenario's rows (N is then
	// the acquisitions, OpsPerSec their rate, the percentiles the waits).
	Contention *contended `json:"contention,omitempty"`
}

// latencies fills the percentile fields from samples.
func (r *row) latencies(samples []time.Duration) {
	r.N = len(samples)
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	pct := func(q float64) float64 {
		i := int(q*float64(len(samples)) + 0.5)
		i = min(max(i-1, 0), len(samples)-1)
		return float64(samples[i]) / float64(time.Microsecond)
	}
	r.P50us, r.P90us, r.P99us = pct(0.50), pct(0.90), pct(0.99)
}

// latencyOpts bounds a latency measurement.
type latencyOpts struct {
	warm, iters int
	budget      time.Duration // per implementation: stop measuring after this long, whatever iters says
	allocs      bool          // also report allocs/op and B/op
}

// blocks is how many slices the cases of one scenario are interleaved in,
// so that a drift of the machine's state (another process, CPU frequency)
// spreads over every implementation instead of landing on one.
const blocks = 5

// series accumulates the timed cycles of one implementation.
type series struct {
	im       impl
	keys     []string
	next     int // index of the next key
	samples  []time.Duration
	cycles   int
	mallocs  uint64
	bytes    uint64
	cpu      time.Duration
	nodeCPU  func() time.Duration // the nodes' CPU time so far
	nodes    time.Duration        // the nodes' CPU time over the timed blocks
	errors   int
	firstErr string
}

// warm runs up to n untimed cycles within d.
func (s *series) warm(ctx context.Context, n int, d time.Duration) {
	end := time.Now().Add(d)
	for i := 0; i < n && time.Now().Before(end) && ctx.Err() == nil; i++ {
		_ = s.im.cycle(ctx, s.keys[s.next%len(s.keys)])
		s.next++
	}
}

// run times up to n sequential cycles within d.
func (s *series) run(ctx context.Context, n int, d time.Duration, allocs bool) {
	runtime.GC()
	var before, after runtime.MemStats
	if allocs {
		runtime.ReadMemStats(&before)
	}
	cpu0, nodes0 := processCPU(), s.nodeCPU()
	end := time.Now().Add(d)
	done := 0
	for ; done < n && ctx.Err() == nil; done++ {
		t0 := time.Now()
		if t0.After(end) {
			break
		}
		err := s.im.cycle(ctx, s.keys[s.next%len(s.keys)])
		el := time.Since(t0)
		s.next++
		if err != nil {
			s.errors++
			if s.firstErr == "" {
				s.firstErr = err.Error()
			}
			continue
		}
		s.samples = append(s.samples, el)
	}
	s.cpu += processCPU() - cpu0
	s.nodes += s.nodeCPU() - nodes0
	if allocs {
		runtime.ReadMemStats(&after)
		s.mallocs += after.Mallocs - before.Mallocs
		s.bytes += after.TotalAlloc - before.TotalAlloc
	}
	s.cycles += done
}

func (s *series) row(scenario string, allocs bool) row {
	r := row{Scenario: scenario, Impl: s.im.name, Errors: s.errors, Note: s.firstErr}
	if allocs && s.cycles > 0 {
		r.AllocsPerOp = float64(s.mallocs) / float64(s.cycles)
		r.BytesPerOp = float64(s.bytes) / float64(s.cycles)
		r.CPUus = float64(s.cpu) / float64(time.Microsecond) / float64(s.cycles)
		r.NodeCPUus = float64(s.nodes) / float64(time.Microsecond) / float64(s.cycles)
	}
	r.latencies(s.samples)
	return r
}

// fmtDur prints microseconds as µs below 10 ms, else as ms.
func fmtDur(us float64) string {
	switch {
	case us == 0:
		return "–"
	case us < 10_000:
		return fmt.Sprintf("%.0f µs", us)
	default:
		return fmt.Sprintf("%.1f ms", us/1000)
	}
}

// processCPU is this process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// nodesCPU is the CPU time so far of the processes pids, from the first
// field of /proc/PID/schedstat (nanoseconds on a CPU); 0 where it cannot
// be read.
func nodesCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
		if err != nil {
			return 0
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0
		}
		sum += time.Duration(ns)
	}
	return sum
}

// readCalls is how many read system calls process pid has made so far
// (syscr in /proc/PID/io; "self" for this process), or -1 where it
// cannot be read. A node reads once per batch of requests that reached
// it together, so its reads per cycle tell how well requests are
// pipelined.
func readCalls(pid string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}
