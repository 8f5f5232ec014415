package redlock

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

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
