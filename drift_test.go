package redlock

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestDrift(t *testing.T) {
	for _, tc := range []struct {
		ttl    time.Duration
		factor float64
		want   time.Duration
	}{
		{10 * time.Second, 0.01, 102 * time.Millisecond},
		{time.Second, 0.01, 12 * time.Millisecond},
		{100 * time.Millisecond, 0.01, 3 * time.Millisecond},
		{30 * time.Second, 0, 2 * time.Millisecond},
		{time.Second, 0.1, 102 * time.Millisecond},
		{1500 * time.Microsecond, 0.01, 2*time.Millisecond + 15*time.Microsecond},
	} {
		if got := drift(tc.ttl, tc.factor); got != tc.want {
			t.Errorf("drift(%v, %v): want %v, got %v", tc.ttl, tc.factor, tc.want, got)
		}
	}
}

func TestValidity(t *testing.T) {
	for _, tc := range []struct {
		ttl, elapsed time.Duration
		factor       float64
		want         time.Duration
	}{
		{10 * time.Second, 0, 0.01, 10*time.Second - 102*time.Millisecond},
		{10 * time.Second, 500 * time.Millisecond, 0.01, 10*time.Second - 602*time.Millisecond},
		{time.Second, 988 * time.Millisecond, 0.01, 0},                 // exactly used up: not valid
		{time.Second, 989 * time.Millisecond, 0.01, -time.Millisecond}, // past it
		{100 * time.Millisecond, 90 * time.Millisecond, 0.01, 7 * time.Millisecond},
	} {
		if got := validity(tc.ttl, tc.elapsed, tc.factor); got != tc.want {
			t.Errorf("validity(%v, %v, %v): want %v, got %v", tc.ttl, tc.elapsed, tc.factor, tc.want, got)
		}
	}
}

// TestDeadline: a lease's deadline is its start plus its validity with
// nothing elapsed, start + ttl - drift.
func TestDeadline(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		ttl    time.Duration
		factor float64
		want   time.Duration // after start
	}{
		{10 * time.Second, 0.01, 10*time.Second - 102*time.Millisecond},
		{time.Second, 0, time.Second - 2*time.Millisecond},
		{2 * time.Millisecond, 0, 0},
		{time.Millisecond, 0.01, -1*time.Millisecond - 10*time.Microsecond},
	} {
		if got := deadline(start, tc.ttl, tc.factor).Sub(start); got != tc.want {
			t.Errorf("deadline(start, %v, %v): want start%+v, got start%+v", tc.ttl, tc.factor, tc.want, got)
		}
	}
}

func TestCheckTTL(t *testing.T) {
	for _, tc := range []struct {
		ttl    time.Duration
		factor float64
		ok     bool
	}{
		{0, 0.01, false},
		{-time.Second, 0.01, false},
		{2 * time.Millisecond, 0.01, false}, // all drift
		{3 * time.Millisecond, 0.01, false}, // 0.97ms left < minValidity
		{4 * time.Millisecond, 0.01, true},  // 1.96ms left
		{time.Second, 0.49, true},           // 498ms left
		{5 * time.Millisecond, 0.49, false}, // 5 - 2.45 - 2 = 0.55ms left
		{time.Hour, 0.01, true},
	} {
		if got := checkTTL(tc.ttl, tc.factor); got != tc.ok {
			t.Errorf("checkTTL(%v, %v): want %v, got %v", tc.ttl, tc.factor, tc.ok, got)
		}
	}
}

func TestDefaultNodeTimeout(t *testing.T) {
	for _, tc := range []struct{ ttl, want time.Duration }{
		{10 * time.Millisecond, 5 * time.Millisecond},
		{100 * time.Millisecond, 5 * time.Millisecond},
		{time.Second, 50 * time.Millisecond},
		{2 * time.Second, 100 * time.Millisecond},
		{10 * time.Second, 200 * time.Millisecond},
		{time.Hour, 200 * time.Millisecond},
	} {
		if got := DefaultNodeTimeout(tc.ttl); got != tc.want {
			t.Errorf("DefaultNodeTimeout(%v): want %v, got %v", tc.ttl, tc.want, got)
		}
	}
}
func TestQuorum(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		if got := quorum(n); got != want {
			t.Errorf("quorum(%d): want %d, got %d", n, want, got)
		}
	}
}

