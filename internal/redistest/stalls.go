package redistest

import (
	"sync"
	"testing"
	"time"
)

// stallTick is how often a StallMonitor asks to be woken.
const stallTick = 5 * time.Millisecond

// StallMonitor measures this process's scheduling stalls: a goroutine
// asks to wake every stallTick and records how much later than asked it
// ran. The longest lateness is the longest stretch in which nothing of
// the process could be counted on to run: the machine ran other
// processes, the collector stopped the world, or the run queue was too
// long. A machine that runs the process only part of the time shows as
// many short stalls instead: Worst adds them up over a window. A test
// of deadlines reads them to tell a loss that the stalls explain from
// one that they do not.
type StallMonitor struct {
	mu   sync.Mutex
	at   []time.Time     // when each late wake-up came
	late []time.Duration // and how late it was
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// WatchStalls starts a StallMonitor; it stops at the test's cleanup.
func WatchStalls(t testing.TB) *StallMonitor {
	t.Helper()
	m := &StallMonitor{stop: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	t.Cleanup(m.Stop)
	return m
}

func (m *StallMonitor) run() {
	defer close(m.done)
	tm := time.NewTimer(stallTick)
	defer tm.Stop()
	due := time.Now().Add(stallTick)
	for {
		select {
		case <-m.stop:
			return
		case <-tm.C:
		}
		now := time.Now()
		if late := now.Sub(due); late > time.Millisecond {
			m.mu.Lock()
			m.at, m.late = append(m.at, now), append(m.late, late)
			m.mu.Unlock()
		}
		due = now.Add(stallTick)
		tm.Reset(stallTick)
	}
}

// Longest returns the longest stall seen so far.
func (m *StallMonitor) Longest() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	longest := time.Duration(0)
	for _, l := range m.late {
		longest = max(longest, l)
	}
	return longest
}

// Worst returns the most time lost to stalls within any window of
// length w so far (a stall counts in the window where it ended).
func (m *StallMonitor) Worst(w time.Duration) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	worst, sum, first := time.Duration(0), time.Duration(0), 0
	for k := range m.at {
		sum += m.late[k]
		for m.at[k].Sub(m.at[first]) > w {
			sum -= m.late[first]
			first++
		}
		worst = max(worst, sum)
	}
	return worst
}

// Stop stops the monitor and waits for its goroutine; it is idempotent.
func (m *StallMonitor) Stop() {
	m.once.Do(func() { close(m.stop) })
	<-m.done
}

// SurvivableStall is the longest stall an auto-extended lock of ttl, on a
// client whose per-node timeout is nodeTimeout and whose loss margin
// (how long before its deadline Done closes) is margin, survives by
// design: its extension falls due at ttl/2 left (earlier when the
// scheduler lags), it is lost at the loss margin, and the extension's
// round needs up to a per-node timeout of what is left in between to be
// answered.
func SurvivableStall(ttl, nodeTimeout, margin time.Duration) time.Duration {
	return max(ttl/2-margin-nodeTimeout, 0)
}

// Survivable reports whether the stalls so far are ones an auto-extended
// lock of ttl survives by design (see SurvivableStall): none longer than
// SurvivableStall, and under ttl/4 of stalls within any ttl/2, so that
// the process ran at least half of each stretch in which extensions fall
// due (a machine that runs the process only in short slices shows many
// short stalls, and the locks that fall due meanwhile are not extended
// in time). A test that counts lost locks asserts none only then; past
// that, a loss is the documented outcome of a process that could not
// run, and the test asserts only what holds whatever the stalls. It logs
// the figures.
func (m *StallMonitor) Survivable(t testing.TB, ttl, nodeTimeout, margin time.Duration) bool {
	t.Helper()
	longest, worst, survivable := m.Longest(), m.Worst(ttl/2), SurvivableStall(ttl, nodeTimeout, margin)
	ok := longest < survivable && worst < ttl/4
	t.Logf("longest stall %v (a lock of %v survives %v; Done is on time after %v), stalls within the worst %v: %v (at most %v survived): survivable %v",
		longest, ttl, survivable, margin, ttl/2, worst, ttl/4, ok)
	return ok
}
