package redlock

import (
	"container/heap"
	"testing"
	"time"
)

// TestSchedulerBacklogAdvances: when ticks start late, the next
// extensions come earlier by twice the lateness, at most TTL/4; the
// measure follows a rise at once and decays by an eighth per tick.
func TestSchedulerBacklogAdvances(t *testing.T) {
	var s sched
	if got := advance(s.lag, 2*time.Second); got != 0 {
		t.Fatalf("no lag: want no advance, got %v", got)
	}
	s.measured(30 * time.Millisecond)
	if got := advance(s.lag, 2*time.Second); got != 60*time.Millisecond {
		t.Fatalf("30ms late: want the next extension 60ms earlier, got %v", got)
	}
	s.measured(time.Second)
	if got := advance(s.lag, 2*time.Second); got != 500*time.Millisecond {
		t.Fatalf("1s late, TTL 2s: want the advance capped at TTL/4 (500ms), got %v", got)
	}
	s.measured(0)
	if want := time.Second - time.Second/8; s.lag != want {
		t.Fatalf("a punctual tick after a late one: want the lag decayed to %v, got %v", want, s.lag)
	}
	for range 200 {
		s.measured(0)
	}
	if s.lag > time.Millisecond {
		t.Fatalf("after 200 punctual ticks: want the lag gone, got %v", s.lag)
	}
}

// TestSchedulerHeapOrder: the heap gives entries back by the earlier of
// their extension and their expiry, whatever the order they came in and
// however their times moved since.
func TestSchedulerHeapOrder(t *testing.T) {
	var s sched
	base := time.Now().Add(time.Hour)
	var es []*entry
	for i := range 50 {
		e := &entry{idx: -1}
		e.due = base.Add(time.Duration((i*37)%50) * time.Millisecond)
		e.rekey()
		heap.Push(&s.h, e)
		es = append(es, e)
	}
	// Move some: an expiry sooner than the extension wins.
	es[3].exp = base.Add(-time.Millisecond)
	es[3].rekey()
	s.h[es[3].idx].key = es[3].key
	heap.Fix(&s.h, es[3].idx)
	prev := int64(-1 << 62)
	first := true
	for len(s.h) > 0 {
		e := heap.Pop(&s.h).(*entry)
		if e.key < prev {
			t.Fatalf("heap order broken: %d after %d", e.key, prev)
		}
		if first && e != es[3] {
			t.Fatalf("want entry 3 (its expiry is soonest) first, got the one due at %v", e.due.Sub(base))
		}
		first = false
		prev = e.key
		if e.idx != -1 {
			t.Fatalf("a popped entry keeps index %d", e.idx)
		}
	}
	if e := es[3]; e.at() != e.exp {
		t.Fatalf("entry 3: want its expiry as its time, got %v", e.at())
	}
}
