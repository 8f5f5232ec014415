package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The exit codes are sysexits(3)'s and the shell's, which scripts test
// for, and `redlock help` and docs/cli.md list each of them, and no
// other.
func TestExitCodesDocumented(t *testing.T) {
	codes := []struct {
		name      string
		code      int
		want      int
		helpRow   string // its row in exitCodesHelp and docs/cli.md
		docRowAlt string // docs/cli.md's row when it shares one
	}{
		{"exitOK", exitOK, 0, "0", ""},
		{"exitFailure", exitFailure, 1, "1", ""},
		{"exitUsage", exitUsage, 64, "64", ""},             // EX_USAGE
		{"exitUnavailable", exitUnavailable, 69, "69", ""}, // EX_UNAVAILABLE
		{"exitLockLost", exitLockLost, 70, "70", ""},       // EX_SOFTWARE
		{"exitNotObtained", exitNotObtained, 75, "75", ""}, // EX_TEMPFAIL
		{"exitCannotRun", exitCannotRun, 126, "126", "126 / 127"},
		{"exitNotFound", exitNotFound, 127, "127", "126 / 127"},
		{"exitSignal", exitSignal, 128, "128+n", ""},
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "### Exit codes\n")
	if !ok {
		t.Fatal("docs/cli.md: want a section \"### Exit codes\", found none")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	helpRows := regexp.MustCompile(`(?m)^  (\S+) `).FindAllStringSubmatch(exitCodesHelp, -1)
	docRows := regexp.MustCompile(`(?m)^\| ([^|]+?) \|`).FindAllStringSubmatch(table, -1)
	var wantHelp, wantDoc []string
	for _, c := range codes {
		if c.code != c.want {
			t.Errorf("%s: want %d, got %d", c.name, c.want, c.code)
		}
		wantHelp = append(wantHelp, c.helpRow)
		row := c.helpRow
		if c.docRowAlt != "" {
			row = c.docRowAlt
		}
		if !slices.Contains(wantDoc, row) {
			wantDoc = append(wantDoc, row)
		}
	}
	// N is the command's own code, passed through.
	wantHelp = append(wantHelp, "N")
	wantDoc = append(wantDoc, "N")
	var gotHelp, gotDoc []string
	for _, m := range helpRows {
		gotHelp = append(gotHelp, m[1])
	}
	for _, m := range docRows {
		if m[1] != "code" && !strings.HasPrefix(m[1], "-") {
			gotDoc = append(gotDoc, m[1])
		}
	}
	slices.Sort(wantHelp)
	slices.Sort(gotHelp)
	slices.Sort(wantDoc)
	slices.Sort(gotDoc)
	if !slices.Equal(gotHelp, wantHelp) {
		t.Errorf("redlock help: want rows for the codes %v, got %v:\n%s", wantHelp, gotHelp, exitCodesHelp)
	}
	if !slices.Equal(gotDoc, wantDoc) {
		t.Errorf("docs/cli.md: want rows for the codes %v, got %v:\n%s", wantDoc, gotDoc, table)
	}
}
