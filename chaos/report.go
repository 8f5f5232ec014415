package chaos

import (
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// WriteReport writes dir/index.html: a summary table and, per scenario,
// what it does, its verdict, and an SVG timeline of its history (see
// Timeline). dir is created if needed.
func WriteReport(dir string, results []Result) error {
	docs := map[string]string{}
	for _, s := range Scenarios() {
		docs[s.Name] = s.Doc
	}
	return writeReport(dir, results, docs, time.Now())
}

// writeReport is WriteReport with the scenarios' docs by name and the
// time the report is of.
func writeReport(dir string, results []Result, docs map[string]string, now time.Time) error {
	type row struct {
		Result
		Doc, P50, P99, Seconds string
		Legend, SVG            template.HTML
	}
	data := struct {
		Now            string
		Passed, Failed int
		Results        []row
	}{Now: now.Format(time.RFC3339)}
	for _, r := range results {
		o := TimelineOptions{Nodes: r.Nodes, Found: r.Found, OneBased: true}
		if r.Pass {
			data.Passed++
		} else {
			data.Failed++
		}
		data.Results = append(data.Results, row{
			Result: r, Doc: docs[r.Scenario],
			P50: usString(r.P50AcquireUS), P99: usString(r.P99AcquireUS), Seconds: fmt.Sprintf("%.1fs", r.Seconds),
			// Written with html/template, which escapes what it quotes.
			Legend: template.HTML(TimelineLegendFor(r.History, o)),
			SVG:    template.HTML(TimelineSVG(r.History, o)),
		})
	}
	var b strings.Builder
	if err := reportTmpl.Execute(&b, data); err != nil {
		return err
	}
	return writePage(dir, "redlock chaos report", template.HTML(b.String()))
}

// reportTmpl is the body of WriteReport's page; newlines in its source
// are dropped (see oneLine).
var reportTmpl = template.Must(template.New("report").Parse(oneLine(`
{{define "verdict"}}{{if .}}<span class="pass">pass</span>{{else}}<span class="fail">FAIL</span>{{end}}{{end}}
<p>{{.Now}} &middot; {{len .Results}} scenarios: {{.Passed}} passed, {{.Failed}} failed.</p>
<table><tr><th>scenario</th><th>expect</th><th>result</th><th>acquisitions</th><th>violations</th><th>p50 acquire</th><th>p99 acquire</th><th>faults</th><th>time</th></tr>
{{range .Results}}
	<tr><td><a href="#{{.Scenario}}">{{.Scenario}}</a></td><td>{{.Expect}}</td><td>{{template "verdict" .Pass}}</td>
	<td>{{.Acquisitions}}</td><td>{{.Violations}}</td><td>{{.P50}}</td><td>{{.P99}}</td><td>{{.Faults}}</td><td>{{.Seconds}}</td></tr>
{{end}}
</table>
{{range .Results}}
	<section id="{{.Scenario}}"><h2>{{.Scenario}} {{template "verdict" .Pass}}</h2>
	<p class="doc">{{.Doc}} Expect: <b>{{.Expect}}</b>. {{.Acquisitions}} acquisitions in {{.Attempts}} attempts, {{.Violations}} violations.</p>
	{{with .Failures}}<ul>{{range .}}<li class="fail">{{.}}</li>{{end}}</ul>{{end}}
	{{with .Examples}}<details><summary>violations</summary><ul>{{range .}}<li><code>{{.}}</code></li>{{end}}</ul></details>{{end}}
	{{.Legend}}
	{{.SVG}}
	</section>
{{end}}`)))

// WritePage writes dir/index.html: a page titled title (an h1 too) in
// the style of WriteReport's, followed by body. body is written as is, so
// it must be trusted HTML: build it with html/template or escape what it
// quotes. Classes pass and fail color a verdict; TimelineLegendFor and
// TimelineSVG fit in. dir is created if needed. `redlock-lab demo` writes its
// report with it, so that the demo's and the suite's reports look alike.
func WritePage(dir, title, body string) error {
	return writePage(dir, title, template.HTML(body)) // trusted, as documented
}

func writePage(dir, title string, body template.HTML) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	err := pageTmpl.Execute(&b, struct {
		Title string
		Style template.CSS
		Body  template.HTML
	}{title, template.CSS(pageStyle), body})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "index.html"), []byte(b.String()), 0o644)
}

var pageTmpl = template.Must(template.New("page").Parse(oneLine(`
<!doctype html><html><head><meta charset="utf-8"><title>{{.Title}}</title><style>{{.Style}}</style></head>
<body><h1>{{.Title}}</h1>{{.Body}}</body></html>`) + "\n"))

const pageStyle = `
body{font:14px sans-serif;margin:20px;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}.pass{color:#2ca02c;font-weight:bold}.fail{color:#d62728;font-weight:bold}
section{margin:28px 0}.doc{color:#555;max-width:1100px}.legend span{display:inline-block}.legend .key{margin-right:14px}
.sw{display:inline-block;width:14px;height:10px;margin-right:4px;vertical-align:middle}code{background:#f3f3f3}
`

