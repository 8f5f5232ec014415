package main

import (
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"time"
)

// The demo's HTML report: a summary and a timeline with one row per
// worker, a bar per hold, and the time node 3 was down.
var reportTmpl = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>redlock demo</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}td,th{padding:.2em .8em;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.bad{color:#b00;font-weight:bold}.ok{color:#070;font-weight:bold}
svg{border:1px solid #ccc;margin-top:1em}
</style></head><body>
<h1>redlock demo</h1>
<p>{{.Workers}} workers contended for one Redlock lock on {{len .Nodes}} redis-server nodes
(quorum {{.Quorum}}) for {{.Elapsed}}. Node 3 was killed while the lock was held, then restarted.</p>
<table>
<tr><th>acquisitions</th><td class="n">{{.Acquired}}</td></tr>
<tr><th>hand-offs</th><td class="n">{{.Handoffs}}</td></tr>
<tr><th>extensions</th><td class="n">{{.Extended}}</td></tr>
<tr><th>contended attempts</th><td class="n">{{.Contended}}</td></tr>
<tr><th>errors</th><td class="n">{{.Failed}}</td></tr>
<tr><th>locks lost</th><td class="n">{{.Lost}}</td></tr>
<tr><th>violations</th><td class="n {{if .Violations}}bad{{else}}ok{{end}}">{{.Violations}}</td></tr>
</table>
<h2>Nodes</h2><ol>{{range .Nodes}}<li>{{.}}</li>{{end}}</ol>
<h2>Events</h2><ul>{{range .Events}}<li>{{.}}</li>{{end}}</ul>
<h2>Timeline</h2>
<p>One row per worker; a bar per hold (red: overlaps another worker's hold; orange: lost). Grey: node 3 down.</p>
<svg width="{{.Width}}" height="{{.Height}}" xmlns="http://www.w3.org/2000/svg">
{{range .Down}}<rect x="{{.X}}" y="0" width="{{.W}}" height="{{$.Height}}" fill="#ddd"/>{{end}}
{{range .Rows}}<text x="4" y="{{.Y}}" font-size="12">worker {{.N}}</text>{{end}}
{{range .Bars}}<rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="14" fill="{{.Fill}}"><title>{{.Title}}</title></rect>{{end}}
</svg>
</body></html>
`))

type reportBar struct {
	X, Y, W     float64
	Fill, Title string
}

type reportRow struct {
	N int
	Y float64
}

// writeReport writes dir/index.html and returns its path.
func (d *demoRun) writeReport(dir string, workers int, nodes []string, violations int) (string, error) {
	const left, width, rowH = 80.0, 1000.0, 20.0
	d.mu.Lock()
	defer d.mu.Unlock()
	elapsed := time.Since(d.begin)
	scale := width / elapsed.Seconds()
	x := func(t time.Time) float64 { return left + t.Sub(d.begin).Seconds()*scale }
	data := struct {
		Workers, Quorum, Violations                     int
		Elapsed                                         time.Duration
		Nodes, Events                                   []string
		Acquired, Handoffs, Extended, Contended, Failed int64
		Lost                                            int64
		Width, Height                                   float64
		Rows                                            []reportRow
		Bars, Down                                      []reportBar
	}{
		Workers: workers, Quorum: len(nodes)/2 + 1, Violations: violations,
		Elapsed: elapsed.Round(10 * time.Millisecond), Nodes: nodes,
		Acquired: d.acquired.Load(), Handoffs: int64(d.handoff), Extended: d.extended.Load(),
		Contended: d.contended.Load(), Failed: d.failed.Load(), Lost: d.lost.Load(),
		Width: left + width + 10, Height: rowH*float64(workers) + 10,
	}
	for w := range workers {
		data.Rows = append(data.Rows, reportRow{N: w + 1, Y: rowH*float64(w) + 16})
	}
	var down time.Time
	for _, e := range d.events {
		data.Events = append(data.Events, fmt.Sprintf("%.2fs: node %d %s", e.at.Sub(d.begin).Seconds(), e.node+1, e.what))
		switch e.what {
		case "killed":
			down = e.at
		case "restarted":
			if !down.IsZero() {
				data.Down = append(data.Down, reportBar{X: x(down), W: x(e.at) - x(down)})
				down = time.Time{}
			}
		}
	}
	for _, h := range d.holds {
		b := reportBar{X: x(h.start), Y: rowH*float64(h.worker) + 4, W: max(x(h.safeEnd())-x(h.start), 1), Fill: "#3a7"}
		switch {
		case h.violation:
			b.Fill = "#d00"
		case h.lost:
			b.Fill = "#e90"
		}
		b.Title = fmt.Sprintf("worker %d: %.3fs to %.3fs", h.worker+1, h.start.Sub(d.begin).Seconds(), h.safeEnd().Sub(d.begin).Seconds())
		data.Bars = append(data.Bars, b)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "index.html")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := reportTmpl.Execute(f, data); err != nil {
		_ = f.Close()
		return "", err
	}
	return path, f.Close()
}
