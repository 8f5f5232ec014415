package redlock

import (
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