// TimelineLegendFor returns an HTML paragraph, for a page written with
// WritePage, that explains what TimelineSVG(h, o) draws, and only that: a
// key naming each client that held a lock with its bar's colour, the
// node states, restarts and fault lines that occur, overlaps when o.Found
// has any, tails past a deadline, the failed attempts' ticks of each
// colour with their number, and the fenced writes' triangles of each
// kind. Red marks violations only; brown an outage (a killed node, and
// attempts that failed because nodes were unreachable); grey contention.
// The text it quotes (o.Client) is escaped.
func TimelineLegendFor(h History, o TimelineOptions) string {
	v := timelineView(h, o)
	base := 0
	if o.OneBased {
		base = 1
	}
	var l legendView
	l.Client = o.client()
	states := map[EventKind]bool{}
	keyed := map[int]bool{}
	var clients []int
	for _, n := range v.Nodes {
		for _, st := range n.States {
			states[st.kind] = true
		}
		l.Restart = l.Restart || len(n.Restarts) > 0
	}
	for _, kind := range []EventKind{EventKill, EventPause, EventSlow, EventPartition, EventSkew} {
		if states[kind] {
			l.States = append(l.States, legendEntry{Class: "lg-" + string(kind), Color: stateColors[kind], Label: stateLabels[kind]})
		}
	}
	for _, e := range v.Events {
		if e.Note {
			l.Notes = true
		} else {
			l.Faults = true
		}
	}
	ticks, writes := map[string]int{}, map[string]bool{}
	for _, k := range v.Keys {
		for _, hd := range k.Holds {
			l.Holds = true
			l.Tail = l.Tail || hd.Tail != nil
			if !keyed[hd.client] {
				keyed[hd.client] = true
				clients = append(clients, hd.client)
			}
		}
		l.Overlap = l.Overlap || len(k.Overlaps) > 0
		for _, f := range k.Failed {
			ticks[f.Stroke]++
		}
		for _, w := range k.Writes {
			writes[w.Fill] = true
		}
	}
	sort.Ints(clients)
	for _, c := range clients {
		l.Key = append(l.Key, legendEntry{Color: clientColor(c), Label: fmt.Sprintf("%s %d", l.Client, c+base)})
	}
	for _, t := range []legendEntry{
		{Class: "tick-contended", Color: colorContended, Label: "contended", Note: "held by another, even if a node was down"},
		{Class: "tick-unreachable", Color: colorOutage, Label: "unreachable", Note: "too few nodes answered"},
		{Class: "tick-other", Color: colorOtherFail, Label: "other errors", Note: "cancelled, expired, an error"},
	} {
		if t.Count = ticks[t.Color]; t.Count > 0 {
			l.Ticks = append(l.Ticks, t)
		}
	}
	for _, w := range []legendEntry{
		{Class: "lg-accepted", Color: colorAccepted, Label: "accepted"},
		{Class: "lg-rejected", Color: colorRejected, Label: "rejected"},
		{Class: "lg-stale", Color: colorViolation, Label: "stale but accepted (violation)"},
	} {
		if writes[w.Color] {
			l.Writes = append(l.Writes, w)
		}
	}
	var b strings.Builder
	if err := legendTmpl.Execute(&b, l); err != nil {
		panic("chaos: legend template: " + err.Error()) // fixed template, plain data: a bug here
	}
	return b.String()
}

// stateLabels name the node states in the legend.
var stateLabels = map[EventKind]string{
	EventKill: "killed", EventPause: "paused", EventSlow: "slow", EventPartition: "partitioned", EventSkew: "clock skewed",
}

// legendView is what a legend shows: what its timeline draws.
type legendView struct {
	Client                 string        // what a client is called
	Key                    []legendEntry // each client that held, in order
	States                 []legendEntry // node states drawn
	Restart, Faults, Notes bool          // restart marks, fault lines, phase lines
	Holds, Overlap, Tail   bool          // bars, overlaps, tails past a deadline
	Ticks                  []legendEntry // failed attempts, with counts
	Writes                 []legendEntry // fenced writes
}

// legendEntry is a swatch and its words.
type legendEntry struct {
	Class, Color, Label, Note string
	Count                     int
}

// legendTmpl writes a legendView; newlines in its source are dropped (see
// oneLine), so spaces are explicit.
var legendTmpl = template.Must(template.New("legend").Parse(oneLine(`
{{define "sw"}}<i class="sw" style="background:{{.}}"></i>{{end}}
<p class="legend"><b>Timeline:</b> time runs left to right on one monotonic clock; hover for details.
{{with .Key}}<br><b>Bars by {{$.Client}}:</b> {{range .}}<span class="key">{{template "sw" .Color}}{{.Label}}</span>{{end}}{{end}}
{{if or .States .Restart .Faults .Notes}}<br>Node lanes:
	{{range .States}} <span class="{{.Class}}">{{template "sw" .Color}}{{.Label}}</span>{{end}}
	{{if .Restart}} <span class="lg-restart"><i class="sw" style="background:` + colorRestart + `;width:3px"></i>restarted</span>{{end}}
	{{if .Faults}}; dashed lines mark each fault{{end}}{{if .Notes}}; dotted lines mark the scenario's phases{{end}}.
{{end}}
{{if .Holds}}<br>Key lanes: a bar per holder's safe window [acquired, min(released, deadline)], in its {{.Client}}'s colour, stacked when two overlap
	{{if .Overlap}}; <span class="lg-overlap"><i class="sw" style="background:` + colorViolation + `;opacity:.35"></i>overlap (violation)</span>{{end}}
	{{if .Tail}}; <span class="lg-tail">a dotted tail: a holder acting past its deadline</span>{{end}}.
{{end}}
{{with .Ticks}}<br>Ticks below a lane, failed attempts:{{range $i, $t := .}}{{if $i}};{{end}} <span class="{{.Class}}">{{template "sw" .Color}}{{.Label}} <b>{{.Count}}</b></span>: {{.Note}}{{end}}.{{end}}
{{with .Writes}}<br>Triangles, fenced writes:{{range $i, $w := .}}{{if $i}},{{end}} <span class="{{.Class}}" style="color:{{.Color}}">&#9660; {{.Label}}</span>{{end}}.{{end}}
</p>`)))
