package chaos

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"
	"time"
)

// Timeline draws one scenario's history as an SVG: a lane per node with
// its fault states (down, paused, slow, partitioned, skewed), then a lane
// per key with each holder's safe window as a bar (stacked when they
// overlap, overlaps in red), failed attempts and fenced writes as ticks,
// and every fault as a dashed line across the whole picture.

const (
	tlWidth   = 1100.0
	tlLeft    = 120.0 // label column
	tlRight   = 20.0
	tlRowH    = 12.0
	tlLaneGap = 10.0
)

// clientColors are the clients' bars (the demo's workers'): blues and
// pinks of lightnesses far apart, hues that no fault, tick or mark uses
// (the faults are red, brown, orange, yellow, purple and cyan, the marks
// green and greys), each at least 30 apart (CIE76 ΔE) from every colour
// below, so that no bar reads as a fault. The legend's key says which
// client each is.
var clientColors = []string{"#2166ac", "#e7298a", "#7fb2e5", "#8e1a5c", "#0b2e6f", "#de77ae", "#4361ee", "#b5179e"}

// Colours with one meaning each, shared by the timeline and its legend
// (TimelineLegendFor): red is for violations only, brown for an outage (a
// killed node, and the attempts that failed because nodes were
// unreachable), grey for contention.
const (
	colorViolation = "#d62728" // overlaps, a violating hold's outline, a stale write accepted
	colorOutage    = "#8c564b" // a killed node; attempts failed for unreachable nodes
	colorContended = "#bbbbbb" // attempts that found the lock held by another
	colorOtherFail = "#111111" // attempts that failed otherwise (cancelled, expired, an error)
	colorPause     = "#ff7f0e" // a paused node
	colorSlow      = "#e6c300" // a slowed node
	colorPartition = "#9467bd" // a partitioned node
	colorSkew      = "#17becf" // a node whose clock is skewed
	colorRestart   = "#222222" // a node's restart, an instant
	colorAccepted  = "#2ca02c" // a fenced write accepted
	colorRejected  = "#555555" // a fenced write rejected
)

// stateColors are the fills of node states in the node lanes.
var stateColors = map[EventKind]string{
	EventKill: colorOutage, EventPause: colorPause, EventSlow: colorSlow,
	EventPartition: colorPartition, EventSkew: colorSkew,
}

// FailedCounts counts a history's failed attempts by the tick TimelineSVG
// draws for each, so that a legend or a summary can give the same
// figures as the picture.
type FailedCounts struct {
	// Contended found the lock held by another holder (Reason
	// "contended", or "contended+unreachable": redlock.ErrContended,
	// whether or not some node was unreachable too). Grey ticks.
	Contended int
	// Unreachable failed because too few nodes answered, and none was
	// held by another (Reason "unreachable"). Brown ticks, the colour of
	// a killed node.
	Unreachable int
	// Other failed for any other reason: cancelled, expired, an error.
	// Black ticks.
	Other int
}

// CountFailed counts h's failed attempts as TimelineSVG draws them.
func CountFailed(h History) FailedCounts {
	var c FailedCounts
	for _, a := range h.Attempts {
		if a.OK {
			continue
		}
		switch failColor(a.Reason) {
		case colorContended:
			c.Contended++
		case colorOutage:
			c.Unreachable++
		default:
			c.Other++
		}
	}
	return c
}

// failColor is the colour of a failed attempt's tick, by its Reason (see
// reasonOf and FailedCounts).
func failColor(reason string) string {
	switch reason {
	case "contended", "contended+unreachable":
		return colorContended
	case "unreachable":
		return colorOutage
	}
	return colorOtherFail
}

// stateEnds pairs each state-opening event with the events that close it.
var stateEnds = map[EventKind][]EventKind{
	EventKill: {EventRestart}, EventPause: {EventResume, EventKill, EventRestart},
	EventSlow: {EventHeal}, EventPartition: {EventHeal}, EventSkew: {EventUnskew},
}

type span struct {
	from, to time.Duration
	kind     EventKind
	detail   string
}

