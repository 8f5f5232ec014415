package chaos_test

import (
	"strings"
	"testing"
	"time"

	"github.com/seed543a70bd/redlock/chaos"
)

// fam builds a section of the given mode (and limit, for permits) on key,
// as sec does.
func fam(mode chaos.Mode, limit, client int, key string, acq, rel, dl time.Duration) chaos.Section {
	s := sec(client, key, acq, rel, dl)
	s.Mode, s.Limit = mode, limit
	return s
}

func rd(client int, key string, acq, rel time.Duration) chaos.Section {
	return fam(chaos.ModeRead, 0, client, key, acq, rel, time.Second)
}

func wrt(client int, key string, acq, rel time.Duration) chaos.Section {
	return fam(chaos.ModeWrite, 0, client, key, acq, rel, time.Second)
}

func path(client int, p string, acq, rel time.Duration) chaos.Section {
	return fam(chaos.ModePath, 0, client, p, acq, rel, time.Second)
}

func permit(client int, key string, limit int, acq, rel time.Duration) chaos.Section {
	return fam(chaos.ModePermit, limit, client, key, acq, rel, time.Second)
}

// TestOverlapsReadWrite: readers share a key, a writer (Mode "" or
// ModeWrite) excludes readers and writers; paths and permits are not
// locks of a key.
func TestOverlapsReadWrite(t *testing.T) {
	tests := []struct {
		name string
		secs []chaos.Section
		want int
	}{
		{"readers share", []chaos.Section{rd(1, "k", 0, 50*msec), rd(2, "k", 10*msec, 60*msec), rd(3, "k", 20*msec, 30*msec)}, 0},
		{"reader then writer", []chaos.Section{rd(1, "k", 0, 50*msec), wrt(2, "k", 40*msec, 60*msec)}, 1},
		{"writer then reader", []chaos.Section{wrt(1, "k", 0, 50*msec), rd(2, "k", 40*msec, 60*msec)}, 1},
		{"zero mode is a writer", []chaos.Section{sec(1, "k", 0, 50*msec, time.Second), rd(2, "k", 40*msec, 60*msec)}, 1},
		{"zero mode and write mode exclude each other", []chaos.Section{sec(1, "k", 0, 50*msec, time.Second), wrt(2, "k", 40*msec, 60*msec)}, 1},
		{"writer over three readers", []chaos.Section{
			rd(1, "k", 0, 100*msec), rd(2, "k", 10*msec, 100*msec), rd(3, "k", 20*msec, 100*msec), wrt(4, "k", 50*msec, 60*msec),
		}, 3},
		{"writer after readers, touching", []chaos.Section{rd(1, "k", 0, 50*msec), rd(2, "k", 10*msec, 50*msec), wrt(3, "k", 50*msec, 60*msec)}, 0},
		{"reader after writer, touching", []chaos.Section{wrt(1, "k", 0, 50*msec), rd(2, "k", 50*msec, 60*msec)}, 0},
		{"reader's deadline ends its window", []chaos.Section{
			fam(chaos.ModeRead, 0, 1, "k", 0, 500*msec, 100*msec), wrt(2, "k", 100*msec, 200*msec),
		}, 0},
		{"reader returned after its deadline", []chaos.Section{
			fam(chaos.ModeRead, 0, 1, "k", 50*msec, 90*msec, 40*msec), wrt(2, "k", 0, 100*msec),
		}, 0},
		{"reader and writer of different keys", []chaos.Section{rd(1, "a", 0, 50*msec), wrt(2, "b", 10*msec, 60*msec)}, 0},
		{"paths are not keys", []chaos.Section{path(1, "k", 0, 50*msec), path(2, "k", 10*msec, 60*msec), wrt(3, "k", 20*msec, 30*msec)}, 0},
		{"permits are not keys", []chaos.Section{permit(1, "k", 1, 0, 50*msec), permit(2, "k", 1, 10*msec, 60*msec), wrt(3, "k", 20*msec, 30*msec)}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chaos.Overlaps(tt.secs)
			if len(got) != tt.want {
				t.Fatalf("want %d overlaps, got %d: %v", tt.want, len(got), got)
			}
		})
	}
}

