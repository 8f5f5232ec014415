package chaos_test

import (
	"testing"
	"time"

	"github.com/seed543a70bd/redlock/chaos"
)

// lead builds a leadership of the election whose key is key: client was
// elected at acq with term, and its window is [acq, min(end, dl)).
func lead(client int, key string, term int64, acq, end, dl time.Duration) chaos.Section {
	s := sec(client, key, acq, end, dl)
	s.Mode, s.Fence = chaos.ModeLeader, term
	return s
}

// TestCheckLeadershipsOverlap: two leaderships of one election valid at
// the same instant are a violation, whatever their terms; a leadership
// whose Done closed (or whose deadline passed) before the next election
// is none. A checker that missed the overlap of leaderships would pass
// the rows that want 1.
func TestCheckLeadershipsOverlap(t *testing.T) {
	const e = "redlock:election:x"
	tests := []struct {
		name string
		secs []chaos.Section
		want int
	}{
		{"one after the other", []chaos.Section{lead(1, e, 1, 0, 100*msec, 500*msec), lead(2, e, 2, 100*msec, 200*msec, 600*msec)}, 0},
		{"elected while the other was valid", []chaos.Section{lead(1, e, 1, 0, 100*msec, 500*msec), lead(2, e, 2, 99*msec, 200*msec, 600*msec)}, 1},
		{"paused leader: only its deadline ends it", []chaos.Section{lead(1, e, 1, 0, chaos.Never, 500*msec), lead(2, e, 2, 400*msec, 600*msec, 900*msec)}, 1},
		{"paused leader past its deadline", []chaos.Section{lead(1, e, 1, 0, 2*time.Second, 500*msec), lead(2, e, 2, 500*msec, 600*msec, 900*msec)}, 0},
		{"elected after its deadline: never valid", []chaos.Section{lead(1, e, 1, 0, 300*msec, 500*msec), lead(2, e, 2, 100*msec, 150*msec, 90*msec)}, 0},
		{"two elections", []chaos.Section{lead(1, "redlock:election:a", 1, 0, 100*msec, 500*msec), lead(2, "redlock:election:b", 1, 50*msec, 200*msec, 600*msec)}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []chaos.Violation
			for _, v := range chaos.Check(chaos.History{Sections: tt.secs}) {
				if v.Kind == chaos.Overlap {
					got = append(got, v)
				}
			}
			if len(got) != tt.want {
				t.Fatalf("want %d overlaps, got %d: %v", tt.want, len(got), got)
			}
		})
	}
}

// TestTermOrder: terms must strictly rise in the order leaders were
// elected (Acquired), across an election's leaderships only, and a
// leadership that was never valid does not count.
func TestTermOrder(t *testing.T) {
	const e = "redlock:election:x"
	tests := []struct {
		name string
		secs []chaos.Section
		want [][2]int64 // the terms (A, B) of each violation, in order
	}{
		{"rising", []chaos.Section{lead(1, e, 3, 0, 10*msec, time.Second), lead(2, e, 7, 20*msec, 30*msec, time.Second), lead(1, e, 8, 40*msec, 50*msec, time.Second)}, nil},
		{"rising, listed out of order", []chaos.Section{lead(1, e, 8, 40*msec, 50*msec, time.Second), lead(2, e, 3, 0, 10*msec, time.Second)}, nil},
		{"equal terms", []chaos.Section{lead(1, e, 5, 0, 10*msec, time.Second), lead(2, e, 5, 20*msec, 30*msec, time.Second)}, [][2]int64{{5, 5}}},
		{"a term goes back", []chaos.Section{
			lead(1, e, 5, 0, 10*msec, time.Second), lead(2, e, 7, 20*msec, 30*msec, time.Second),
			lead(3, e, 6, 40*msec, 50*msec, time.Second), lead(1, e, 9, 60*msec, 70*msec, time.Second),
		}, [][2]int64{{7, 6}}},
		{"compared with the largest so far", []chaos.Section{
			lead(1, e, 9, 0, 10*msec, time.Second), lead(2, e, 4, 20*msec, 30*msec, time.Second), lead(3, e, 5, 40*msec, 50*msec, time.Second),
		}, [][2]int64{{9, 4}, {9, 5}}},
		{"never valid: not counted", []chaos.Section{lead(1, e, 9, 0, 10*msec, 0), lead(2, e, 4, 20*msec, 30*msec, time.Second)}, nil},
		{"elections apart", []chaos.Section{lead(1, "redlock:election:a", 9, 0, 10*msec, time.Second), lead(2, "redlock:election:b", 4, 20*msec, 30*msec, time.Second)}, nil},
		{"locks are not leaderships", []chaos.Section{
			lead(1, e, 9, 0, 10*msec, time.Second),
			{Client: 2, Key: e, Fence: 4, Acquired: 20 * msec, Released: 30 * msec, Deadline: time.Second},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chaos.TermOrder(tt.secs)
			if len(got) != len(tt.want) {
				t.Fatalf("want %d violations, got %d: %v", len(tt.want), len(got), got)
			}
			for i, v := range got {
				if v.Kind != chaos.StaleTerm {
					t.Errorf("want kind %q, got %q", chaos.StaleTerm, v.Kind)
				}
				if terms := [2]int64{tt.secs[v.A].Fence, tt.secs[v.B].Fence}; terms != tt.want[i] {
					t.Errorf("violation %d: want terms %v, got %v (%v)", i, tt.want[i], terms, v)
				}
			}
			all := chaos.Check(chaos.History{Sections: tt.secs})
			n := 0
			for _, v := range all {
				if v.Kind == chaos.StaleTerm {
					n++
				}
			}
			if n != len(tt.want) {
				t.Errorf("want Check to report the %d stale terms, got %d: %v", len(tt.want), n, all)
			}
		})
	}
}

// TestFailoverAfter: the failover is measured to the first leader of the
// same election elected at or after the death, by another client.
func TestFailoverAfter(t *testing.T) {
	const e = "redlock:election:x"
	secs := []chaos.Section{
		lead(1, e, 1, 0, chaos.Never, 500*msec),                           // dies at 100ms
		lead(2, "redlock:election:y", 1, 200*msec, 300*msec, time.Second), // another election
		lead(1, e, 3, 900*msec, time.Second, 2*time.Second),               // the dead one again, later
		lead(3, e, 2, 700*msec, 800*msec, time.Second),
		lead(2, e, 2, 600*msec, 650*msec, 550*msec),                                            // returned after its deadline: never a leader
		{Client: 4, Key: e, Acquired: 150 * msec, Released: 160 * msec, Deadline: time.Second}, // a lock, not a leadership
	}
	if d, ok := chaos.FailoverAfter(secs, e, 1, 100*msec); !ok || d != 600*msec {
		t.Errorf("want 600ms, got %v (%v)", d, ok)
	}
	if d, ok := chaos.FailoverAfter(secs, e, 3, 950*msec); ok {
		t.Errorf("want no leader after 950ms, got one %v later", d)
	}
}
