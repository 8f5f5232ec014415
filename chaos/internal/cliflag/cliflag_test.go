package cliflag

import (
	"bytes"
	"flag"
	"io"
	"testing"
	"time"
)

func flags() *flag.FlagSet {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("report", "", "write a report to `DIR`")
	fs.Duration("duration", time.Second, "how long")
	fs.Bool("short", false, "a quick pass")
	fs.Bool("v", false, "verbose")
	fs.Int("n", 1, "a `count`")
	return fs
}

// Long names get two dashes, one-letter names one, in the listing and
// in parse errors; the usage lines are the flag package's.
func TestTwoDashesForLongNames(t *testing.T) {
	var b bytes.Buffer
	PrintDefaults(&b, flags())
	want := "  --duration duration\n    \thow long (default 1s)\n  -n count\n    \ta count (default 1)\n" +
		"  --report DIR\n    \twrite a report to DIR\n  --short\n    \ta quick pass\n  -v\tverbose\n"
	if b.String() != want {
		t.Errorf("want\n%s\ngot\n%s", want, b.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nope"}, "flag provided but not defined: --nope"},
		{[]string{"-x"}, "flag provided but not defined: -x"},
		{[]string{"--duration", "soon"}, `invalid value "soon" for flag --duration: parse error`},
		{[]string{"-n", "-5x"}, `invalid value "-5x" for flag -n: parse error`},
		{[]string{"--short=maybe"}, `invalid boolean value "maybe" for --short: parse error`},
		{[]string{"--report"}, "flag needs an argument: --report"},
	} {
		err := Parse(flags(), tc.args)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%q): want %q, got %v", tc.args, tc.want, err)
		}
	}
	if err := Parse(flags(), []string{"--help"}); err != flag.ErrHelp {
		t.Errorf("Parse(--help): want flag.ErrHelp, got %v", err)
	}
}
