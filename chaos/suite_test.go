package chaos_test

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/chaos"
)

var (
	long      = flag.Bool("chaos.long", os.Getenv("CHAOS_LONG") != "", "run the long chaos suite (also: CHAOS_LONG=1)")
	duration  = flag.Duration("chaos.duration", 0, "length of each scenario (default: 3s short, 20s long)")
	scenarios = flag.String("chaos.scenario", "", "comma-separated scenarios to run (default: all)")
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	// Scenarios kill nodes on purpose; go-redis would log every refused dial.
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

// TestSuite runs every scenario (the short pass unless -chaos.long) and
// asserts each one's expectation: violations where Redlock's assumptions
// are broken on purpose, none elsewhere.
func TestSuite(t *testing.T) {
	s := chaos.Suite{Params: chaos.Params{Short: !*long, Duration: *duration}}
	if *scenarios != "" {
		s.Scenarios = strings.Split(*scenarios, ",")
	}
	if testing.Verbose() {
		s.Progress = testWriter{t}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	results, err := s.Run(ctx)
	if err != nil {
		t.Fatalf("want the suite to run, got %v", err)
	}
	for _, r := range results {
		t.Run(r.Scenario, func(t *testing.T) {
			if !r.Pass {
				t.Errorf("want %s, got %d violations, %d acquisitions; failed checks:\n  %s\nexamples:\n  %s",
					r.Expect, r.Violations, r.Acquisitions, strings.Join(r.Failures, "\n  "), strings.Join(r.Examples, "\n  "))
			}
		})
	}
}

// testWriter sends progress lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
