package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteJSON writes results as a JSON array, one object per scenario with
// the fields "scenario", "expect", "acquisitions", "violations",
// "p50_acquire_us", "p99_acquire_us" and "pass" (and a few more: see
// Result).
func WriteJSON(w io.Writer, results []Result) error {
	if results == nil {
		results = []Result{}
	}
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteSummary writes a table of results and a closing "N passed, M
// failed" line.
func WriteSummary(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\texpect\tresult\tacquisitions\tviolations\tp50 acquire\tp99 acquire\tfaults\ttime\t")
	passed := 0
	for _, r := range results {
		verdict := "FAIL"
		if r.Pass {
			verdict = "pass"
			passed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t%.1fs\t\n", r.Scenario, r.Expect, verdict,
			r.Acquisitions, r.Violations, usString(r.P50AcquireUS), usString(r.P99AcquireUS), r.Faults, r.Seconds)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d passed, %d failed\n", passed, len(results)-passed)
	return err
}