// TestPathOverlaps: related paths (same, ancestor, descendant) conflict by
// whole components. A checker that compared paths as strings (prefix or
// substring) would report the "unrelated" rows; one that split nothing
// would miss the "related" ones.
func TestPathOverlaps(t *testing.T) {
	tests := []struct {
		name string
		secs []chaos.Section
		want []string // the Keys of the violations found, in order
	}{
		{"a/b and a/bc share a prefix, not a folder", []chaos.Section{path(1, "a/b", 0, 50*msec), path(2, "a/bc", 10*msec, 60*msec)}, nil},
		{"a/bc and a/b", []chaos.Section{path(1, "a/bc", 0, 50*msec), path(2, "a/b", 10*msec, 60*msec)}, nil},
		{"a/b and a/b-1", []chaos.Section{path(1, "a/b", 0, 50*msec), path(2, "a/b-1", 10*msec, 60*msec)}, nil},
		{"a/b and a/.b", []chaos.Section{path(1, "a/b", 0, 50*msec), path(2, "a/.b", 10*msec, 60*msec)}, nil},
		{"a and ab", []chaos.Section{path(1, "a", 0, 50*msec), path(2, "ab", 10*msec, 60*msec)}, nil},
		{"a/b and x/a/b: a suffix, not a folder", []chaos.Section{path(1, "a/b", 0, 50*msec), path(2, "x/a/b", 10*msec, 60*msec)}, nil},
		{"siblings", []chaos.Section{path(1, "a/b", 0, 50*msec), path(2, "a/c", 10*msec, 60*msec)}, nil},
		{"a/b and its child a/b/c", []chaos.Section{path(1, "a/b", 0, 50*msec), path(2, "a/b/c", 10*msec, 60*msec)}, []string{"a/b"}},
		{"a/b/c and its ancestor a", []chaos.Section{path(1, "a/b/c", 0, 50*msec), path(2, "a", 10*msec, 60*msec)}, []string{"a"}},
		{"same path", []chaos.Section{path(1, "a/b", 0, 50*msec), path(2, "a/b", 10*msec, 60*msec)}, []string{"a/b"}},
		{"same path, normalized", []chaos.Section{path(1, "/a/b/", 0, 50*msec), path(2, "a/b", 10*msec, 60*msec)}, []string{"a/b"}},
		{"related, touching", []chaos.Section{path(1, "a", 0, 50*msec), path(2, "a/b", 50*msec, 60*msec)}, nil},
		{"related, deadline ends the window", []chaos.Section{
			fam(chaos.ModePath, 0, 1, "a", 0, 500*msec, 100*msec), path(2, "a/b", 100*msec, 200*msec),
		}, nil},
		{"related, never released", []chaos.Section{
			fam(chaos.ModePath, 0, 1, "a", 0, chaos.Never, 100*msec), path(2, "a/b", 99*msec, 200*msec),
		}, []string{"a"}},
		{"an ancestor over two sibling descendants", []chaos.Section{
			path(1, "r", 0, 100*msec), path(2, "r/x", 10*msec, 60*msec), path(3, "r/y/z", 20*msec, 60*msec), path(4, "rr", 20*msec, 60*msec),
		}, []string{"r", "r"}},
		{"a key lock is not a path", []chaos.Section{path(1, "a", 0, 50*msec), wrt(2, "a", 10*msec, 60*msec)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chaos.PathOverlaps(tt.secs)
			var keys []string
			for _, v := range got {
				if v.Kind != chaos.Overlap {
					t.Errorf("want kind %q, got %q", chaos.Overlap, v.Kind)
				}
				keys = append(keys, v.Key)
			}
			if strings.Join(keys, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("want violations on %q, got %q: %v", tt.want, keys, got)
			}
		})
	}
}

// TestPathOverlapsDetail: the message names both paths, and A and B index
// the sections given.
func TestPathOverlapsDetail(t *testing.T) {
	secs := []chaos.Section{path(2, "a/b/c", 10*msec, 60*msec), path(1, "a/b", 0, 50*msec)}
	got := chaos.PathOverlaps(secs)
	if len(got) != 1 {
		t.Fatalf("want 1 violation, got %v", got)
	}
	if got[0].A != 1 || got[0].B != 0 {
		t.Errorf("want A 1 (a/b, earlier) and B 0, got %d and %d", got[0].A, got[0].B)
	}
	if s := got[0].String(); !strings.Contains(s, `path "a/b" [0.0ms`) || !strings.Contains(s, `path "a/b/c" [10.0ms`) {
		t.Errorf("want both paths named, got %s", s)
	}
}

