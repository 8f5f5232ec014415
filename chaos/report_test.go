package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportEscapesHistory writes a report and a timeline of a history
// whose key, event details, scenario doc, failures and violation
// examples are HTML, and checks that the template engine escaped all of
// them, in text and in the SVG's <title> tooltips alike.
func TestReportEscapesHistory(t *testing.T) {
	const script, quotes = `<script>alert(1)</script>`, `"'&<>`
	const escScript, escQuotes = `&lt;script&gt;alert(1)&lt;/script&gt;`, `&#34;&#39;&amp;&lt;&gt;`
	ms := time.Millisecond
	h := History{
		Sections: []Section{
			{Client: 0, Key: script, Acquired: 0, Released: 50 * ms, Deadline: 100 * ms},
			{Client: 1, Key: script, Acquired: 20 * ms, Released: 60 * ms, Deadline: 120 * ms},
			{Client: 2, Key: quotes, Acquired: 0, Released: 30 * ms, Deadline: 100 * ms, Mode: ModePath},
		},
		Attempts: []Attempt{{Client: 3, Key: script, Start: 5 * ms, Reason: script}},
		Writes:   []Write{{Client: 0, Key: "res:" + script, Fence: 1, Start: 10 * ms, Accepted: true}},
		Events: []Event{
			{At: 10 * ms, Node: 0, Kind: EventPause, Detail: script},
			{At: 40 * ms, Node: 0, Kind: EventResume, Detail: quotes},
			{At: 70 * ms, Node: 1, Kind: EventRestart, Detail: quotes},
			{At: 80 * ms, Node: -1, Kind: EventNote, Detail: script + quotes},
		},
		End: 150 * ms,
	}
	found := Check(h)
	if len(found) == 0 {
		t.Fatal("want the overlap on the hostile key found")
	}
	clean := func(what, page string) {
		t.Helper()
		for _, raw := range []string{script, quotes, "<script", "</script"} {
			if strings.Contains(page, raw) {
				t.Errorf("%s contains %q unescaped", what, raw)
			}
		}
		for _, esc := range []string{escScript, escQuotes} {
			if !strings.Contains(page, esc) {
				t.Errorf("%s does not contain %q, the escaped text", what, esc)
			}
		}
	}

	for _, oneBased := range []bool{false, true} {
		svg := TimelineSVG(h, TimelineOptions{Nodes: 2, Found: found, OneBased: oneBased})
		clean("TimelineSVG", svg)
		// The tooltips are there, escaped: a state, a restart, a fault
		// line, a note and an overlap on the key.
		for _, want := range []string{
			"<title>node 0 pause " + escScript, "<title>node 1 restarted at 70.0ms: " + escQuotes,
			"<title>10.0ms: node 0 pause " + escScript, "<title>80.0ms: " + escScript + escQuotes,
			"<title>overlap on &#34;" + escScript + "&#34;",
		} {
			if oneBased {
				want = strings.NewReplacer("node 0", "node 1", "node 1", "node 2").Replace(want)
			}
			if !strings.Contains(svg, want) {
				t.Errorf("want the timeline (one-based %v) to contain %q", oneBased, want)
			}
		}
	}

	dir := t.TempDir()
	results := []Result{{
		Scenario: "baseline", Expect: ExpectSafe, Pass: false, Nodes: 2,
		Failures: []string{script, quotes}, Examples: []string{found[0].String(), quotes},
		History: h, Found: found,
	}, {
		// A scenario's name is no more trusted than the rest.
		Scenario: script + quotes, Expect: ExpectSafe, Pass: true, History: History{End: time.Second},
	}}
	docs := map[string]string{"baseline": "Doc: " + script + " " + quotes}
	if err := writeReport(dir, results, docs, time.Now()); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	clean("WriteReport's page", string(page))
	for _, want := range []string{
		`<p class="doc">Doc: ` + escScript + " " + escQuotes + " Expect:", // the doc
		`<li class="fail">` + escScript + `</li>`,                         // a failure
		`<li><code>` + escQuotes + `</code></li>`,                         // an example
		"<svg", "<title>node 1 pause " + escScript, // the timeline, embedded as is, nodes numbered from 1
		"<h2>" + escScript + escQuotes + ` <span class="pass">pass</span></h2>`, // the name
		`<p class="legend">`, "<style>\nbody{font:14px sans-serif;", // the legend and style, not escaped
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("want the report to contain %q", want)
		}
	}

	// WritePage escapes its title, and writes its body, trusted, as is.
	if err := WritePage(dir, script+quotes, "<b>trusted</b>"); err != nil {
		t.Fatal(err)
	}
	page, err = os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<title>" + escScript + escQuotes + "</title>", "<h1>" + escScript + escQuotes + "</h1><b>trusted</b></body>"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("want WritePage's page to contain %q, got %s", want, page)
		}
	}
}
