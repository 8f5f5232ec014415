package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed543a70bd/redlock/chaos"
)

// `redlock-lab chaos --list` and `redlock-lab help chaos` reach package
// chaos through the CLI and need no node.
func TestChaosListAndHelp(t *testing.T) {
	r := cli(t, "chaos", "--list")
	if r.code != exitOK {
		t.Fatalf("chaos --list: want exit 0, got %d; stderr:\n%s", r.code, r.stderr)
	}
	for _, name := range chaos.Names() {
		if !strings.Contains(r.stdout, name) {
			t.Errorf("chaos --list: want scenario %q listed, got:\n%s", name, r.stdout)
		}
	}
	r = cli(t, "help", "chaos")
	if r.code != exitOK || !strings.Contains(r.stdout, "Usage: redlock-lab chaos") || !strings.Contains(r.stdout, "--scenario") {
		t.Errorf("help chaos: want exit 0 and the chaos flags, got %d:\n%s", r.code, r.stdout)
	}
}

// Bad chaos flags are usage errors (64), like every other command's, and
// the message names the problem.
func TestChaosUsageErrors(t *testing.T) {
	if chaos.ExitUsage != exitUsage {
		t.Fatalf("want chaos.ExitUsage to be the CLI's usage code %d, got %d", exitUsage, chaos.ExitUsage)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nope"}, "redlock-lab chaos: flag provided but not defined: --nope"},
		{[]string{"--duration", "soon"}, `invalid value "soon" for flag --duration`},
		{[]string{"--duration", "-1s"}, "--duration must not be negative"},
		{[]string{"--scenario", "baseline,nope"}, "unknown scenario(s) nope"},
		{[]string{"--backend", "vm"}, `unknown backend "vm"`},
		{[]string{"stray"}, "unexpected arguments: stray"},
	} {
		r := cli(t, append([]string{"chaos"}, tc.args...)...)
		if r.code != exitUsage {
			t.Errorf("chaos %s: want exit %d, got %d; stderr:\n%s", strings.Join(tc.args, " "), exitUsage, r.code, r.stderr)
			continue
		}
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("chaos %s: want stderr containing %q, got:\n%s", strings.Join(tc.args, " "), tc.want, r.stderr)
		}
	}
}

// A real quick run through the CLI: one scenario on 5 local redis-server
// nodes, with the JSON results and the HTML report.
func TestChaosRun(t *testing.T) {
	dir := t.TempDir()
	jsonFile, reportDir := filepath.Join(dir, "results.json"), filepath.Join(dir, "report")
	r := cli(t, "chaos", "--short", "--duration", "1s", "--scenario", "baseline", "--json", jsonFile, "--report", reportDir)
	if r.code != exitOK {
		t.Fatalf("want exit 0, got %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "1 passed, 0 failed") {
		t.Errorf("want the summary table, got:\n%s", r.stdout)
	}

	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatalf("want the JSON results, got %v", err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b, &got); err != nil || len(got) != 1 {
		t.Fatalf("want a JSON array of one object, got %v:\n%s", err, b)
	}
	obj := got[0]
	for field, kind := range map[string]string{
		"scenario": "string", "expect": "string", "acquisitions": "number", "violations": "number",
		"p50_acquire_us": "number", "p99_acquire_us": "number", "pass": "bool",
	} {
		v, ok := obj[field]
		if !ok {
			t.Errorf("want field %q in %s", field, b)
			continue
		}
		var isKind bool
		switch kind {
		case "string":
			_, isKind = v.(string)
		case "number":
			_, isKind = v.(float64)
		case "bool":
			_, isKind = v.(bool)
		}
		if !isKind {
			t.Errorf("want %q to be a %s, got %T (%v)", field, kind, v, v)
		}
	}
	if obj["scenario"] != "baseline" || obj["expect"] != "safe" || obj["pass"] != true {
		t.Errorf(`want scenario "baseline", expect "safe", pass true, got %v, %v, %v`, obj["scenario"], obj["expect"], obj["pass"])
	}
	if n, _ := obj["acquisitions"].(float64); n == 0 {
		t.Errorf("want acquisitions, got 0")
	}
	if n, _ := obj["violations"].(float64); n != 0 {
		t.Errorf("want 0 violations, got %v", n)
	}

	htmls, _ := filepath.Glob(filepath.Join(reportDir, "*.html"))
	if len(htmls) == 0 {
		t.Fatalf("want an HTML file in %s, got none", reportDir)
	}
	page, err := os.ReadFile(htmls[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "<svg") {
		t.Errorf("want an SVG timeline in %s, got %d bytes without <svg", htmls[0], len(page))
	}
}
