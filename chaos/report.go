package chaos

import (
	"fmt"
	"html/template"
	"os"
	"path/filepath"
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
		SVG                    template.HTML
	}
	data := struct {
		Now            string
		Passed, Failed int
		Legend         template.HTML
		Results        []row
	}{Now: now.Format(time.RFC3339), Legend: template.HTML(TimelineLegend)}
	for _, r := range results {
		if r.Pass {
			data.Passed++
		} else {
			data.Failed++
		}
		data.Results = append(data.Results, row{
			Result: r, Doc: docs[r.Scenario],
			P50: usString(r.P50AcquireUS), P99: usString(r.P99AcquireUS), Seconds: fmt.Sprintf("%.1fs", r.Seconds),
			// Written with html/template, which escapes what it quotes.
			SVG: template.HTML(TimelineSVG(r.History, TimelineOptions{Nodes: r.Nodes, Found: r.Found, OneBased: true})),
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
{{.Legend}}
{{range .Results}}
	<section id="{{.Scenario}}"><h2>{{.Scenario}} {{template "verdict" .Pass}}</h2>
	<p class="doc">{{.Doc}} Expect: <b>{{.Expect}}</b>. {{.Acquisitions}} acquisitions in {{.Attempts}} attempts, {{.Violations}} violations.</p>
	{{with .Failures}}<ul>{{range .}}<li class="fail">{{.}}</li>{{end}}</ul>{{end}}
	{{with .Examples}}<details><summary>violations</summary><ul>{{range .}}<li><code>{{.}}</code></li>{{end}}</ul></details>{{end}}
	{{.SVG}}
	</section>
{{end}}`)))

// WritePage writes dir/index.html: a page titled title (an h1 too) in
// the style of WriteReport's, followed by body. body is written as is, so
// it must be trusted HTML: build it with html/template or escape what it
// quotes. Classes pass and fail color a verdict; TimelineLegend and
// TimelineSVG fit in. dir is created if needed. `redlock demo` writes its
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
section{margin:28px 0}.doc{color:#555;max-width:1100px}.legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:14px;height:10px;margin-right:4px;vertical-align:middle}code{background:#f3f3f3}
`

// TimelineLegend is an HTML paragraph that explains the colours and marks
// of TimelineSVG, for a page written with WritePage. Red marks
// violations only; brown an outage (a killed node, and attempts that
// failed because nodes were unreachable); grey contention.
// TimelineLegendFor adds the counts of one history's failed attempts.
var TimelineLegend = timelineLegend(nil)

// TimelineLegendFor is TimelineLegend with the number of h's failed
// attempts of each colour (CountFailed), for a page that draws h alone,
// as `redlock demo` does.
func TimelineLegendFor(h History) string {
	c := CountFailed(h)
	return timelineLegend(&c)
}

// timelineLegend writes the legend, with the counts c when not nil.
func timelineLegend(c *FailedCounts) string {
	var contended, unreachable, other string
	if c != nil { // numbers: nothing to escape
		contended, unreachable, other = fmt.Sprintf(" <b>%d</b>", c.Contended), fmt.Sprintf(" <b>%d</b>", c.Unreachable), fmt.Sprintf(" <b>%d</b>", c.Other)
	}
	return `<p class="legend"><b>Timeline:</b> time runs left to right on one monotonic clock.
Node lanes: <span><i class="sw" style="background:` + colorOutage + `"></i>killed</span><span><i class="sw" style="background:#ff7f0e"></i>paused</span>
<span><i class="sw" style="background:#e6c300"></i>slow</span><span><i class="sw" style="background:#9467bd"></i>partitioned</span>
<span><i class="sw" style="background:#17becf"></i>clock skewed</span>; dashed lines mark each fault.
Key lanes: one bar per holder's safe window [acquired, min(released, deadline)], coloured by client, stacked when two overlap;
<span><i class="sw" style="background:` + colorViolation + `;opacity:.35"></i>overlap (violation)</span>; a dotted tail is a holder acting past its deadline;
ticks below: failed attempts (<span class="tick-contended"><i class="sw" style="background:` + colorContended + `"></i>contended` + contended + `</span>: held by another, even if a node was down;
<span class="tick-unreachable"><i class="sw" style="background:` + colorOutage + `"></i>unreachable` + unreachable + `</span>: too few nodes answered;
<span class="tick-other"><i class="sw" style="background:` + colorOtherFail + `"></i>other errors` + other + `</span>);
triangles: fenced writes (<span style="color:#2ca02c">accepted</span>, <span style="color:#555">rejected</span>, <span style="color:` + colorViolation + `">stale but accepted</span>).
Hover for details.</p>`
}