func TestJitter(t *testing.T) {
	d := 40 * time.Millisecond
	for range 1000 {
		if j := jitter(d); j < d/2 || j >= 3*d/2 {
			t.Fatalf("jitter(%v) = %v, want within [%v, %v)", d, j, d/2, 3*d/2)
		}
	}
}

// TestJitterSaturates: delays near the largest Duration (a writer that
// counts on the hand-off alone) never wrap around to a negative delay,
// which would fire at once.
func TestJitterSaturates(t *testing.T) {
	for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 / 3 * 2, math.MaxInt64/2 + 1, 200 * 365 * 24 * time.Hour} {
		for range 1000 {
			if j := jitter(d); j < d/2 {
				t.Fatalf("jitter(%v) = %v, want at least %v", d, j, d/2)
			}
		}
	}
}

// TestWriterMarkLength: three retry delays, at least minWriterMark, plus
// the per-node timeout, saturating for huge delays; and no longer than until the ctx's
// deadline (at least minWriterMark), with no mark staying none.
func TestWriterMarkLength(t *testing.T) {
	for _, tc := range []struct{ delay, want time.Duration }{
		{time.Millisecond, minWriterMark},
		{50 * time.Millisecond, 150 * time.Millisecond},
		{time.Hour, 3 * time.Hour},
		{math.MaxInt64 / 3, math.MaxInt64 / 3 * 3},
		{math.MaxInt64/3 + 1, math.MaxInt64},
		{math.MaxInt64 / 2, math.MaxInt64},
		{90 * 365 * 24 * time.Hour, 270 * 365 * 24 * time.Hour},
		{100 * 365 * 24 * time.Hour, math.MaxInt64},
		{200 * 365 * 24 * time.Hour, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64},
	} {
		if got := writerMark(tc.delay, 0); got != tc.want {
			t.Errorf("writerMark(%v) = %v, want %v", tc.delay, got, tc.want)
		}
	}
	if got := writerMark(50*time.Millisecond, 200*time.Millisecond); got != 350*time.Millisecond {
		t.Errorf("writerMark(50ms, node timeout 200ms) = %v, want 350ms", got)
	}
	if got := writerMark(math.MaxInt64/4, math.MaxInt64/2); got != math.MaxInt64 {
		t.Errorf("writerMark(MaxInt64/4, node timeout MaxInt64/2) = %v, want MaxInt64", got)
	}
	bg := context.Background()
	if got := markFor(bg, time.Hour); got != time.Hour {
		t.Errorf("markFor(no deadline, 1h) = %v, want 1h", got)
	}
	if got := markFor(bg, 0); got != 0 {
		t.Errorf("markFor(no deadline, 0) = %v, want 0", got)
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if got := markFor(ctx, time.Hour); got > 10*time.Second || got < 5*time.Second {
		t.Errorf("markFor(10s deadline, 1h) = %v, want about 10s", got)
	}
	if got := markFor(ctx, 200*time.Millisecond); got != 200*time.Millisecond {
		t.Errorf("markFor(10s deadline, 200ms) = %v, want 200ms", got)
	}
	if got := markFor(ctx, 0); got != 0 {
		t.Errorf("markFor(10s deadline, 0) = %v, want 0", got)
	}
	short, cancel2 := context.WithTimeout(bg, time.Millisecond)
	defer cancel2()
	if got := markFor(short, time.Hour); got != minWriterMark {
		t.Errorf("markFor(1ms deadline, 1h) = %v, want %v", got, minWriterMark)
	}
}

// TestWriterMarkBounds: writerMark saturates and never goes below
// minWriterMark; markFor never exceeds the mark, honours the deadline,
// keeps at least minWriterMark, and keeps 0.
func TestWriterMarkBounds(t *testing.T) {
	cases := []struct{ d, nt time.Duration }{
		{1, 0}, {1, -1}, {1, math.MinInt64}, {time.Millisecond, time.Second},
		{math.MaxInt64 / 3, 0}, {math.MaxInt64 / 3, 1}, {math.MaxInt64 / 3, 2}, {math.MaxInt64/3 + 1, 0},
		{math.MaxInt64, math.MaxInt64}, {time.Hour, math.MaxInt64}, {time.Hour, math.MaxInt64 - 3*time.Hour},
		{time.Hour, math.MaxInt64 - 3*time.Hour + 1},
	}
	for _, tc := range cases {
		m := writerMark(tc.d, tc.nt)
		if m < minWriterMark {
			t.Errorf("writerMark(%d, %d) = %d: below the least", tc.d, tc.nt, m)
		}
		want := max(3*tc.d, minWriterMark)
		if tc.d <= math.MaxInt64/3 && tc.nt > 0 && tc.nt <= math.MaxInt64-want && m != want+tc.nt {
			t.Errorf("writerMark(%d, %d) = %d, want %d", tc.d, tc.nt, m, want+tc.nt)
		}
		if tc.d > 0 && m < 3*min(tc.d, math.MaxInt64/3) {
			t.Errorf("writerMark(%d, %d) = %d: shorter than 3 delays", tc.d, tc.nt, m)
		}
	}
	for range 100000 {
		d := time.Duration(rand.Int64N(math.MaxInt64-2) + 2)
		if j := jitter(d); j < d/2 || j < 0 {
			t.Fatalf("jitter(%d) = %d", d, j)
		}
	}
	if j := jitter(math.MaxInt64); j < 0 {
		t.Fatalf("jitter(max) = %d", j)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if m := markFor(ctx, 2*time.Hour); m > time.Hour || m < time.Hour-time.Minute {
		t.Errorf("markFor(1h ctx, 2h) = %v", m)
	}
	if m := markFor(ctx, 30*time.Minute); m != 30*time.Minute {
		t.Errorf("markFor(1h ctx, 30m) = %v", m)
	}
	past, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Hour))
	defer cancel2()
	if m := markFor(past, time.Hour); m != minWriterMark {
		t.Errorf("markFor(past ctx, 1h) = %v", m)
	}
	if m := markFor(ctx, 0); m != 0 {
		t.Errorf("markFor(ctx, 0) = %v", m)
	}
	if m := markFor(context.Background(), math.MaxInt64); m != math.MaxInt64 {
		t.Errorf("markFor(bg, max) = %v", m)
	}
}

