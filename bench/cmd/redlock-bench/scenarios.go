package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

// Implementation names, used again by the targets.
const (
	implOurs      = "redlock"
	implRedsync   = "redsync"
	implFailFast  = "redsync WithFailFast"
	implRedislock = "redislock (1 node)"
	implOurs1     = "redlock (1 node)"
	implRueidis   = "rueidislock (1 node)"
	implRueidis2  = "rueidislock (1 node), holder and waiter on two lockers"
	implOursTwo   = "redlock, holder and waiter on two Clients"
	implFloor1    = "floor: SET NX PX + DEL, 1 node"
	implFloor5    = "floor: SET NX PX + DEL, 5 nodes parallel"
	implRawFloor  = "floor: raw RESP, one thread, ppoll, first 3 of 5"
	implGoFloor   = "floor: raw RESP on net.Conn, one goroutine, first 3 of 5"
	implGRFloor   = "floor: go-redis, a goroutine per node, first 3 of 5"
	implFloor1S   = "floor: SET NX PX + EVALSHA release, 1 node"

	implOursUnfaulted = "redlock, no node slowed (interleaved reference)"

	implOursRetry10    = "redlock WithRetryDelay(10ms)"
	implRedsyncRetry10 = "redsync WithRetryDelay(10ms)"
	implFencingOff     = "redlock, fencing off"
	implFencingOn      = "redlock, fencing on"
	implQuorum         = "redlock quorum (3/5)"
	implMultiLock      = "redlock MultiLock (5/5)"
	implTryLock        = "redlock TryLock"
	implLockPath       = "redlock TryLockPath depth 3"
	implAcquire        = "redlock TryAcquire limit 3"
)

// Scenario names, in the order they run.
const (
	scUncontended = "uncontended"
	scSlow        = "slow"
	scHandoff     = "handoff"
	scThroughput  = "throughput"
	scFencing     = "fencing"
	scMultiLock   = "multilock"
	scFamily      = "family"
	scContention  = "contention"
)

var allScenarios = []string{scUncontended, scSlow, scHandoff, scThroughput, scFencing, scMultiLock, scFamily, scContention}

// scenarioTitle is how a scenario is labelled in the table.
var scenarioTitle = map[string]string{
	scUncontended: "uncontended lock+unlock",
	scSlow:        "1 of 5 nodes +20 ms",
	scHandoff:     "hand-off",
	scThroughput:  "throughput, 32 goroutines",
	scFencing:     "fencing",
	scMultiLock:   "MultiLock vs quorum",
	scFamily:      "lock family, uncontended lock+unlock",
	scContention:  "contention, one key, 2 ms holds",
}

const (
	slowDelay = 20 * time.Millisecond
	workers   = 32
	settle    = 200 * time.Millisecond // between cases: let stragglers finish
)

// env is what the scenarios share.
type env struct {
	ctx      context.Context
	addrs    []string // the 5 nodes
	pids     []int    // their redis-server processes
	slow     []string // the same, with the last node behind the slow proxy
	iters    int
	duration time.Duration
	cont     contentionOpts // the contention scenario's flags
	rows     []row
}

func peers() []maker {
	return []maker{
		ours(implOurs),
		redsyncImpl(implRedsync),
		redsyncImpl(implFailFast, redsync.WithFailFast(true)),
		redislockImpl(implRedislock),
		oursOne(implOurs1),
		rueidislockImpl(implRueidis, false),
		floorOne(implFloor1),
		floorParallel(implFloor5),
	}
}

// clients returns n fresh go-redis clients for addrs, with default
// options, as users create them.
func clients(addrs []string, n int) []redis.UniversalClient {
	cs := make([]redis.UniversalClient, n)
	for i := range cs {
		cs[i] = redis.NewClient(&redis.Options{Addr: addrs[i]})
	}
	return cs
}

func closeAll(cs []redis.UniversalClient) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// with builds m over fresh clients for addrs, runs f, and closes the clients.
func (e *env) with(scenario string, m maker, addrs []string, f func(im impl) row) {
	cs := clients(addrs, m.nodes)
	defer func() {
		closeAll(cs)
		time.Sleep(settle)
	}()
	im, err := m.new(m.name, cs)
	if err != nil {
		e.add(row{Scenario: scenarioTitle[scenario], Impl: m.name, Errors: 1, Note: err.Error()})
		return
	}
	if im.closer != nil {
		defer im.closer()
	}
	e.add(f(im))
}

