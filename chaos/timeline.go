package chaos

import (
	"fmt"
	"html"
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

// clientColors stay clear of the fault colors and of the red of overlaps.
var clientColors = []string{"#4e79a7", "#59a14f", "#b07aa1", "#76b7b2", "#9c755f", "#1f4e79", "#8c8c3c", "#bab0ac"}

// stateColors are the fills of node states in the node lanes.
var stateColors = map[EventKind]string{
	EventKill: "#d62728", EventPause: "#ff7f0e", EventSlow: "#e6c300",
	EventPartition: "#9467bd", EventSkew: "#17becf",
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
}

// Timeline returns r's history as an SVG document fragment with a lane
// for each of nodes nodes: TimelineSVG of r.History, marking r.Found,
// with nodes and clients numbered from 0.
func Timeline(r Result, nodes int) string {
	return TimelineSVG(r.History, TimelineOptions{Nodes: nodes, Found: r.Found})
}

// TimelineSVG returns h as an SVG document fragment (see the top of this
// file and TimelineLegend). WriteReport draws each scenario with it;
// `redlock demo` draws its run with it, so both reports read alike.
func TimelineSVG(h History, o TimelineOptions) string {
	base := 0
	if o.OneBased {
		base = 1
	}
	end := max(h.End, time.Millisecond)
	x := func(t time.Duration) float64 {
		return tlLeft + float64(min(max(t, 0), end))/float64(end)*(tlWidth-tlLeft-tlRight)
	}
	var b strings.Builder
	y := 28.0 // below the fault labels

	// Which sections and writes are part of a violation.
	badSec, badWrite := map[int]bool{}, map[int]bool{}
	for _, v := range o.Found {
		switch v.Kind {
		case Overlap, OverLimit:
			badSec[v.A], badSec[v.B] = true, true
		case StaleFence:
			badWrite[v.B] = true
		}
	}

	// Node lanes.
	for n := range o.Nodes {
		fmt.Fprintf(&b, `<text x="4" y="%.1f" class="lbl">node %d</text>`, y+tlRowH-2, n+base)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#eef5ea"/>`, tlLeft, y, tlWidth-tlLeft-tlRight, tlRowH)
		for _, s := range nodeStates(h.Events, n, end) {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>node %d %s %s: %s to %s</title></rect>`,
				x(s.from), y, math.Max(x(s.to)-x(s.from), 1), tlRowH, stateColors[s.kind], n+base, s.kind, html.EscapeString(s.detail), ms(s.from), ms(s.to))
		}
		for _, ev := range h.Events {
			if ev.Node == n && ev.Kind == EventRestart { // an instant: mark it
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="3" height="%.1f" fill="#222"><title>node %d restarted at %s: %s</title></rect>`,
					x(ev.At)-1, y, tlRowH, n+base, ms(ev.At), html.EscapeString(ev.Detail))
			}
		}
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
		fmt.Fprintf(&b, `<text x="4" y="%.1f" class="lbl">%s</text>`, y+tlRowH-2, html.EscapeString(trunc(k, 16)))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f7f7f7"/>`, tlLeft, y, tlWidth-tlLeft-tlRight, laneH)
		for j, i := range byKey[k] {
			s := h.Sections[i]
			ry := y + float64(rows[j])*tlRowH
			stroke := ""
			if badSec[i] {
				stroke = ` stroke="#d62728" stroke-width="2"`
			}
			fill := clientColors[s.Client%len(clientColors)]
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"%s><title>client %d%s, fence %d, safe %s to %s (deadline %s, released %s)</title></rect>`,
				x(s.Acquired), ry+1, math.Max(x(s.End())-x(s.Acquired), 1), tlRowH-2, fill, stroke,
				s.Client+base, html.EscapeString(strings.Replace(s.what(), " ", ", ", 1)), s.Fence, ms(s.Acquired), ms(s.End()), ms(s.Deadline), ms(s.Released))
			if s.Released != Never && s.Released > s.Deadline { // held past validity: not safe
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="2,2"/>`,
					x(s.Deadline), ry+tlRowH/2, x(s.Released), ry+tlRowH/2, fill)
			}
		}
		for _, v := range o.Found {
			if (v.Kind != Overlap && v.Kind != OverLimit) || v.Key != k {
				continue
			}
			a, c := h.Sections[v.A], h.Sections[v.B]
			from, to := max(a.Acquired, c.Acquired), min(a.End(), c.End())
			tip := v
			if v.Kind == Overlap {
				tip.Detail = overlapDetail(a, c, base) // clients numbered as in the rest of the picture
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#d62728" opacity="0.35"><title>%s</title></rect>`,
				x(from), y, math.Max(x(to)-x(from), 2), laneH-6, html.EscapeString(tip.String()))
		}
		ty := y + laneH - 5
		for _, a := range h.Attempts {
			if a.Key == k && !a.OK {
				c := "#bbbbbb"
				if strings.Contains(a.Reason, "unreachable") {
					c = "#e15759"
				}
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`, x(a.Start), ty, x(a.Start), ty+4, c)
			}
		}
		for i, w := range h.Writes {
			if strings.TrimPrefix(w.Key, "res:") != k {
				continue
			}
			c, what := "#2ca02c", "accepted"
			switch {
			case badWrite[i]:
				c, what = "#d62728", "accepted although stale"
			case !w.Accepted:
				c, what = "#555555", "rejected"
			}
			fmt.Fprintf(&b, `<path d="M%.1f %.1f l-3 -5 h6 z" fill="%s"><title>write by client %d with fence %d %s at %s</title></path>`,
				x(w.Start), y+float64(nrows)*tlRowH+3, c, w.Client+base, w.Fence, what, ms(w.Start))
		}
		y += laneH + 4
	}
	height := y + 22

	// Fault lines and labels, over everything, and the time axis.
	var top strings.Builder
	type label struct {
		x     float64
		kind  EventKind
		nodes []string
	}
	var labels []label
	for _, ev := range h.Events {
		if ev.Kind == EventNote {
			fmt.Fprintf(&top, `<line x1="%.1f" y1="20" x2="%.1f" y2="%.1f" stroke="#999" stroke-dasharray="1,3"><title>%s: %s</title></line>`,
				x(ev.At), x(ev.At), height-20, ms(ev.At), html.EscapeString(ev.Detail))
			continue
		}
		fmt.Fprintf(&top, `<line x1="%.1f" y1="20" x2="%.1f" y2="%.1f" stroke="#333" stroke-dasharray="4,3" opacity="0.5"><title>%s: node %d %s %s</title></line>`,
			x(ev.At), x(ev.At), height-20, ms(ev.At), ev.Node+base, ev.Kind, html.EscapeString(ev.Detail))
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
		fmt.Fprintf(&top, `<text x="%.1f" y="14" class="ev">%s</text>`, l.x+2, text)
		lastEnd = l.x + 6*float64(len(text)) + 6
	}
	step := axisStep(end)
	for t := time.Duration(0); t <= end; t += step {
		fmt.Fprintf(&top, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/><text x="%.1f" y="%.1f" class="ax">%gs</text>`,
			x(t), height-20, x(t), height-16, x(t)-6, height-5, t.Seconds())
	}
	return fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`, tlWidth, height, tlWidth, height) +
		`<style>.lbl{font:11px sans-serif}.ev{font:10px sans-serif;fill:#333}.ax{font:10px sans-serif}</style>` +
		b.String() + top.String() + `</svg>`
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
