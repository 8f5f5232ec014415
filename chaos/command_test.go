package chaos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed543a70bd/redlock/chaos"
)

func command(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := chaos.Command(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestCommandFlags(t *testing.T) {
	if code, out, _ := command(t, "--list"); code != 0 || !strings.Contains(out, "restart-no-guard") {
		t.Errorf("want --list to list the scenarios with exit 0, got %d:\n%s", code, out)
	}
	for _, args := range [][]string{{"--nope"}, {"--scenario", "nope"}, {"stray"}, {"--backend", "nope"}, {"--duration", "-1s"}} {
		if code, _, _ := command(t, args...); code != chaos.ExitUsage {
			t.Errorf("want exit %d for %v, got %d", chaos.ExitUsage, args, code)
		}
	}
}

// TestSelect: names are trimmed, empty ones (a trailing comma) skipped,
// the suite's order kept, and unknown ones named.
func TestSelect(t *testing.T) {
	all := strings.Join(chaos.Names(), ",")
	for _, tc := range []struct{ in, want string }{
		{"baseline,", "baseline"},
		{",baseline,,", "baseline"},
		{" pause , baseline", "baseline,pause"},
		{"", all},
		{",", all},
	} {
		scs, err := chaos.Select(strings.Split(tc.in, ","))
		if err != nil {
			t.Errorf("Select(%q): want no error, got %v", tc.in, err)
			continue
		}
		var got []string
		for _, s := range scs {
			got = append(got, s.Name)
		}
		if g := strings.Join(got, ","); g != tc.want {
			t.Errorf("Select(%q): want %s, got %s", tc.in, tc.want, g)
		}
	}
	_, err := chaos.Select([]string{"baseline", "", "nope", "zap"})
	if err == nil || !strings.Contains(err.Error(), "unknown scenario(s) nope, zap;") {
		t.Errorf(`want an error naming "nope, zap", got %v`, err)
	}
}

// TestCommandOutputs runs one short scenario through the CLI entry point
// and checks the JSON fields and the report.
func TestCommandOutputs(t *testing.T) {
	dir := t.TempDir()
	jsonFile, reportDir := filepath.Join(dir, "out.json"), filepath.Join(dir, "report")
	code, out, errOut := command(t, "--short", "--duration", "1s", "--scenario", "baseline", "--json", jsonFile, "--report", reportDir)
	if code != 0 {
		t.Fatalf("want exit 0, got %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "1 passed, 0 failed") {
		t.Errorf("want a summary, got:\n%s", out)
	}
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b, &got); err != nil || len(got) != 1 {
		t.Fatalf("want a JSON array of one object, got %v: %s", err, b)
	}
	for field, kind := range map[string]string{"scenario": "string", "expect": "string", "acquisitions": "number",
		"violations": "number", "p50_acquire_us": "number", "p99_acquire_us": "number", "pass": "bool"} {
		v, ok := got[0][field]
		switch {
		case !ok:
			t.Errorf("want field %q, got none", field)
		case kind == "string" && !isType[string](v), kind == "number" && !isType[float64](v), kind == "bool" && !isType[bool](v):
			t.Errorf("want %q to be a %s, got %T", field, kind, v)
		}
	}
	html, err := os.ReadFile(filepath.Join(reportDir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "<svg") || !strings.Contains(string(html), "baseline") {
		t.Errorf("want a report with an SVG timeline of baseline, got %d bytes", len(html))
	}
}

func isType[T any](v any) bool { _, ok := v.(T); return ok }

// TestTimelineMarksOverlaps draws a hand-made history with an overlap and
// a fault.
func TestTimelineMarksOverlaps(t *testing.T) {
	h := chaos.History{
		Sections: []chaos.Section{sec(1, "k", 0, 50*msec, 100*msec), sec(2, "k", 20*msec, 60*msec, 120*msec)},
		Events:   []chaos.Event{{At: 10 * msec, Node: 0, Kind: chaos.EventKill}, {At: 70 * msec, Node: 0, Kind: chaos.EventRestart}},
		End:      150 * time.Millisecond,
	}
	r := chaos.Result{Scenario: "hand-made", History: h, Found: chaos.Check(h)}
	svg := chaos.Timeline(r, 3)
	for _, want := range []string{"<svg", "node 0 kill", "overlap on", "client 2, safe"} {
		if !strings.Contains(svg, want) {
			t.Errorf("want the timeline to contain %q", want)
		}
	}
}

// TestTimelineOneBased numbers nodes and clients from 1, as the CLI does,
// while the history's indices stay 0-based.
func TestTimelineOneBased(t *testing.T) {
	h := chaos.History{
		Sections: []chaos.Section{sec(1, "k", 0, 50*msec, 100*msec), sec(2, "k", 20*msec, 60*msec, 120*msec)},
		Events:   []chaos.Event{{At: 10 * msec, Node: 0, Kind: chaos.EventKill}, {At: 70 * msec, Node: 0, Kind: chaos.EventRestart}},
		End:      150 * time.Millisecond,
	}
	svg := chaos.TimelineSVG(h, chaos.TimelineOptions{Nodes: 3, Found: chaos.Check(h), OneBased: true})
	for _, want := range []string{">node 1</text>", ">node 3</text>", "node 1 kill", "kill n1", "node 1 restarted at", "client 3, safe", "client 2 held [0.0ms, 50.0ms] and client 3 held"} {
		if !strings.Contains(svg, want) {
			t.Errorf("want the timeline to contain %q", want)
		}
	}
	for _, bad := range []string{">node 0</text>", "node 0 ", "client 1, safe", "fence 0"} {
		if strings.Contains(svg, bad) {
			t.Errorf("want no %q in a one-based timeline", bad)
		}
	}
}

// IsTerminal is false for /dev/null, a file and a pipe: none is a
// terminal, although /dev/null is a character device.
func TestIsTerminalNotDevNull(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if chaos.IsTerminal(null) {
		t.Errorf("want /dev/null not a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if chaos.IsTerminal(w) {
		t.Errorf("want a pipe not a terminal")
	}
}

// TestTimelineLegendCounts draws failed attempts of every reason and
// checks that the legend of that history (TimelineLegendFor) gives, for
// each kind of tick, the colour the timeline draws it in and the number
// of such ticks in the picture, and that contention, outage and
// violations have colours of their own: the demo drew contended attempts
// made while a node was down in the red of the killed node and of
// violations, under "unreachable".
func TestTimelineLegendCounts(t *testing.T) {
	att := func(client int, at time.Duration, reason string) chaos.Attempt {
		return chaos.Attempt{Client: client, Key: "k", Start: at, OK: reason == "", Reason: reason}
	}
	h := chaos.History{
		Sections: []chaos.Section{sec(0, "k", 0, 50*msec, 100*msec), sec(1, "k", 20*msec, 60*msec, 120*msec)},
		Attempts: []chaos.Attempt{
			att(0, 0, ""), att(1, 20*msec, ""),
			att(2, 30*msec, "contended"), att(2, 31*msec, "contended+unreachable"), att(3, 32*msec, "contended+unreachable"),
			att(2, 40*msec, "unreachable"),
			att(3, 50*msec, "canceled"), att(3, 51*msec, "expired"), att(3, 52*msec, "error: boom"), att(3, 53*msec, "not obtained"),
		},
		Events: []chaos.Event{{At: 10 * msec, Node: 1, Kind: chaos.EventKill}, {At: 70 * msec, Node: 1, Kind: chaos.EventRestart}},
		End:    150 * msec,
	}
	found := chaos.Check(h)
	if len(found) == 0 {
		t.Fatal("want the overlap found")
	}
	svg := chaos.TimelineSVG(h, chaos.TimelineOptions{Nodes: 2, Found: found, OneBased: true})
	legend := chaos.TimelineLegendFor(h, chaos.TimelineOptions{Nodes: 2, Found: found, OneBased: true})

	want := map[string]int{"contended": 3, "unreachable": 1, "other": 4}
	if c := chaos.CountFailed(h); c.Contended != want["contended"] || c.Unreachable != want["unreachable"] || c.Other != want["other"] {
		t.Errorf("CountFailed: want %v, got %+v", want, c)
	}
	colors := map[string]string{}
	for kind, n := range want {
		m := regexp.MustCompile(`<span class="tick-` + kind + `"><i class="sw" style="background:(#[0-9a-f]{6})"></i>[a-z ]+ <b>(\d+)</b></span>`).FindStringSubmatch(legend)
		if m == nil {
			t.Fatalf("want a legend entry for %s ticks with its colour and count, got:\n%s", kind, legend)
		}
		colors[kind] = m[1]
		if got, _ := strconv.Atoi(m[2]); got != n {
			t.Errorf("legend: want %d %s, got %d", n, kind, got)
		}
		if drawn := strings.Count(svg, `stroke="`+m[1]+`"/>`); drawn != n {
			t.Errorf("timeline: want %d ticks in %s (%s, as the legend says), got %d", n, m[1], kind, drawn)
		}
	}

	// The killed node's lane is in the outage colour, the one of the
	// unreachable ticks, and the overlap's red is the violations' alone.
	killed := regexp.MustCompile(`background:(#[0-9a-f]{6})"></i>killed`).FindStringSubmatch(legend)
	overlap := regexp.MustCompile(`background:(#[0-9a-f]{6});opacity:.35"></i>overlap`).FindStringSubmatch(legend)
	if killed == nil || overlap == nil {
		t.Fatalf("want legend entries for killed and overlap, got:\n%s", legend)
	}
	if killed[1] != colors["unreachable"] {
		t.Errorf("want killed (%s) in the colour of unreachable ticks (%s)", killed[1], colors["unreachable"])
	}
	if !strings.Contains(svg, `fill="`+killed[1]+`"><title>node 2 kill`) {
		t.Errorf("want node 2's kill drawn in %s", killed[1])
	}
	if !strings.Contains(svg, `fill="`+overlap[1]+`" opacity="0.35"><title>overlap`) {
		t.Errorf("want the overlap drawn in %s", overlap[1])
	}
	seen := map[string]string{}
	for what, c := range map[string]string{"contended": colors["contended"], "outage": killed[1], "other errors": colors["other"], "violations": overlap[1]} {
		if other, dup := seen[c]; dup {
			t.Errorf("want distinct colours, got %s for both %s and %s", c, what, other)
		}
		seen[c] = what
	}
}

// TestListNumbersNodesFromOne: --list, like every message of the CLI,
// numbers nodes from 1 (the first of five is node 1, the last node 5).
func TestListNumbersNodesFromOne(t *testing.T) {
	code, out, _ := command(t, "--list")
	if code != 0 {
		t.Fatalf("want exit 0, got %d", code)
	}
	if m := regexp.MustCompile(`\bnodes? 0\b|\bon 0,`).FindString(out); m != "" {
		t.Errorf("want nodes numbered from 1, got %q in:\n%s", m, out)
	}
	if !strings.Contains(out, "A holds the key on nodes 1-3 (4 and 5 are taken") {
		t.Errorf("want restart-no-guard's nodes numbered 1-5, got:\n%s", out)
	}
}
