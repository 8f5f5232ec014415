package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A short demo: nodes start, workers contend, node 3 is killed and
// restarted, no violation, and the report is written.
func TestDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "report")
	r := cli(t, "demo", "--workers", "3", "--duration", "2s", "--report", dir)
	if r.code != exitOK {
		t.Fatalf("want exit 0, got %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, w := range []string{"Started 5 redis-server nodes", "killed node 3", "restarted node 3", "Report: "} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("want %q in the output, got:\n%s", w, r.stdout)
		}
	}
	count := func(name string) int {
		m := regexp.MustCompile(`(?m)^  ` + name + ` +(\d+)`).FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("want a %q line in the summary, got:\n%s", name, r.stdout)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if n := count("violations"); n != 0 {
		t.Errorf("want 0 violations, got %d", n)
	}
	if n := count("acquisitions"); n == 0 {
		t.Errorf("want acquisitions, got 0")
	}
	if n := count("hand-offs"); n == 0 {
		t.Errorf("want hand-offs, got 0")
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatalf("want the report, got %v", err)
	}
	// The chaos suite's timeline, with nodes numbered from 1 as in the
	// output: five node lanes, node 3's kill marked.
	for _, w := range []string{"<title>redlock-lab demo</title>", "<svg", "node 3 killed", "node 3 restarted", "violations",
		`class="legend"`, ">node 1</text>", ">node 5</text>", "kill n3", "node 3 restarted at"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("report: want %q in index.html", w)
		}
	}
	if strings.Contains(string(b), ">node 0</text>") {
		t.Errorf("report: want nodes numbered from 1, got a lane for node 0")
	}

	// The legend counts the timeline's ticks as the summary counts the
	// attempts: contended ones (grey, even while node 3 was down) as
	// "contended", the others as "errors". A kind of tick the run did not
	// draw is not in the legend.
	legend := func(kind string) int {
		m := regexp.MustCompile(`class="tick-` + kind + `">.*?<b>(\d+)</b>`).FindStringSubmatch(string(b))
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if legend("contended") == 0 {
		t.Errorf("report: want contended ticks counted in the legend")
	}
	// A key names each worker; the demo has no fencing, so no tooltip
	// shows a fence.
	for w := 1; w <= 3; w++ {
		if !strings.Contains(string(b), fmt.Sprintf("</i>worker %d</span>", w)) {
			t.Errorf("report: want worker %d in the legend's key", w)
		}
	}
	if strings.Contains(string(b), "fence") {
		t.Errorf("report: want no fence in a run without fencing")
	}
	if got, want := legend("contended"), count("contended"); got != want {
		t.Errorf("report: want the legend's contended ticks to be the summary's contended attempts, %d, got %d", want, got)
	}
	if got, want := legend("unreachable")+legend("other"), count("errors"); got != want {
		t.Errorf("report: want the legend's unreachable and other ticks to add up to the summary's errors, %d, got %d", want, got)
	}
}