// TestSemaphoreQuorum: the quorum that keeps limit k from admitting k+1
// holders: floor(kN/(k+1)) + 1.
func TestSemaphoreQuorum(t *testing.T) {
	for _, tc := range []struct{ n, k, want int }{
		{5, 1, 3}, {5, 2, 4}, {5, 3, 4}, {5, 4, 5}, {5, 100, 5},
		{3, 1, 2}, {3, 2, 3}, {1, 1, 1}, {1, 5, 1}, {7, 2, 5}, {7, 3, 6},
		{0, 1, 0}, {5, 0, 0}, {-1, 2, 0},
	} {
		if got := semaphoreQuorum(tc.n, tc.k); got != tc.want {
			t.Errorf("semaphoreQuorum(%d, %d): want %d, got %d", tc.n, tc.k, tc.want, got)
		}
	}
	// The bound holds and is tight for every n, k up to 9.
	for n := 1; n <= 9; n++ {
		for k := 1; k <= 9; k++ {
			q := semaphoreQuorum(n, k)
			if (k+1)*q <= k*n {
				t.Errorf("n=%d k=%d: q=%d lets %d holders fit", n, k, q, k+1)
			}
			if q > 1 && (k+1)*(q-1) > k*n {
				t.Errorf("n=%d k=%d: q=%d is not the smallest safe quorum", n, k, q)
			}
		}
	}
}