// nodeStates turns a node's events into state spans.
func nodeStates(events []Event, node int, end time.Duration) []span {
	open := map[EventKind]*span{}
	var out []span
	for _, ev := range events {
		if ev.Node != node {
			continue
		}
		for k, s := range open {
			for _, closer := range stateEnds[k] {
				if ev.Kind == closer {
					s.to = ev.At
					out = append(out, *s)
					delete(open, k)
				}
			}
		}
		if _, ok := stateEnds[ev.Kind]; ok {
			if _, already := open[ev.Kind]; !already {
				open[ev.Kind] = &span{from: ev.At, kind: ev.Kind, detail: ev.Detail}
			}
		}
	}
	for _, s := range open {
		s.to = end
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].from < out[j].from })
	return out
}

// TimelineOptions says what TimelineSVG draws besides the history.
type TimelineOptions struct {
	// Nodes is the number of node lanes, one per node whether or not it
	// had a fault; events about other nodes are still drawn as lines.
	// Default: 0, no node lanes.
	Nodes int
	// Found are the violations to mark: overlapping windows in red,
	// stale fenced writes as red triangles. Their indices refer to the
	// history's Sections and Writes. Default: none.
	Found []Violation
	// OneBased numbers nodes and clients from 1 in labels and tooltips,
	// as the redlock CLI does; node index 0 reads "node 1". Default:
	// false: numbered from 0, as the chaos suite's scenarios and errors
	// name them. The indices in the History are 0-based either way.
	OneBased bool
	// Client is what a client is called in tooltips and in the legend's
	// key: `redlock-lab demo` says "worker". Default: "client".
	Client string
}

// client returns o.Client or its default.
func (o TimelineOptions) client() string {
	if o.Client == "" {
		return "client"
	}
	return o.Client
}

// Timeline returns r's history as an SVG document fragment with a lane
// for each of nodes nodes: TimelineSVG of r.History, marking r.Found,
// with nodes and clients numbered from 0.
func Timeline(r Result, nodes int) string {
	return TimelineSVG(r.History, TimelineOptions{Nodes: nodes, Found: r.Found})
}

// TimelineSVG returns h as an SVG document fragment (see the top of this
// file and TimelineLegendFor). WriteReport draws each scenario with it;
// `redlock-lab demo` draws its run with it, so both reports read alike. It is
// written with html/template, which escapes every text the history
// quotes (keys, event details), so the fragment is safe to embed as is.
func TimelineSVG(h History, o TimelineOptions) string {
	var b strings.Builder
	if err := timelineTmpl.Execute(&b, timelineView(h, o)); err != nil {
		// The template is fixed and its data are plain values: an error
		// is a bug in this file, not in h.
		panic("chaos: timeline template: " + err.Error())
	}
	return b.String()
}

