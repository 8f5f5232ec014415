package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// results is what -json writes.
type results struct {
	Started  time.Time `json:"started"`
	Elapsed  string    `json:"elapsed"`
	Command  string    `json:"command"`
	Machine  machine   `json:"machine"`
	Rows     []row     `json:"rows"`
	Targets  []target  `json:"targets"`
	AllPass  bool      `json:"all_pass"`
	Settings settings  `json:"settings"`
}

type settings struct {
	Nodes     int    `json:"nodes"`
	TTL       string `json:"ttl"`
	Iters     int    `json:"iters"`
	Duration  string `json:"throughput_duration"`
	Workers   int    `json:"throughput_workers"`
	SlowDelay string `json:"slow_delay"`
	// Contention is set when the contention scenario ran.
	Contention *contentionSettings `json:"contention,omitempty"`
}

type machine struct {
	CPU        string `json:"cpu"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	OS         string `json:"os"`
	Kernel     string `json:"kernel,omitempty"`
	Go         string `json:"go"`
	Redis      string `json:"redis"`
}

func thisMachine() machine {
	m := machine{
		CPU: "unknown", NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version(), Redis: redisVersion(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func (m machine) String() string {
	return fmt.Sprintf("%s, %d CPUs (GOMAXPROCS %d), %s %s, %s, %s", m.CPU, m.NumCPU, m.GOMAXPROCS, m.OS, m.Kernel, m.Go, m.Redis)
}

// target is one goal of the issue, or (Result "info") a reference ratio.
type target struct {
	Name     string  `json:"name"`
	Basis    string  `json:"basis"`
	Measured float64 `json:"measured,omitempty"`
	Limit    float64 `json:"limit,omitempty"`
	AtMost   bool    `json:"at_most"` // pass when measured <= limit; else when >=
	Unit     string  `json:"unit"`    // "×" or "ms"
	strict   bool    // AtMost, but pass only when measured < limit
	Result   string  `json:"result"` // pass, FAIL, n/a, info
	// Over says what the goal is judged on: "every run", or "median of
	// 5 runs" (Result is then this run's ratio against the goal, and the
	// verdict is the median's, in bench/README.md).
	Over string `json:"over,omitempty"`
}

// What a goal is judged on (target.Over).
const (
	overEvery  = "every run"
	overMedian = "median of 5 runs"
)

// fewest is the smaller of the non-zero values among vs, or 0.
func fewest(vs ...float64) float64 {
	out := 0.0
	for _, v := range vs {
		if v != 0 && (out == 0 || v < out) {
			out = v
		}
	}
	return out
}

func find(rows []row, scenario, impl string) *row {
	for i := range rows {
		r := &rows[i]
		if r.Scenario == scenarioTitle[scenario] && r.Impl == impl && !r.NA && r.N > 0 {
			return r
		}
	}
	return nil
}

// targets evaluates the goals on rows; ratios are within this run.
func targets(rows []row) []target {
	p50 := func(sc, impl string) float64 {
		if r := find(rows, sc, impl); r != nil {
			return r.P50us
		}
		return 0
	}
	field := func(sc, impl string, f func(*row) float64) float64 {
		if r := find(rows, sc, impl); r != nil {
			return f(r)
		}
		return 0
	}
	ratio := func(a, b float64) float64 {
		if a == 0 || b == 0 {
			return 0
		}
		return a / b
	}
	allocs := func(r *row) float64 { return r.AllocsPerOp }
	ops := func(r *row) float64 { return r.OpsPerSec }
	// Each peer in its strongest configuration: redsync with
	// WithFailFast returns at its quorum, as we do.
	out := []target{
		{Name: "uncontended p50 vs 5-node floor", Basis: "redlock / floor 5 parallel",
			Measured: ratio(p50(scUncontended, implOurs), p50(scUncontended, implFloor5)), Limit: 0.75, AtMost: true, Unit: "×"},
		{Name: "uncontended p50 vs redsync", Basis: "redlock / redsync",
			Measured: ratio(p50(scUncontended, implOurs), p50(scUncontended, implRedsync)), Limit: 0.8, AtMost: true, Unit: "×"},
		{Name: "uncontended p50 vs redsync WithFailFast", Basis: "redlock / redsync WithFailFast",
			Measured: ratio(p50(scUncontended, implOurs), p50(scUncontended, implFailFast)), Limit: 0.8, AtMost: true, Unit: "×",
			Over: overMedian},
		// What no client goes below on 5 nodes (rawfloor_linux.go).
		{Name: "uncontended p50 vs raw floor", Basis: "redlock / raw floor",
			Measured: ratio(p50(scUncontended, implOurs), p50(scUncontended, implRawFloor)), Limit: 1.1, AtMost: true, Unit: "×"},
		{Name: "one slow node p50 vs own unfaulted", Basis: "redlock slow / redlock unfaulted, interleaved",
			Measured: ratio(p50(scSlow, implOurs), p50(scSlow, implOursUnfaulted)), Limit: 1.3, AtMost: true, Unit: "×"},
		{Name: "hand-off p50", Basis: "redlock, default retry",
			Measured: p50(scHandoff, implOurs) / 1000, Limit: 1, AtMost: true, Unit: "ms"},
		{Name: "throughput vs redsync", Basis: "redlock / redsync, ops/s",
			Measured: ratio(field(scThroughput, implOurs, ops), field(scThroughput, implRedsync, ops)), Limit: 1.5, Unit: "×"},
		{Name: "allocs/op vs redsync", Basis: "redlock / redsync",
			Measured: ratio(field(scUncontended, implOurs, allocs), field(scUncontended, implRedsync, allocs)), Limit: 0.4, AtMost: true, Unit: "×"},
		// One Redis: ours on one node against the single-node locks.
		{Name: "1 node: uncontended p50 vs redislock", Basis: "redlock (1 node) / redislock (1 node)",
			Measured: ratio(p50(scUncontended, implOurs1), p50(scUncontended, implRedislock)), Limit: 1, AtMost: true, Unit: "×"},
		{Name: "1 node: uncontended p50 vs redislock, median", Basis: "redlock (1 node) / redislock (1 node)",
			Measured: ratio(p50(scUncontended, implOurs1), p50(scUncontended, implRedislock)), Limit: 0.9, AtMost: true, Unit: "×",
			Over: overMedian},
		{Name: "hand-off p50, 5 nodes vs rueidislock on 1", Basis: "redlock / rueidislock (1 node)",
			Measured: ratio(p50(scHandoff, implOurs), p50(scHandoff, implRueidis)), Limit: 1, AtMost: true, Unit: "×"},
		{Name: "1 node: throughput vs rueidislock", Basis: "redlock (1 node) / rueidislock (1 node), ops/s",
			Measured: ratio(field(scThroughput, implOurs1, ops), field(scThroughput, implRueidis, ops)), Limit: 1.5, Unit: "×"},
		// "Keep ahead": fewer than the fewer of the two, strictly.
		{Name: "1 node: allocs/op vs the fewer of redislock, rueidislock", Basis: "redlock (1 node) / min(redislock, rueidislock)",
			Measured: ratio(field(scUncontended, implOurs1, allocs),
				fewest(field(scUncontended, implRedislock, allocs), field(scUncontended, implRueidis, allocs))),
			Limit: 1, AtMost: true, Unit: "×", strict: true},
	}
	// The contention scenario's goals come judged (contention.go).
	out = append(out, contentionTargets(rows)...)
	for i := range out {
		t := &out[i]
		if t.Over == "" && t.Result != "info" {
			t.Over = overEvery
		}
		switch {
		case t.Result != "": // judged where it was made (contention.go)
		case t.Measured == 0:
			t.Result = "n/a"
		case t.strict && t.AtMost && t.Measured < t.Limit:
			t.Result = "pass"
		case t.strict:
			t.Result = "FAIL"
		case t.AtMost && t.Measured <= t.Limit, !t.AtMost && t.Measured >= t.Limit:
			t.Result = "pass"
		default:
			t.Result = "FAIL"
		}
	}
	info := func(name, basis string, v float64, unit string) {
		t := target{Name: name, Basis: basis, Measured: v, Unit: unit, Result: "info"}
		if v == 0 {
			t.Result = "n/a"
		}
		out = append(out, t)
	}
	info("redsync p50 vs 5-node floor (ref ≈ 1.45×)", "redsync / floor 5 parallel",
		ratio(p50(scUncontended, implRedsync), p50(scUncontended, implFloor5)), "×")
	// What no client can go below: how close the WithFailFast target is
	// to the floor every client shares (the loopback writes, the servers).
	info("go-redis floor p50 vs raw floor", "go-redis, a goroutine per node / raw floor",
		ratio(p50(scUncontended, implGRFloor), p50(scUncontended, implRawFloor)), "×")
	info("uncontended p50 vs go-redis floor", "redlock / go-redis, a goroutine per node",
		ratio(p50(scUncontended, implOurs), p50(scUncontended, implGRFloor)), "×")
	info("net.Conn floor p50 vs raw floor", "raw RESP on net.Conn / raw floor (ppoll)",
		ratio(p50(scUncontended, implGoFloor), p50(scUncontended, implRawFloor)), "×")
	info("1 node: uncontended p50 vs SET NX + EVALSHA floor", "redlock (1 node) / floor SET NX PX + EVALSHA release",
		ratio(p50(scUncontended, implOurs1), p50(scUncontended, implFloor1S)), "×")
	info("1 node: SET NX + EVALSHA floor vs redislock", "floor SET NX PX + EVALSHA release / redislock",
		ratio(p50(scUncontended, implFloor1S), p50(scUncontended, implRedislock)), "×")
	info("raw floor p50 vs redsync WithFailFast", "raw floor / redsync WithFailFast",
		ratio(p50(scUncontended, implRawFloor), p50(scUncontended, implFailFast)), "×")
	info("hand-off p50, 5 nodes vs rueidislock on 1, two lockers", "redlock, two Clients / rueidislock (1 node), two lockers",
		ratio(p50(scHandoff, implOursTwo), p50(scHandoff, implRueidis2)), "×")
	info("hand-off p50, 1 node vs rueidislock", "redlock (1 node) / rueidislock (1 node)",
		ratio(p50(scHandoff, implOurs1), p50(scHandoff, implRueidis)), "×")
	info("1 node: uncontended p50 vs rueidislock", "redlock (1 node) / rueidislock (1 node)",
		ratio(p50(scUncontended, implOurs1), p50(scUncontended, implRueidis)), "×")
	info("1 node: uncontended p50 vs 1-node floor", "redlock (1 node) / floor 1 node",
		ratio(p50(scUncontended, implOurs1), p50(scUncontended, implFloor1)), "×")
	info("1 node: throughput vs redislock", "redlock (1 node) / redislock (1 node), ops/s",
		ratio(field(scThroughput, implOurs1, ops), field(scThroughput, implRedislock, ops)), "×")
	// The target's basis before the interleaved reference: the unfaulted
	// p50 of the uncontended scenario, which runs earlier.
	info("one slow node p50 vs uncontended scenario", "redlock slow / redlock uncontended",
		ratio(p50(scSlow, implOurs), p50(scUncontended, implOurs)), "×")
	info("redsync slow node (ref ≈ 94×)", "redsync slow / redsync uncontended",
		ratio(p50(scSlow, implRedsync), p50(scUncontended, implRedsync)), "×")
	info("hand-off p50, 10 ms retry", "redlock WithRetryDelay(10ms)", p50(scHandoff, implOursRetry10)/1000, "ms")
	info("hand-off p50, redsync default (ref ≈ 150 ms)", "redsync", p50(scHandoff, implRedsync)/1000, "ms")
	info("fencing on vs off, p50", "fencing on / off",
		ratio(p50(scFencing, implFencingOn), p50(scFencing, implFencingOff)), "×")
	info("MultiLock vs quorum, p50", "MultiLock / quorum",
		ratio(p50(scMultiLock, implMultiLock), p50(scMultiLock, implQuorum)), "×")
	info("TryLockPath depth 3 vs TryLock, p50", "TryLockPath / TryLock",
		ratio(p50(scFamily, implLockPath), p50(scFamily, implTryLock)), "×")
	info("TryAcquire limit 3 vs TryLock, p50", "TryAcquire / TryLock",
		ratio(p50(scFamily, implAcquire), p50(scFamily, implTryLock)), "×")
	return out
}

func markdown(w io.Writer, res *results) {
	fmt.Fprintf(w, "Machine: %s.  \nCommand: `%s` (%s).\n\n", res.Machine, res.Command, res.Elapsed)
	num := func(v float64) string {
		if v == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f", v)
	}
	header := false
	for _, r := range res.Rows {
		if r.Contention != nil {
			continue // in their own table, below
		}
		if !header {
			fmt.Fprintln(w, "| scenario | implementation | p50 | p90 | p99 | cycles/s | allocs/op | B/op | client CPU µs/op | nodes' CPU µs/op | n | errors |")
			fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
			header = true
		}
		if r.NA {
			fmt.Fprintf(w, "| %s | %s | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | – | – |\n", r.Scenario, r.Impl)
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %d |\n", r.Scenario, r.Impl,
			fmtDur(r.P50us), fmtDur(r.P90us), fmtDur(r.P99us), num(r.OpsPerSec), num(r.AllocsPerOp), num(r.BytesPerOp), num(r.CPUus), num(r.NodeCPUus), r.N, r.Errors)
	}
	if header {
		fmt.Fprintln(w)
	}
	contentionMarkdown(w, res.Rows)
	notes := false
	for _, r := range res.Rows {
		if r.Note != "" {
			fmt.Fprintf(w, "- %s, %s: %s\n", r.Scenario, r.Impl, r.Note)
			notes = true
		}
	}
	if notes {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "| target | basis | measured | goal | judged on | result |")
	fmt.Fprintln(w, "|---|---|--:|--:|---|---|")
	for _, t := range res.Targets {
		measured, goal := "n/a", ""
		if t.Measured != 0 || t.Result == "pass" || t.Result == "FAIL" {
			measured = fmt.Sprintf("%.2f %s", t.Measured, t.Unit)
		}
		if t.Limit != 0 {
			op := "≥"
			switch {
			case t.strict && !t.AtMost:
				op = ">"
			case t.strict:
				op = "<"
			case t.AtMost:
				op = "≤"
			}
			goal = fmt.Sprintf("%s %.2f %s", op, t.Limit, t.Unit)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", t.Name, t.Basis, measured, goal, t.Over, t.Result)
	}
}

func writeJSON(path string, res *results) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// redisVersion returns the first line of `redis-server --version`.
func redisVersion() string {
	bin, err := redisnode.LookPath()
	if err != nil {
		return "unknown"
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
