package chaos

import (
	"strings"
	"testing"
	"time"
)

// TestActivity checks what a "no progress" failure reports about its
// window: the attempts that ended in it by outcome, most frequent first,
// and only the holds that overlapped it.
func TestActivity(t *testing.T) {
	const ms = time.Millisecond
	h := History{
		Attempts: []Attempt{
			{Start: 90 * ms, Latency: 5 * ms, Reason: "contended"},      // ended before the window
			{Start: 95 * ms, Latency: 10 * ms, Reason: "unreachable"},   // ended in it
			{Start: 110 * ms, Latency: 5 * ms, Reason: "contended"},     // in it
			{Start: 120 * ms, Latency: 5 * ms, Reason: "contended"},     // in it
			{Start: 130 * ms, Latency: 5 * ms, OK: true},                // in it
			{Start: 190 * ms, Latency: 20 * ms, Reason: "canceled"},     // ended after it
			{Start: 150 * ms, Latency: 50 * ms, Reason: "not obtained"}, // ended at its end: outside
		},
		Sections: []Section{
			{Client: 1, Key: "a", Acquired: 50 * ms, Released: 99 * ms, Deadline: 500 * ms},                  // ended before
			{Client: 2, Key: "b", Acquired: 60 * ms, Released: 300 * ms, Deadline: 500 * ms, Mode: ModeRead}, // through it
			{Client: 3, Key: "c", Acquired: 150 * ms, Released: Never, Deadline: 400 * ms},                   // from inside
			{Client: 4, Key: "d", Acquired: 200 * ms, Released: 250 * ms, Deadline: 500 * ms},                // after
		},
	}
	got := h.activity(100*ms, 200*ms)
	want := `attempts ended in it: 2 contended, 1 granted, 1 unreachable; held in it: read "b" by client 2 (60.0ms to 300.0ms), write "c" by client 3 (150.0ms to 400.0ms)`
	if got != want {
		t.Errorf("activity:\n got %s\nwant %s", got, want)
	}

	if got, want := (History{}).activity(0, time.Second), "attempts ended in it: none; held in it: nothing"; got != want {
		t.Errorf("empty history: got %q, want %q", got, want)
	}

	var many History
	for i := range 10 {
		many.Sections = append(many.Sections, Section{Client: i, Key: "k", Acquired: 0, Released: time.Second, Deadline: time.Second})
	}
	if got := many.activity(0, time.Second); !strings.HasSuffix(got, " and 2 more") || strings.Count(got, "by client") != 8 {
		t.Errorf("10 holds: want 8 listed and \" and 2 more\", got %q", got)
	}
}