// The timeline's template: what it draws, in order, is the node lanes,
// the key lanes, then over them the fault lines, their labels and the
// time axis. Newlines in the source are dropped (see oneLine); every
// title and label is plain text that the template escapes.
var timelineTmpl = template.Must(template.New("timeline").Funcs(template.FuncMap{
	"f0": func(v float64) string { return fmt.Sprintf("%.0f", v) },
	"f1": func(v float64) string { return fmt.Sprintf("%.1f", v) },
}).Parse(oneLine(`
<svg xmlns="http://www.w3.org/2000/svg" width="{{f0 .W}}" height="{{f0 .H}}" viewBox="0 0 {{f0 .W}} {{f0 .H}}">
<style>.lbl{font:11px sans-serif}.ev{font:10px sans-serif;fill:#333}.ax{font:10px sans-serif}</style>
{{range .Nodes}}
	<text x="4" y="{{f1 .LabelY}}" class="lbl">{{.Label}}</text>
	<rect x="{{f1 .Lane.X}}" y="{{f1 .Lane.Y}}" width="{{f1 .Lane.W}}" height="{{f1 .Lane.H}}" fill="#eef5ea"/>
	{{range .States}}
		<rect x="{{f1 .X}}" y="{{f1 .Y}}" width="{{f1 .W}}" height="{{f1 .H}}" fill="{{.Fill}}"><title>{{.Title}}</title></rect>
	{{end}}
	{{range .Restarts}}
		<rect x="{{f1 .X}}" y="{{f1 .Y}}" width="3" height="{{f1 .H}}" fill="` + colorRestart + `"><title>{{.Title}}</title></rect>
	{{end}}
{{end}}
{{range .Keys}}
	<text x="4" y="{{f1 .LabelY}}" class="lbl">{{.Label}}</text>
	<rect x="{{f1 .Lane.X}}" y="{{f1 .Lane.Y}}" width="{{f1 .Lane.W}}" height="{{f1 .Lane.H}}" fill="#f7f7f7"/>
	{{range .Holds}}
		<rect x="{{f1 .X}}" y="{{f1 .Y}}" width="{{f1 .W}}" height="{{f1 .H}}" fill="{{.Fill}}"
		{{- if .Bad}} stroke="` + colorViolation + `" stroke-width="2"{{end}}><title>{{.Title}}</title></rect>
		{{with .Tail}}
			<line x1="{{f1 .X1}}" y1="{{f1 .Y1}}" x2="{{f1 .X2}}" y2="{{f1 .Y2}}" stroke="{{.Stroke}}" stroke-dasharray="2,2"/>
		{{end}}
	{{end}}
	{{range .Overlaps}}
		<rect x="{{f1 .X}}" y="{{f1 .Y}}" width="{{f1 .W}}" height="{{f1 .H}}" fill="` + colorViolation + `" opacity="0.35"><title>{{.Title}}</title></rect>
	{{end}}
	{{range .Failed}}
		<line x1="{{f1 .X1}}" y1="{{f1 .Y1}}" x2="{{f1 .X2}}" y2="{{f1 .Y2}}" stroke="{{.Stroke}}"/>
	{{end}}
	{{range .Writes}}
		<path d="M{{f1 .X}} {{f1 .Y}} l-3 -5 h6 z" fill="{{.Fill}}"><title>{{.Title}}</title></path>
	{{end}}
{{end}}
{{range .Events}}
	{{if .Note}}
		<line x1="{{f1 .X1}}" y1="20" x2="{{f1 .X2}}" y2="{{f1 .Y2}}" stroke="#999" stroke-dasharray="1,3"><title>{{.Title}}</title></line>
	{{else}}
		<line x1="{{f1 .X1}}" y1="20" x2="{{f1 .X2}}" y2="{{f1 .Y2}}" stroke="#333" stroke-dasharray="4,3" opacity="0.5"><title>{{.Title}}</title></line>
	{{end}}
{{end}}
{{range .Labels}}
	<text x="{{f1 .X}}" y="14" class="ev">{{.Text}}</text>
{{end}}
{{range .Ticks}}
	<line x1="{{f1 .X}}" y1="{{f1 .Y1}}" x2="{{f1 .X}}" y2="{{f1 .Y2}}" stroke="#333"/>
	<text x="{{f1 .TextX}}" y="{{f1 .TextY}}" class="ax">{{.Text}}</text>
{{end}}
</svg>`)))

// oneLine drops the newlines and the tabs that start lines in a
// template's source, which are there to be read, so that the output is
// as compact as the markup it replaced.
func oneLine(src string) string {
	var b strings.Builder
	for _, l := range strings.Split(src, "\n") {
		b.WriteString(strings.TrimLeft(l, "\t"))
	}
	return b.String()
}

// The timeline's data, in the order drawn: every text in it is plain and
// escaped by timelineTmpl.
type (
	tlView struct {
		W, H   float64
		Nodes  []tlNodeLane
		Keys   []tlKeyLane
		Events []tlLine // fault and note lines, across the picture
		Labels []tlText // fault labels, above it
		Ticks  []tlTick // the time axis
	}
	tlNodeLane struct {
		LabelY   float64
		Label    string
		Lane     tlRect
		States   []tlRect
		Restarts []tlRect
	}
	tlKeyLane struct {
		LabelY   float64
		Label    string
		Lane     tlRect
		Holds    []tlHold
		Overlaps []tlRect
		Failed   []tlLine // failed attempts
		Writes   []tlMark // fenced writes
	}
	tlRect struct {
		X, Y, W, H  float64
		Fill, Title string
		kind        EventKind // a node state's, for the legend
	}
	tlHold struct {
		tlRect
		Bad    bool    // part of a violation
		Tail   *tlLine // held past its deadline, or nil
		client int     // whose, for the legend's key
	}
	tlLine struct {
		X1, Y1, X2, Y2 float64
		Stroke, Title  string
		Note           bool // a scenario's phase marker, not a fault
	}
	tlMark struct {
		X, Y        float64
		Fill, Title string
	}
	tlText struct {
		X    float64
		Text string
	}
	tlTick struct {
		X, Y1, Y2, TextX, TextY float64
		Text                    string
	}
)