// latency measures sequential lock+unlock cycles of every maker over
// addrs, each on its own clients and keys, interleaved in blocks.
func (e *env) latency(scenario string, ms []maker, addrs []string, o latencyOpts) {
	var all []*series
	var open [][]redis.UniversalClient
	defer func() {
		for _, cs := range open {
			closeAll(cs)
		}
		time.Sleep(settle)
	}()
	for _, m := range ms {
		a := addrs
		if m.addrs != nil {
			a = m.addrs
		}
		cs := clients(a, m.nodes)
		open = append(open, cs)
		im, err := m.new(m.name, cs)
		if err != nil {
			e.add(row{Scenario: scenarioTitle[scenario], Impl: m.name, Errors: 1, Note: err.Error()})
			continue
		}
		if im.closer != nil {
			defer im.closer()
		}
		all = append(all, &series{im: im, keys: keys(scenario+":"+m.name, 256), samples: make([]time.Duration, 0, o.iters),
			nodeCPU: func() time.Duration { return nodesCPU(e.pids) }})
	}
	for _, s := range all {
		s.warm(e.ctx, o.warm, o.budget/4)
	}
	for b := range blocks {
		for j := range all {
			s := all[(j+b)%len(all)] // rotate who goes first
			s.run(e.ctx, o.iters/blocks, o.budget/blocks, o.allocs)
		}
	}
	for _, s := range all {
		e.add(s.row(scenarioTitle[scenario], o.allocs))
	}
}

func (e *env) add(r row) {
	e.rows = append(e.rows, r)
	if c := r.Contention; c != nil {
		fmt.Fprintf(os.Stderr, "%-26s %-42s waiters %-3d acq/s %-5.0f cmds/acq %-6.1f p50 %-9s p99 %-9s least/median/most %d/%d/%d err %d %s\n",
			r.Scenario, r.Impl, c.Waiters, r.OpsPerSec, c.CmdsPerAcq, fmtDur(r.P50us), fmtDur(r.P99us), c.Least, c.Median, c.Most, r.Errors, r.Note)
		return
	}
	fmt.Fprintf(os.Stderr, "%-26s %-42s p50 %-9s ops/s %-7.0f allocs %-5.0f n %-5d err %d %s\n",
		r.Scenario, r.Impl, fmtDur(r.P50us), r.OpsPerSec, r.AllocsPerOp, r.N, r.Errors, r.Note)
}

func (e *env) na(scenario, impl, note string) {
	e.add(row{Scenario: scenarioTitle[scenario], Impl: impl, NA: true, Note: note})
}

func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("bench:%s:%d", prefix, i)
	}
	return out
}

// uncontended: sequential lock+unlock cycles on free keys, with allocations.
func (e *env) uncontended() {
	// The raw floor only here: it has no timeouts, so a slow node would
	// hold every cycle of it for the node's delay.
	ms := append(peers(), rawFloor(implRawFloor), goFloor(implGoFloor), goRedisFloor(implGRFloor), floorOneScript(implFloor1S))
	e.latency(scUncontended, ms, e.addrs, latencyOpts{warm: 200, iters: e.iters, budget: 5 * time.Second, allocs: true})
}

// slow: the same with one of the 5 nodes behind a proxy adding 20 ms.
func (e *env) slowNode() {
	var ms []maker
	for _, m := range peers() {
		if m.nodes > 1 {
			ms = append(ms, m)
		}
	}
	// Our unfaulted reference, interleaved with the faulted series in the
	// same blocks: the machine's speed drifts by up to a third over a
	// bench run, and the uncontended scenario ran earlier.
	ref := ours(implOursUnfaulted)
	ref.addrs = e.addrs
	ms = append(ms, ref)
	e.latency(scSlow, ms, e.slow, latencyOpts{warm: 50, iters: e.iters, budget: 3 * time.Second})
}

// handoffs: two contenders on one key; the time from the holder's Unlock
// returning to the waiter's Lock returning. rueidislock's release returns
// once it has landed, and with one locker its waiter is woken in process
// at that moment: a hand-off can then finish before the release returns,
// and counts 0.
func (e *env) handoffs() {
	for _, m := range []maker{
		ours(implOurs),
		ours(implOursRetry10, redlock.WithRetryDelay(10*time.Millisecond)),
		oursTwo(implOursTwo),
		oursOne(implOurs1),
		rueidislockImpl(implRueidis, false),
		rueidislockImpl(implRueidis2, true),
		redsyncImpl(implRedsync),
		redsyncImpl(implRedsyncRetry10, redsync.WithRetryDelay(10*time.Millisecond)),
	} {
		e.with(scHandoff, m, e.addrs, func(im impl) row {
			return handoff(e.ctx, im, "bench:handoff:"+m.name, 200, 4*time.Second)
		})
	}
}

func handoff(ctx context.Context, im impl, key string, iters int, budget time.Duration) row {
	r := row{Scenario: scenarioTitle[scHandoff], Impl: im.name}
	fail := func(err error) {
		r.Errors++
		if r.Note == "" {
			r.Note = err.Error()
		}
	}
	type got struct {
		at      time.Time
		release func(context.Context) error
		err     error
	}
	var samples []time.Duration
	end := time.Now().Add(budget)
	for i := 0; i < iters && time.Now().Before(end) && ctx.Err() == nil; i++ {
		release, err := im.lock(ctx, key)
		if err != nil {
			fail(err)
			continue
		}
		ch := make(chan got, 1)
		started := make(chan struct{})
		go func() {
			close(started)
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			rel, err := im.lock(wctx, key)
			ch <- got{time.Now(), rel, err}
		}()
		<-started
		// Let the waiter lose its first attempt and sit in its retry
		// delay, at a random phase.
		time.Sleep(2*time.Millisecond + rand.N(10*time.Millisecond))
		if err := release(ctx); err != nil {
			fail(err)
		}
		t0 := time.Now()
		g := <-ch
		if g.err != nil {
			fail(g.err)
			continue
		}
		// A waiter that won before the holder's Unlock returned (its
		// attempt ran right behind the release) counts 1µs, not 0,
		// which the report reads as no data.
		samples = append(samples, max(g.at.Sub(t0), time.Microsecond))
		if err := g.release(ctx); err != nil {
			fail(err)
		}
	}
	r.latencies(samples)
	return r
}