// TestOverLimits: at most Limit permits of one semaphore at any instant.
func TestOverLimits(t *testing.T) {
	tests := []struct {
		name string
		secs []chaos.Section
		want int
	}{
		{"empty", nil, 0},
		{"two of two", []chaos.Section{permit(1, "s", 2, 0, 50*msec), permit(2, "s", 2, 10*msec, 60*msec)}, 0},
		{"three of two", []chaos.Section{
			permit(1, "s", 2, 0, 50*msec), permit(2, "s", 2, 10*msec, 60*msec), permit(3, "s", 2, 20*msec, 70*msec),
		}, 1},
		{"three of two, never all at once", []chaos.Section{
			permit(1, "s", 2, 0, 50*msec), permit(2, "s", 2, 10*msec, 60*msec), permit(3, "s", 2, 50*msec, 70*msec),
		}, 0},
		{"three of two, pairwise overlapping, never all at once", []chaos.Section{
			permit(1, "s", 2, 0, 30*msec), permit(2, "s", 2, 20*msec, 60*msec), permit(3, "s", 2, 40*msec, 70*msec), permit(4, "s", 2, 65*msec, 80*msec),
		}, 0},
		{"four of two", []chaos.Section{
			permit(1, "s", 2, 0, 100*msec), permit(2, "s", 2, 10*msec, 100*msec), permit(3, "s", 2, 20*msec, 100*msec), permit(4, "s", 2, 30*msec, 100*msec),
		}, 2},
		{"limit 1 is a mutex", []chaos.Section{permit(1, "s", 1, 0, 50*msec), permit(2, "s", 1, 10*msec, 60*msec)}, 1},
		{"no limit counts as 1", []chaos.Section{permit(1, "s", 0, 0, 50*msec), permit(2, "s", 0, 10*msec, 60*msec)}, 1},
		{"the smallest limit counts", []chaos.Section{
			permit(1, "s", 3, 0, 50*msec), permit(2, "s", 3, 10*msec, 60*msec), permit(3, "s", 2, 20*msec, 70*msec),
		}, 1},
		{"different semaphores", []chaos.Section{permit(1, "s", 1, 0, 50*msec), permit(2, "t", 1, 10*msec, 60*msec)}, 0},
		{"deadline ends the window", []chaos.Section{
			fam(chaos.ModePermit, 1, 1, "s", 0, 500*msec, 100*msec), permit(2, "s", 1, 100*msec, 200*msec),
		}, 0},
		{"never released, deadline still counts", []chaos.Section{
			fam(chaos.ModePermit, 1, 1, "s", 0, chaos.Never, 100*msec), permit(2, "s", 1, 99*msec, 200*msec),
		}, 1},
		{"writers and readers are not permits", []chaos.Section{wrt(1, "s", 0, 50*msec), rd(2, "s", 10*msec, 60*msec), permit(3, "s", 1, 20*msec, 30*msec)}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chaos.OverLimits(tt.secs)
			if len(got) != tt.want {
				t.Fatalf("want %d over-limit violations, got %d: %v", tt.want, len(got), got)
			}
			for _, v := range got {
				if v.Kind != chaos.OverLimit {
					t.Errorf("want kind %q, got %q", chaos.OverLimit, v.Kind)
				}
			}
		})
	}
}

// TestOverLimitsWitness: B is the permit that went over, A the one held
// with it that ended first, and the message counts the holders.
func TestOverLimitsWitness(t *testing.T) {
	secs := []chaos.Section{
		permit(1, "s", 2, 0, 90*msec), permit(2, "s", 2, 10*msec, 40*msec), permit(3, "s", 2, 20*msec, 70*msec),
	}
	got := chaos.OverLimits(secs)
	if len(got) != 1 {
		t.Fatalf("want 1 violation, got %v", got)
	}
	if got[0].A != 1 || got[0].B != 2 {
		t.Errorf("want A 1 (ends first) and B 2 (went over), got %d and %d", got[0].A, got[0].B)
	}
	if s := got[0].String(); !strings.Contains(s, "3 permits held at 20.0ms, limit 2 (clients 1, 2, 3)") {
		t.Errorf("want the holders counted and named, got %s", s)
	}
}

// TestCheckFindsEveryKind: Check reports key overlaps, path overlaps,
// over-limit permits and stale fences, in that order.
func TestCheckFindsEveryKind(t *testing.T) {
	h := chaos.History{
		Sections: []chaos.Section{
			rd(1, "k", 0, 50*msec), wrt(2, "k", 20*msec, 60*msec),
			path(3, "p/q", 0, 50*msec), path(4, "p", 20*msec, 60*msec),
			permit(5, "s", 1, 0, 50*msec), permit(6, "s", 1, 20*msec, 60*msec),
		},
		Writes: []chaos.Write{wr(1, "r", 7, 0, msec, true), wr(2, "r", 7, 5*msec, 6*msec, true)},
	}
	got := chaos.Check(h)
	var kinds, keys []string
	for _, v := range got {
		kinds, keys = append(kinds, string(v.Kind)), append(keys, v.Key)
	}
	if k, want := strings.Join(kinds, ","), "overlap,overlap,over-limit,stale-fence"; k != want {
		t.Fatalf("want kinds %s, got %s: %v", want, k, got)
	}
	if k, want := strings.Join(keys, ","), "k,p,s,r"; k != want {
		t.Errorf("want keys %s, got %s", want, k)
	}
}

// TestTimelineMarksFamily draws a reader and a writer of one key and an
// over-limit semaphore: both violations are marked, and the bars say
// what was held.
func TestTimelineMarksFamily(t *testing.T) {
	h := chaos.History{
		Sections: []chaos.Section{
			rd(1, "k", 0, 50*msec), wrt(2, "k", 20*msec, 60*msec),
			permit(3, "s", 1, 0, 50*msec), permit(4, "s", 1, 20*msec, 60*msec),
		},
		End: 150 * time.Millisecond,
	}
	svg := chaos.Timeline(chaos.Result{Scenario: "hand-made", History: h, Found: chaos.Check(h)}, 1)
	for _, want := range []string{"overlap on &#34;k&#34;", "over-limit on &#34;s&#34;", "client 1, a read lock, safe", "client 3, a permit, safe", `stroke="#d62728"`} {
		if !strings.Contains(svg, want) {
			t.Errorf("want the timeline to contain %q", want)
		}
	}
}
