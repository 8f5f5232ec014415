package chaos_test

import (
	"testing"
	"time"

	"github.com/seed543a70bd/redlock/chaos"
)

const msec = time.Millisecond

// sec builds a section of key held by client over [acq, min(rel, dl)].
func sec(client int, key string, acq, rel, dl time.Duration) chaos.Section {
	return chaos.Section{Client: client, Key: key, Attempt: acq - msec, Acquired: acq, Released: rel, Deadline: dl}
}

func TestOverlaps(t *testing.T) {
	tests := []struct {
		name string
		secs []chaos.Section
		want int
	}{
		{"empty", nil, 0},
		{"one holder", []chaos.Section{sec(1, "k", 0, 10*msec, 100*msec)}, 0},
		{"overlap", []chaos.Section{
			sec(1, "k", 0, 50*msec, 100*msec),
			sec(2, "k", 40*msec, 60*msec, 140*msec),
		}, 1},
		{"overlap listed out of order", []chaos.Section{
			sec(2, "k", 40*msec, 60*msec, 140*msec),
			sec(1, "k", 0, 50*msec, 100*msec),
		}, 1},
		{"touching is not overlapping", []chaos.Section{
			sec(1, "k", 0, 50*msec, 100*msec),
			sec(2, "k", 50*msec, 80*msec, 150*msec),
		}, 0},
		{"different keys", []chaos.Section{
			sec(1, "a", 0, 50*msec, 100*msec),
			sec(2, "b", 10*msec, 60*msec, 110*msec),
		}, 0},
		{"deadline ends the window before release", []chaos.Section{
			sec(1, "k", 0, 500*msec, 100*msec), // released late: only [0,100] was safe
			sec(2, "k", 100*msec, 200*msec, 300*msec),
		}, 0},
		{"never released, deadline still counts", []chaos.Section{
			sec(1, "k", 0, chaos.Never, 100*msec),
			sec(2, "k", 99*msec, 200*msec, 300*msec),
		}, 1},
		{"empty window overlaps nothing", []chaos.Section{
			sec(1, "k", 0, 100*msec, 200*msec),
			sec(2, "k", 50*msec, 90*msec, 40*msec), // returned after its deadline
		}, 0},
		{"same start", []chaos.Section{
			sec(1, "k", 10*msec, 20*msec, 100*msec),
			sec(2, "k", 10*msec, 20*msec, 100*msec),
		}, 1},
		{"one long holder overlaps two", []chaos.Section{
			sec(1, "k", 0, 100*msec, 200*msec),
			sec(2, "k", 10*msec, 20*msec, 200*msec),
			sec(3, "k", 30*msec, 40*msec, 200*msec),
		}, 2},
		{"chain without overlap", []chaos.Section{
			sec(1, "k", 0, 10*msec, 100*msec),
			sec(2, "k", 10*msec, 20*msec, 100*msec),
			sec(3, "k", 20*msec, 30*msec, 100*msec),
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chaos.Overlaps(tt.secs)
			if len(got) != tt.want {
				t.Fatalf("want %d overlaps, got %d: %v", tt.want, len(got), got)
			}
			for _, v := range got {
				if v.Kind != chaos.Overlap {
					t.Errorf("want kind %q, got %q", chaos.Overlap, v.Kind)
				}
			}
		})
	}
}

func wr(client int, key string, fence int64, start, end time.Duration, accepted bool) chaos.Write {
	return chaos.Write{Client: client, Key: key, Fence: fence, Start: start, End: end, Accepted: accepted}
}

func TestStaleFences(t *testing.T) {
	tests := []struct {
		name   string
		writes []chaos.Write
		want   int
	}{
		{"empty", nil, 0},
		{"increasing", []chaos.Write{
			wr(1, "r", 1, 0, msec, true),
			wr(2, "r", 2, 2*msec, 3*msec, true),
			wr(3, "r", 5, 4*msec, 5*msec, true),
		}, 0},
		{"stale accepted", []chaos.Write{
			wr(1, "r", 2, 0, msec, true),
			wr(2, "r", 1, 2*msec, 3*msec, true),
		}, 1},
		{"equal accepted later", []chaos.Write{
			wr(1, "r", 2, 0, msec, true),
			wr(2, "r", 2, 2*msec, 3*msec, true),
		}, 1},
		{"equal accepted concurrently", []chaos.Write{
			wr(1, "r", 2, 0, 2*msec, true),
			wr(2, "r", 2, msec, 3*msec, true),
		}, 1},
		{"stale rejected is fine", []chaos.Write{
			wr(1, "r", 2, 0, msec, true),
			wr(2, "r", 1, 2*msec, 3*msec, false),
		}, 0},
		{"concurrent writes in either order", []chaos.Write{
			wr(1, "r", 2, 0, 3*msec, true),
			wr(2, "r", 1, msec, 2*msec, true), // overlaps in time: the resource may have taken it first
		}, 0},
		{"different keys", []chaos.Write{
			wr(1, "a", 2, 0, msec, true),
			wr(2, "b", 1, 2*msec, 3*msec, true),
		}, 0},
		{"stale after a higher one, not the last", []chaos.Write{
			wr(1, "r", 5, 0, msec, true),
			wr(2, "r", 3, 2*msec, 3*msec, true),
			wr(3, "r", 4, 4*msec, 5*msec, true),
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chaos.StaleFences(tt.writes)
			if len(got) != tt.want {
				t.Fatalf("want %d stale fences, got %d: %v", tt.want, len(got), got)
			}
		})
	}
}

func TestCheckFindsBoth(t *testing.T) {
	h := chaos.History{
		Sections: []chaos.Section{sec(1, "k", 0, 50*msec, 100*msec), sec(2, "k", 20*msec, 60*msec, 120*msec)},
		Writes:   []chaos.Write{wr(1, "r", 7, 0, msec, true), wr(2, "r", 7, 5*msec, 6*msec, true)},
	}
	got := chaos.Check(h)
	if len(got) != 2 || got[0].Kind != chaos.Overlap || got[1].Kind != chaos.StaleFence {
		t.Fatalf("want one overlap and one stale fence, got %v", got)
	}
	if got[0].A != 0 || got[0].B != 1 {
		t.Errorf("want the overlap between sections 0 and 1, got %d and %d", got[0].A, got[0].B)
	}
}
