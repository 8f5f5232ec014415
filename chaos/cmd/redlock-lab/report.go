package main

import (
	"fmt"
	"html/template"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed543a70bd/redlock/chaos"
)

// The demo's HTML report: its figures, nodes and faults, then the run
// drawn by the chaos suite's timeline (chaos.TimelineSVG) on a page in the
// suite's style (chaos.WritePage), so that the two reports read alike.
var reportTmpl = template.Must(template.New("report").Parse(`<p class="doc">{{.Workers}} workers contended for one Redlock lock, <code>{{.Key}}</code>,
on {{len .Nodes}} redis-server nodes (quorum {{.Quorum}}) for {{.Elapsed}}.
The demo kills node {{.Victim}} while the lock is held, then restarts it: see Faults.</p>
<table>
<tr><th>acquisitions</th><td>{{.Acquired}}</td></tr>
<tr><th>hand-offs</th><td>{{.Handoffs}}</td></tr>
<tr><th>extensions</th><td>{{.Extended}}</td></tr>
<tr><th>contended attempts</th><td>{{.Contended}}</td></tr>
<tr><th>errors</th><td>{{.Failed}} ({{.Ticks.Unreachable}} with nodes unreachable, {{.Ticks.Other}} other)</td></tr>
<tr><th>locks lost</th><td>{{.Lost}}</td></tr>
<tr><th>violations</th><td class="{{if .Violations}}fail{{else}}pass{{end}}">{{.Violations}}</td></tr>
</table>
{{with .Overlaps}}<ul>{{range .}}<li class="fail">{{.}}</li>{{end}}</ul>{{end}}
<h2>Nodes</h2><ol>{{range .Nodes}}<li><code>{{.}}</code></li>{{end}}</ol>
<h2>Faults</h2><ul>{{range .Events}}<li>{{.}}</li>{{else}}<li>none</li>{{end}}</ul>
<h2>Timeline</h2>
{{.Legend}}
<p class="doc">Node <i>n</i> is the <i>n</i>th node above.</p>
{{.SVG}}
`))

// faultVerbs turn the demo's event kinds into words.
var faultVerbs = map[chaos.EventKind]string{chaos.EventKill: "killed", chaos.EventRestart: "restarted"}

// writeReport writes dir/index.html for the run recorded in h, with the
// violations vs found in it, and returns its path.
func (d *demoRun) writeReport(dir string, h chaos.History, vs []chaos.Violation, workers int, nodes []string) (string, error) {
	o := chaos.TimelineOptions{Nodes: len(nodes), Found: vs, OneBased: true, Client: "worker"}
	data := struct {
		Workers, Quorum, Victim, Violations                   int
		Key                                                   string
		Elapsed                                               time.Duration
		Nodes, Events, Overlaps                               []string
		Acquired, Handoffs, Extended, Contended, Failed, Lost int64
		Ticks                                                 chaos.FailedCounts
		Legend, SVG                                           template.HTML
	}{
		Workers: workers, Quorum: len(nodes)/2 + 1, Victim: demoVictim + 1, Violations: len(vs),
		Key: demoKey, Elapsed: h.End.Round(10 * time.Millisecond), Nodes: nodes,
		Acquired: d.acquired.Load(), Handoffs: int64(d.handoffs()), Extended: d.extended.Load(),
		Contended: d.contended.Load(), Failed: d.failed.Load(), Lost: d.lost.Load(),
		// The figures of the legend and of the table above come from the
		// same history: CountFailed counts the ticks as the timeline
		// draws them, and the workers record each attempt they count.
		Ticks: chaos.CountFailed(h),
		// Both come from package chaos, which escapes what they quote.
		Legend: template.HTML(chaos.TimelineLegendFor(h, o)),
		SVG:    template.HTML(chaos.TimelineSVG(h, o)),
	}
	for _, e := range h.Events {
		verb := faultVerbs[e.Kind]
		if verb == "" {
			verb = string(e.Kind)
		}
		data.Events = append(data.Events, fmt.Sprintf("%.2fs: node %d %s (%s)", e.At.Seconds(), e.Node+1, verb, e.Detail))
	}
	for i, v := range vs {
		if i == 5 {
			data.Overlaps = append(data.Overlaps, fmt.Sprintf("... and %d more", len(vs)-i))
			break
		}
		data.Overlaps = append(data.Overlaps, describe(h, v))
	}
	var b strings.Builder
	if err := reportTmpl.Execute(&b, data); err != nil {
		return "", err
	}
	if err := chaos.WritePage(dir, "redlock-lab demo", b.String()); err != nil {
		return "", err
	}
	return filepath.Join(dir, "index.html"), nil
}