// throughputs: 32 goroutines on distinct keys, e.duration per
// implementation, run in interleaved blocks like the latency cases.
func (e *env) throughputs() {
	type tp struct {
		im       impl
		ok, bad  int64
		elapsed  time.Duration
		firstErr string
	}
	var all []*tp
	var open [][]redis.UniversalClient
	defer func() {
		for _, cs := range open {
			closeAll(cs)
		}
		time.Sleep(settle)
	}()
	for _, m := range peers() {
		cs := clients(e.addrs, m.nodes)
		open = append(open, cs)
		im, err := m.new(m.name, cs)
		if err != nil {
			e.add(row{Scenario: scenarioTitle[scThroughput], Impl: m.name, Errors: 1, Note: err.Error()})
			continue
		}
		if im.closer != nil {
			defer im.closer()
		}
		all = append(all, &tp{im: im})
	}
	for b := range blocks {
		for j := range all {
			t := all[(j+b)%len(all)]
			ok, bad, el, first := throughput(e.ctx, t.im, b, e.duration/blocks)
			t.ok, t.bad, t.elapsed = t.ok+ok, t.bad+bad, t.elapsed+el
			if t.firstErr == "" {
				t.firstErr = first
			}
		}
	}
	for _, t := range all {
		r := row{Scenario: scenarioTitle[scThroughput], Impl: t.im.name, N: int(t.ok), Errors: int(t.bad), Note: t.firstErr}
		if t.elapsed > 0 {
			r.OpsPerSec = float64(t.ok) / t.elapsed.Seconds()
		}
		e.add(r)
	}
}

// throughput runs lock+unlock cycles from workers goroutines, each on
// keys of its own, for d; block keeps the keys of blocks apart.
func throughput(ctx context.Context, im impl, block int, d time.Duration) (ok, bad int64, elapsed time.Duration, firstErr string) {
	var nok, nbad atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for w := range workers {
		ks := keys(fmt.Sprintf("tp:%s:%d:%d", im.name, block, w), 16)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && time.Now().Before(end); i++ {
				if err := im.cycle(ctx, ks[i%len(ks)]); err != nil {
					nbad.Add(1)
					first.CompareAndSwap(nil, err.Error())
				} else {
					nok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	firstErr, _ = first.Load().(string)
	return nok.Load(), nbad.Load(), time.Since(start), firstErr
}

// fencing: our uncontended cycle with fencing off and on.
func (e *env) fencing() {
	o := latencyOpts{warm: 200, iters: e.iters, budget: 5 * time.Second, allocs: true}
	var unfenced atomic.Bool
	on, ok := fencingOn(&unfenced)
	if !ok {
		e.latency(scFencing, []maker{ours(implFencingOff)}, e.addrs, o)
		e.na(scFencing, implFencingOn, "redlock has no fencing option")
		return
	}
	e.latency(scFencing, []maker{ours(implFencingOff), on}, e.addrs, o)
	if unfenced.Load() {
		r := &e.rows[len(e.rows)-1]
		r.Note = "Fence() returned 0: fencing not wired into acquisition yet"
		fmt.Fprintln(os.Stderr, "fencing on: "+r.Note)
	}
}

// multiLocks: the all-nodes variant against the quorum lock.
func (e *env) multiLocks() {
	o := latencyOpts{warm: 200, iters: e.iters, budget: 5 * time.Second, allocs: true}
	ml, ok := multiLock()
	if !ok {
		e.latency(scMultiLock, []maker{ours(implQuorum)}, e.addrs, o)
		e.na(scMultiLock, implMultiLock, "redlock has no MultiLock")
		return
	}
	e.latency(scMultiLock, []maker{ours(implQuorum), ml}, e.addrs, o)
}

// family: a folder lock of depth 3 and a semaphore permit (limit 3, so 4
// of the 5 nodes must grant it), each against TryLock, uncontended, with
// allocations.
func (e *env) family() {
	o := latencyOpts{warm: 200, iters: e.iters, budget: 5 * time.Second, allocs: true}
	ms := []maker{tryLock()}
	var missing []string
	for _, v := range []struct {
		name string
		m    func() (maker, bool)
	}{{implLockPath, pathLock}, {implAcquire, semaphore}} {
		if m, ok := v.m(); ok {
			ms = append(ms, m)
		} else {
			missing = append(missing, v.name)
		}
	}
	e.latency(scFamily, ms, e.addrs, o)
	for _, name := range missing {
		e.na(scFamily, name, "redlock has no such API")
	}
}
