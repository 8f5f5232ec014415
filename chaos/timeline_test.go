package chaos

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lab converts an sRGB colour "#rrggbb" to CIE L*a*b* (D65).
func lab(t *testing.T, hex string) [3]float64 {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimPrefix(hex, "#"), 16, 32)
	if err != nil || len(hex) != 7 {
		t.Fatalf("want a colour #rrggbb, got %q", hex)
	}
	lin := func(c uint64) float64 {
		x := float64(c) / 255
		if x <= 0.04045 {
			return x / 12.92
		}
		return math.Pow((x+0.055)/1.055, 2.4)
	}
	r, g, b := lin(v>>16&0xff), lin(v>>8&0xff), lin(v&0xff)
	x := (0.4124*r + 0.3576*g + 0.1805*b) / 0.95047
	y := 0.2126*r + 0.7152*g + 0.0722*b
	z := (0.0193*r + 0.1192*g + 0.9505*b) / 1.08883
	f := func(t float64) float64 {
		if t > 0.008856 {
			return math.Cbrt(t)
		}
		return 7.787*t + 16.0/116
	}
	return [3]float64{116*f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))}
}

// deltaE is the CIE76 distance of two colours: about 2.3 is the least a
// person notices side by side; 25 and more reads as another colour.
func deltaE(t *testing.T, a, b string) float64 {
	t.Helper()
	p, q := lab(t, a), lab(t, b)
	return math.Sqrt((p[0]-q[0])*(p[0]-q[0]) + (p[1]-q[1])*(p[1]-q[1]) + (p[2]-q[2])*(p[2]-q[2]))
}

// fullHistory has a mark of every kind the timeline draws: six clients'
// holds (one overlap, one past its deadline), every node state, a
// restart, a phase note, failed attempts of each colour, fenced writes
// of each kind.
func fullHistory() (History, []Violation) {
	ms := time.Millisecond
	h := History{
		Sections: []Section{
			{Client: 0, Key: "k", Fence: 1, Acquired: 0, Released: 40 * ms, Deadline: 100 * ms},
			{Client: 1, Key: "k", Fence: 2, Acquired: 20 * ms, Released: 60 * ms, Deadline: 120 * ms},   // overlaps client 0
			{Client: 2, Key: "k", Fence: 3, Acquired: 130 * ms, Released: 200 * ms, Deadline: 180 * ms}, // past its deadline
			{Client: 3, Key: "k", Fence: 4, Acquired: 210 * ms, Released: 230 * ms, Deadline: 300 * ms},
			{Client: 4, Key: "k", Fence: 5, Acquired: 240 * ms, Released: 260 * ms, Deadline: 300 * ms},
			{Client: 5, Key: "k", Fence: 6, Acquired: 270 * ms, Released: 290 * ms, Deadline: 350 * ms},
		},
		Attempts: []Attempt{
			{Client: 3, Key: "k", Start: 30 * ms, Reason: "contended"},
			{Client: 4, Key: "k", Start: 90 * ms, Reason: "unreachable"},
			{Client: 5, Key: "k", Start: 95 * ms, Reason: "canceled"},
		},
		Writes: []Write{
			{Client: 0, Key: "res:k", Fence: 1, Start: 10 * ms, End: 11 * ms, Accepted: true},
			{Client: 1, Key: "res:k", Fence: 1, Start: 30 * ms, End: 31 * ms, Accepted: true},
			{Client: 3, Key: "res:k", Fence: 2, Start: 215 * ms, End: 216 * ms},
		},
		Events: []Event{
			{At: 10 * ms, Node: 0, Kind: EventKill}, {At: 80 * ms, Node: 0, Kind: EventRestart},
			{At: 10 * ms, Node: 1, Kind: EventPause}, {At: 50 * ms, Node: 1, Kind: EventResume},
			{At: 100 * ms, Node: 2, Kind: EventSlow}, {At: 150 * ms, Node: 2, Kind: EventHeal},
			{At: 160 * ms, Node: 3, Kind: EventPartition}, {At: 190 * ms, Node: 3, Kind: EventHeal},
			{At: 200 * ms, Node: 4, Kind: EventSkew}, {At: 250 * ms, Node: 4, Kind: EventUnskew},
			{At: 120 * ms, Node: -1, Kind: EventNote, Detail: "phase two"},
		},
		End: 400 * ms,
	}
	return h, Check(h)
}