// timelineView lays h out for timelineTmpl.
func timelineView(h History, o TimelineOptions) tlView {
	base := 0
	if o.OneBased {
		base = 1
	}
	end := max(h.End, time.Millisecond)
	x := func(t time.Duration) float64 {
		return tlLeft + float64(min(max(t, 0), end))/float64(end)*(tlWidth-tlLeft-tlRight)
	}
	var out tlView
	y := 28.0 // below the fault labels

	// Which sections and writes are part of a violation.
	badSec, badWrite := map[int]bool{}, map[int]bool{}
	for _, v := range o.Found {
		switch v.Kind {
		case Overlap, OverLimit, StaleTerm:
			badSec[v.A], badSec[v.B] = true, true
		case StaleFence:
			badWrite[v.B] = true
		}
	}

	// Node lanes.
	for n := range o.Nodes {
		lane := tlNodeLane{
			LabelY: y + tlRowH - 2, Label: fmt.Sprintf("node %d", n+base),
			Lane: tlRect{X: tlLeft, Y: y, W: tlWidth - tlLeft - tlRight, H: tlRowH},
		}
		for _, s := range nodeStates(h.Events, n, end) {
			lane.States = append(lane.States, tlRect{
				X: x(s.from), Y: y, W: math.Max(x(s.to)-x(s.from), 1), H: tlRowH, Fill: stateColors[s.kind], kind: s.kind,
				Title: fmt.Sprintf("node %d %s %s: %s to %s", n+base, s.kind, s.detail, ms(s.from), ms(s.to)),
			})
		}
		for _, ev := range h.Events {
			if ev.Node == n && ev.Kind == EventRestart { // an instant: mark it
				lane.Restarts = append(lane.Restarts, tlRect{
					X: x(ev.At) - 1, Y: y, H: tlRowH,
					Title: fmt.Sprintf("node %d restarted at %s: %s", n+base, ms(ev.At), ev.Detail),
				})
			}
		}
		out.Nodes = append(out.Nodes, lane)
		y += tlRowH + 2
	}
	y += tlLaneGap

	// Key lanes.
	byKey := map[string][]int{}
	var keys []string
	for i, s := range h.Sections {
		if _, ok := byKey[s.Key]; !ok {
			keys = append(keys, s.Key)
		}
		byKey[s.Key] = append(byKey[s.Key], i)
	}
	sort.Strings(keys)
	for _, k := range keys {
		rows := stack(h.Sections, byKey[k])
		nrows := 1
		for _, r := range rows {
			nrows = max(nrows, r+1)
		}
		laneH := float64(nrows)*tlRowH + 8
		lane := tlKeyLane{
			LabelY: y + tlRowH - 2, Label: trunc(k, 16),
			Lane: tlRect{X: tlLeft, Y: y, W: tlWidth - tlLeft - tlRight, H: laneH},
		}
		for j, i := range byKey[k] {
			s := h.Sections[i]
			ry := y + float64(rows[j])*tlRowH
			fill := clientColor(s.Client)
			fence := "" // fencing off: no token to show
			if s.Fence > 0 {
				fence = fmt.Sprintf(", fence %d", s.Fence)
			}
			hold := tlHold{
				tlRect: tlRect{
					X: x(s.Acquired), Y: ry + 1, W: math.Max(x(s.End())-x(s.Acquired), 1), H: tlRowH - 2, Fill: fill,
					Title: fmt.Sprintf("%s %d%s%s, safe %s to %s (deadline %s, released %s)",
						o.client(), s.Client+base, strings.Replace(s.what(), " ", ", ", 1), fence, ms(s.Acquired), ms(s.End()), ms(s.Deadline), ms(s.Released)),
				},
				Bad: badSec[i], client: s.Client,
			}
			if s.Released != Never && s.Released > s.Deadline { // held past validity: not safe
				hold.Tail = &tlLine{X1: x(s.Deadline), Y1: ry + tlRowH/2, X2: x(s.Released), Y2: ry + tlRowH/2, Stroke: fill}
			}
			lane.Holds = append(lane.Holds, hold)
		}
		for _, v := range o.Found {
			if (v.Kind != Overlap && v.Kind != OverLimit) || v.Key != k {
				continue
			}
			a, c := h.Sections[v.A], h.Sections[v.B]
			from, to := max(a.Acquired, c.Acquired), min(a.End(), c.End())
			tip := v
			if v.Kind == Overlap {
				tip.Detail = overlapDetail(a, c, base, o.client()) // clients named as in the rest of the picture
			}
			lane.Overlaps = append(lane.Overlaps, tlRect{X: x(from), Y: y, W: math.Max(x(to)-x(from), 2), H: laneH - 6, Title: tip.String()})
		}
		ty := y + laneH - 5
		for _, a := range h.Attempts {
			if a.Key == k && !a.OK {
				lane.Failed = append(lane.Failed, tlLine{X1: x(a.Start), Y1: ty, X2: x(a.Start), Y2: ty + 4, Stroke: failColor(a.Reason)})
			}
		}
		for i, w := range h.Writes {
			if strings.TrimPrefix(w.Key, "res:") != k {
				continue
			}
			c, what := colorAccepted, "accepted"
			switch {
			case badWrite[i]:
				c, what = colorViolation, "accepted although stale"
			case !w.Accepted:
				c, what = colorRejected, "rejected"
			}
			lane.Writes = append(lane.Writes, tlMark{
				X: x(w.Start), Y: y + float64(nrows)*tlRowH + 3, Fill: c,
				Title: fmt.Sprintf("write by %s %d with fence %d %s at %s", o.client(), w.Client+base, w.Fence, what, ms(w.Start)),
			})
		}
		out.Keys = append(out.Keys, lane)
		y += laneH + 4
	}
	height := y + 22
	out.W, out.H = tlWidth, height

	// Fault lines and labels, over everything, and the time axis.
	type label struct {
		x     float64
		kind  EventKind
		nodes []string
	}
	var labels []label
	for _, ev := range h.Events {
		line := tlLine{X1: x(ev.At), X2: x(ev.At), Y2: height - 20}
		if ev.Kind == EventNote {
			line.Note, line.Title = true, fmt.Sprintf("%s: %s", ms(ev.At), ev.Detail)
			out.Events = append(out.Events, line)
			continue
		}
		line.Title = fmt.Sprintf("%s: node %d %s %s", ms(ev.At), ev.Node+base, ev.Kind, ev.Detail)
		out.Events = append(out.Events, line)
		// Events of one kind close together share a label: "kill n0,1,2".
		if n := len(labels); n > 0 && labels[n-1].kind == ev.Kind && x(ev.At)-labels[n-1].x < 40 {
			labels[n-1].nodes = append(labels[n-1].nodes, fmt.Sprint(ev.Node+base))
			continue
		}
		labels = append(labels, label{x: x(ev.At), kind: ev.Kind, nodes: []string{fmt.Sprint(ev.Node + base)}})
	}
	lastEnd := -100.0
	for _, l := range labels {
		if l.x < lastEnd {
			continue // would overwrite the previous label; the line's tooltip remains
		}
		text := fmt.Sprintf("%s n%s", l.kind, strings.Join(l.nodes, ","))
		out.Labels = append(out.Labels, tlText{X: l.x + 2, Text: text})
		lastEnd = l.x + 6*float64(len(text)) + 6
	}
	step := axisStep(end)
	for t := time.Duration(0); t <= end; t += step {
		out.Ticks = append(out.Ticks, tlTick{
			X: x(t), Y1: height - 20, Y2: height - 16, TextX: x(t) - 6, TextY: height - 5,
			Text: fmt.Sprintf("%gs", t.Seconds()),
		})
	}
	return out
}

// clientColor is client i's colour: the palette's, in turn.
func clientColor(i int) string {
	return clientColors[((i%len(clientColors))+len(clientColors))%len(clientColors)]
}

// stack assigns each section (by index into secs) the lowest row free at
// its start, so that overlapping windows are drawn one above the other.
func stack(secs []Section, idx []int) []int {
	rows := make([]int, len(idx))
	var ends []time.Duration
	for j, i := range idx {
		s := secs[i]
		r := 0
		for ; r < len(ends) && ends[r] > s.Acquired; r++ {
		}
		if r == len(ends) {
			ends = append(ends, 0)
		}
		ends[r], rows[j] = max(s.End(), s.Acquired), r
	}
	return rows
}

// axisStep picks a tick spacing giving about ten ticks.
func axisStep(end time.Duration) time.Duration {
	for _, s := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second} {
		if end/s <= 12 {
			return s
		}
	}
	return time.Minute
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
