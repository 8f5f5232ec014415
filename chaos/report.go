package chaos

import (
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// WriteReport writes dir/index.html: a summary table and, per scenario,
// what it does, its verdict, and an SVG timeline of its history (see
// Timeline). dir is created if needed.
func WriteReport(dir string, results []Result) error {
	var b strings.Builder
	passed := 0
	for _, r := range results {
		if r.Pass {
			passed++
		}
	}
	fmt.Fprintf(&b, "<p>%s &middot; %d scenarios: %d passed, %d failed.</p>",
		time.Now().Format(time.RFC3339), len(results), passed, len(results)-passed)
	b.WriteString("<table><tr><th>scenario</th><th>expect</th><th>result</th><th>acquisitions</th><th>violations</th><th>p50 acquire</th><th>p99 acquire</th><th>faults</th><th>time</th></tr>")
	for _, r := range results {
		fmt.Fprintf(&b, `<tr><td><a href="#%s">%s</a></td><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%d</td><td>%.1fs</td></tr>`,
			r.Scenario, r.Scenario, r.Expect, verdictHTML(r.Pass), r.Acquisitions, r.Violations,
			usString(r.P50AcquireUS), usString(r.P99AcquireUS), r.Faults, r.Seconds)
	}
	b.WriteString("</table>")
	b.WriteString(TimelineLegend)
	docs := map[string]string{}
	for _, s := range Scenarios() {
		docs[s.Name] = s.Doc
	}
	for _, r := range results {
		fmt.Fprintf(&b, `<section id="%s"><h2>%s %s</h2><p class="doc">%s Expect: <b>%s</b>. %d acquisitions in %d attempts, %d violations.</p>`,
			r.Scenario, r.Scenario, verdictHTML(r.Pass), html.EscapeString(docs[r.Scenario]), r.Expect, r.Acquisitions, r.Attempts, r.Violations)
		if len(r.Failures) > 0 {
			b.WriteString("<ul>")
			for _, f := range r.Failures {
				fmt.Fprintf(&b, `<li class="fail">%s</li>`, html.EscapeString(f))
			}
			b.WriteString("</ul>")
		}
		if len(r.Examples) > 0 {
			b.WriteString("<details><summary>violations</summary><ul>")
			for _, v := range r.Examples {
				fmt.Fprintf(&b, "<li><code>%s</code></li>", html.EscapeString(v))
			}
			b.WriteString("</ul></details>")
		}
		b.WriteString(Timeline(r, r.Nodes))
		b.WriteString("</section>")
	}
	return WritePage(dir, "redlock chaos report", b.String())
}

// WritePage writes dir/index.html: a page titled title (an h1 too) in
// the style of WriteReport's, followed by body. body is written as is, so
// it must be trusted HTML: build it with html/template or escape what it
// quotes. Classes pass and fail color a verdict; TimelineLegend and
// TimelineSVG fit in. dir is created if needed. `redlock demo` writes its
// report with it, so that the demo's and the suite's reports look alike.
func WritePage(dir, title, body string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	t := html.EscapeString(title)
	page := `<!doctype html><html><head><meta charset="utf-8"><title>` + t + `</title><style>` + pageStyle + `</style></head><body><h1>` + t + `</h1>` +
		body + "</body></html>\n"
	return os.WriteFile(filepath.Join(dir, "index.html"), []byte(page), 0o644)
}

const pageStyle = `
body{font:14px sans-serif;margin:20px;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}.pass{color:#2ca02c;font-weight:bold}.fail{color:#d62728;font-weight:bold}
section{margin:28px 0}.doc{color:#555;max-width:1100px}.legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:14px;height:10px;margin-right:4px;vertical-align:middle}code{background:#f3f3f3}
`

func verdictHTML(pass bool) string {
	if pass {
		return `<span class="pass">pass</span>`
	}
	return `<span class="fail">FAIL</span>`
}

// TimelineLegend is an HTML paragraph that explains the colors and marks
// of TimelineSVG, for a page written with WritePage.
const TimelineLegend = `<p class="legend"><b>Timeline:</b> time runs left to right on one monotonic clock.
Node lanes: <span><i class="sw" style="background:#d62728"></i>killed</span><span><i class="sw" style="background:#ff7f0e"></i>paused</span>
<span><i class="sw" style="background:#e6c300"></i>slow</span><span><i class="sw" style="background:#9467bd"></i>partitioned</span>
<span><i class="sw" style="background:#17becf"></i>clock skewed</span>; dashed lines mark each fault.
Key lanes: one bar per holder's safe window [acquired, min(released, deadline)], colored by client, stacked when two overlap;
<span><i class="sw" style="background:#d62728;opacity:.35"></i>overlap (violation)</span>; a dotted tail is a holder acting past its deadline;
ticks below: failed attempts (<span style="color:#e15759">unreachable</span>, <span style="color:#999">contended</span>);
triangles: fenced writes (<span style="color:#2ca02c">accepted</span>, <span style="color:#555">rejected</span>, <span style="color:#d62728">stale but accepted</span>).
Hover for details.</p>`