// demoHistory is what `redlock-lab demo` records: six workers take one
// key in turn without fencing, node 3 is killed and restarted, and
// attempts fail for contention and while the node is down; no overlap,
// no write, no other fault.
func demoHistory() History {
	ms := time.Millisecond
	h := History{
		Events: []Event{{At: 100 * ms, Node: 2, Kind: EventKill}, {At: 300 * ms, Node: 2, Kind: EventRestart}},
		End:    500 * ms,
	}
	for i := range 12 {
		at := time.Duration(i) * 40 * ms
		h.Sections = append(h.Sections, Section{Client: i % 6, Key: "redlock-demo", Acquired: at, Released: at + 30*ms, Deadline: at + 900*ms})
		h.Attempts = append(h.Attempts, Attempt{Client: (i + 1) % 6, Key: "redlock-demo", Start: at + 5*ms, Reason: "contended"})
	}
	h.Attempts = append(h.Attempts, Attempt{Client: 1, Key: "redlock-demo", Start: 150 * ms, Reason: "unreachable"})
	return h
}

// markColors are the colours with a meaning of their own: faults, ticks,
// marks, and the lanes the bars are drawn on.
var markColors = []string{colorViolation, colorOutage, colorContended, colorOtherFail, colorPause, colorSlow,
	colorPartition, colorSkew, colorRestart, colorAccepted, colorRejected, "#eef5ea", "#f7f7f7"}

// No client's colour is, or is near, a colour with another meaning: the
// demo drew a worker in the brown of a killed node, and others in the
// purple, teal and green of "partitioned", "clock skewed" and
// "accepted". Every swatch of a legend that shows every mark is checked
// too, and the clients' colours are told apart from each other.
func TestTimelineClientColorsFarFromMarks(t *testing.T) {
	const far = 30.0 // CIE76: another colour at a glance, not a shade
	h, found := fullHistory()
	legend := TimelineLegendFor(h, TimelineOptions{Nodes: 5, Found: found, OneBased: true})
	marks := append([]string(nil), markColors...)
	for _, e := range parseLegend(legend) {
		if e.class != "key" && e.color != "" && !slices.Contains(marks, e.color) {
			marks = append(marks, e.color)
		}
	}
	if n := len(parseLegend(legend)); n < 15 {
		t.Fatalf("want an entry per mark in the full legend, got %d:\n%s", n, legend)
	}
	for _, c := range clientColors {
		for _, m := range marks {
			if d := deltaE(t, c, m); d < far {
				t.Errorf("client colour %s is %.1f from %s, which means something else; want at least %.0f", c, d, m, far)
			}
		}
	}
	for i, a := range clientColors {
		for j, b := range clientColors[:i] {
			min := 12.0
			if i < 6 { // the demo's six workers, side by side
				min = 20
			}
			if d := deltaE(t, a, b); d < min {
				t.Errorf("clients %d and %d: colours %s and %s are %.1f apart, want at least %.0f", j, i, b, a, d, min)
			}
		}
	}
}

// legendEntries parses a legend into its entries: class, colour (swatch
// or text colour), label and count (-1 without).
type parsedEntry struct {
	class, color, label string
	count               int
}

var entryRe = regexp.MustCompile(`<span class="([a-z-]+)"(?: style="color:(#[0-9a-f]{6})")?>(?:<i class="sw" style="background:(#[0-9a-f]{6})[^"]*"></i>)?(?:&#9660; )?([^<]*?) ?(?:<b>(\d+)</b>)?</span>`)

func parseLegend(legend string) []parsedEntry {
	var out []parsedEntry
	for _, m := range entryRe.FindAllStringSubmatch(legend, -1) {
		e := parsedEntry{class: m[1], color: m[2] + m[3], label: m[4], count: -1}
		if m[5] != "" {
			e.count, _ = strconv.Atoi(m[5])
		}
		out = append(out, e)
	}
	return out
}

