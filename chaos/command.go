package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/term"

	"github.com/seed543a70bd/redlock/chaos/internal/cliflag"
)

const usage = `Usage: redlock-lab chaos [flags]

Runs the chaos suite: kills, pauses, restarts, slows, partitions and
skews real Redis nodes mid-lock and checks that no two holders overlap and
that the fenced resource accepts no stale write (or that they do, where a
scenario breaks Redlock's assumptions on purpose).

Flags:
`

// ExitUsage is the exit code Command returns for bad flags or arguments:
// 64, EX_USAGE of sysexits(3), the code every redlock command uses for
// usage errors.
const ExitUsage = 64

// prog prefixes Command's messages: the command that runs it.
const prog = "redlock-lab chaos"

// Command runs the chaos suite as `redlock-lab chaos` with args (the flags
// after "chaos") and returns the exit code: 0 when every scenario passed
// (and for --list and -h), 1 when one failed, the run could not be made
// or ctx was cancelled (also when --backend docker finds no Docker
// engine), ExitUsage (64) for bad flags, an unknown scenario or backend
// name, or stray arguments.
//
// Flags: --short (a quick pass of every scenario, 3 minutes or less),
// --duration D (length of each scenario for long runs; default 20s),
// --scenario NAME[,NAME], --json FILE (one object per scenario), --report
// DIR (HTML report with an SVG timeline per scenario), --backend
// local|docker|auto, --list. -h prints the usage to stdout. A live
// progress line goes to stderr when it is a terminal (a line per scenario
// otherwise); the summary table goes to stdout; a usage error is one line
// and a hint on stderr.
//
// Command silences go-redis's global logger: the suite kills nodes on
// purpose and every refused dial would be logged.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed once, below
	fs.Usage = func() {}
	usageErr := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "%s: %s\n", prog, fmt.Sprintf(format, args...))
		fmt.Fprintf(stderr, "Run '%s -h' for usage.\n", prog)
		return ExitUsage
	}
	short := fs.Bool("short", false, "quick pass of every scenario (the whole suite in 3 minutes or less)")
	dur := fs.Duration("duration", 0, "length of each scenario (default 3s with --short, else 20s)")
	names := fs.String("scenario", "", "comma-separated scenarios to run (default: all)")
	jsonFile := fs.String("json", "", "write results as a JSON array to `FILE`")
	reportDir := fs.String("report", "", "write an HTML report with a timeline per scenario to `DIR`")
	backend := fs.String("backend", "local", "where nodes run: local (redis-server processes), docker, or auto (docker when an engine answers)")
	list := fs.Bool("list", false, "list the scenarios and exit")
	if err := cliflag.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			cliflag.PrintDefaults(stdout, fs)
			fmt.Fprintf(stdout, "\nScenarios: %s\n", strings.Join(Names(), ", "))
			return 0
		}
		return usageErr("%v", err)
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *list {
		for _, s := range Scenarios() {
			fmt.Fprintf(stdout, "%-20s %-11s %s\n", s.Name, s.Expect, s.Doc)
		}
		return 0
	}
	if *dur < 0 {
		return usageErr("--duration must not be negative")
	}
	s := Suite{Params: Params{Short: *short, Duration: *dur}, Progress: stderr, Live: IsTerminal(stderr)}
	if *names != "" {
		s.Scenarios = strings.Split(*names, ",")
		if _, err := Select(s.Scenarios); err != nil {
			return usageErr("%v", err)
		}
	}
	b, err := pickBackend(*backend)
	if err != nil {
		if errors.Is(err, ErrBackend) { // --backend docker and no engine: not a usage error
			fmt.Fprintf(stderr, "%s: %v\n", prog, err)
			return 1
		}
		return usageErr("%v", err)
	}
	s.Backend = b

	redis.SetLogger(quietLogger{})
	start := time.Now()
	results, err := s.Run(ctx)
	fmt.Fprintln(stdout)
	_ = WriteSummary(stdout, results)
	fmt.Fprintf(stdout, "total %.1fs on %s nodes\n", time.Since(start).Seconds(), b.Name())
	code := 0
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		code = 1
	}
	for _, r := range results {
		if !r.Pass {
			code = 1
		}
	}
	if *jsonFile != "" {
		if err := writeJSONFile(*jsonFile, results); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prog, err)
			code = 1
		}
	}
	if *reportDir != "" {
		if err := WriteReport(*reportDir, results); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prog, err)
			code = 1
		} else {
			fmt.Fprintf(stdout, "report: %s\n", *reportDir+"/index.html")
		}
	}
	return code
}

// pickBackend resolves the --backend flag.
func pickBackend(name string) (Backend, error) {
	switch name {
	case "local":
		return Local{}, nil
	case "docker":
		return NewDocker()
	case "auto":
		if d, err := NewDocker(); err == nil {
			return d, nil
		}
		return Local{}, nil
	}
	return nil, fmt.Errorf("unknown backend %q (want local, docker or auto)", name)
}

func writeJSONFile(path string, results []Result) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteJSON(f, results); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// IsTerminal reports whether w is a character device (a terminal), where
// a progress line can be redrawn in place.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