// checkLegendDrawn checks that every entry of legend is drawn in svg, and
// returns the entries by class.
func checkLegendDrawn(t *testing.T, legend, svg, client string) map[string][]parsedEntry {
	t.Helper()
	byClass := map[string][]parsedEntry{}
	for _, e := range parseLegend(legend) {
		byClass[e.class] = append(byClass[e.class], e)
		var drawn bool
		switch {
		case e.class == "key":
			drawn = strings.Contains(svg, `fill="`+e.color+`"><title>`+e.label+`, `) || strings.Contains(svg, `fill="`+e.color+`" stroke="`+colorViolation+`" stroke-width="2"><title>`+e.label+`, `)
		case strings.HasPrefix(e.class, "tick-"):
			drawn = e.count > 0 && strings.Count(svg, `stroke="`+e.color+`"/>`) == e.count
		case e.class == "lg-restart":
			drawn = strings.Contains(svg, `fill="`+colorRestart+`"><title>node `)
		case e.class == "lg-overlap":
			drawn = strings.Contains(svg, `fill="`+e.color+`" opacity="0.35"><title>overlap`)
		case e.class == "lg-tail":
			drawn = strings.Contains(svg, `stroke-dasharray="2,2"`)
		case e.class == "lg-accepted", e.class == "lg-rejected", e.class == "lg-stale":
			drawn = strings.Contains(svg, `z" fill="`+e.color+`"><title>write by `+client)
		case strings.HasPrefix(e.class, "lg-"): // a node state
			drawn = strings.Contains(svg, `fill="`+e.color+`"><title>node `)
		default:
			t.Errorf("legend entry of unknown class %q: %+v", e.class, e)
			continue
		}
		if !drawn {
			t.Errorf("legend lists %s %q (%s) but the timeline does not draw it", e.class, e.label, e.color)
		}
	}
	if strings.Contains(legend, "dashed lines mark each fault") != strings.Contains(svg, `stroke-dasharray="4,3"`) {
		t.Errorf("want the legend to mention fault lines exactly when the timeline draws them")
	}
	if strings.Contains(legend, "dotted lines mark the scenario's phases") != strings.Contains(svg, `stroke-dasharray="1,3"`) {
		t.Errorf("want the legend to mention phase lines exactly when the timeline draws them")
	}
	return byClass
}

// The demo's legend lists what its run drew and nothing else, with a key
// naming each worker in its bars' colour; the tooltips of holds taken
// without fencing carry no fence. Before, the legend listed paused,
// slow, partitioned, clock skewed, overlaps and fenced writes, none of
// which the demo has, no key said which colour was which worker, and
// every tooltip read "fence 0".
func TestTimelineLegendListsOnlyWhatOccurs(t *testing.T) {
	h := demoHistory()
	o := TimelineOptions{Nodes: 5, OneBased: true, Client: "worker"}
	legend, svg := TimelineLegendFor(h, o), TimelineSVG(h, o)
	byClass := checkLegendDrawn(t, legend, svg, "worker")

	for i, e := range byClass["key"] {
		if want := fmt.Sprintf("worker %d", i+1); e.label != want || e.color != clientColor(i) {
			t.Errorf("key entry %d: want %s in %s, got %s in %s", i, want, clientColor(i), e.label, e.color)
		}
	}
	if len(byClass["key"]) != 6 {
		t.Errorf("want a key entry for each of the 6 workers, got %d:\n%s", len(byClass["key"]), legend)
	}
	for _, want := range []string{"lg-kill", "lg-restart", "tick-contended", "tick-unreachable"} {
		if len(byClass[want]) != 1 {
			t.Errorf("want the legend entry %s once, got %d:\n%s", want, len(byClass[want]), legend)
		}
	}
	for _, absent := range []string{"paused", "slow", "partitioned", "clock skewed", "overlap (violation)", "dotted tail", "fenced writes", "other errors", "phases"} {
		if strings.Contains(legend, absent) {
			t.Errorf("want no %q in the legend of a run without it, got:\n%s", absent, legend)
		}
	}
	if strings.Contains(svg, "fence") {
		t.Errorf("want no fence in the tooltips of holds taken without fencing")
	}
	if !strings.Contains(svg, "<title>worker 1, safe 0.0ms to 30.0ms") {
		t.Errorf("want holds named by worker, without a fence")
	}

	// A run with every mark: the legend lists each, each is drawn, and
	// fenced holds show their fence.
	full, found := fullHistory()
	fo := TimelineOptions{Nodes: 5, Found: found, OneBased: true}
	legend, svg = TimelineLegendFor(full, fo), TimelineSVG(full, fo)
	byClass = checkLegendDrawn(t, legend, svg, "client")
	for _, want := range []string{"key", "lg-kill", "lg-pause", "lg-slow", "lg-partition", "lg-skew", "lg-restart", "lg-overlap", "lg-tail",
		"tick-contended", "tick-unreachable", "tick-other", "lg-accepted", "lg-rejected", "lg-stale"} {
		if len(byClass[want]) == 0 {
			t.Errorf("want a legend entry %s for the full run, got none:\n%s", want, legend)
		}
	}
	if !strings.Contains(svg, "<title>client 3, fence 3, safe") {
		t.Errorf("want a fenced hold's tooltip to show its fence")
	}
}
