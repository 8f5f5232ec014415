// Package cliflag writes a flag.FlagSet's flags as redlock's commands and
// their docs write them: long names after two dashes (--report), one-letter
// names after one (-h). The flag package prints one dash for both, and
// accepts either.
package cliflag

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode"
)

// PrintDefaults writes fs's flags to w as fs.PrintDefaults does, with long
// names after two dashes. fs's output is left as it was.
func PrintDefaults(w io.Writer, fs *flag.FlagSet) {
	var b bytes.Buffer
	out := fs.Output()
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(out)
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		// A flag's line is "  -name [type]" (a one-letter boolean's usage
		// follows a tab on it); usage lines start with spaces and a tab.
		if rest, ok := strings.CutPrefix(line, "  -"); ok {
			if name := strings.FieldsFunc(rest, unicode.IsSpace); len(name) > 0 && len(name[0]) > 1 {
				line = "  --" + rest
			}
		}
		fmt.Fprint(w, line)
	}
}

// nameRe finds the flag names in the flag package's parse errors ("flag
// provided but not defined: -nope", "invalid value ... for flag
// -duration: ...", "flag needs an argument: -json"), one-letter names
// left out.
var nameRe = regexp.MustCompile(`(for flag|for|defined:|argument:) -([^-\s:][^\s:]+)`)

// Parse parses args into fs, whose output should be io.Discard. It
// returns nil, flag.ErrHelp for -h, --help and -help, or the parse error
// with its flag names as PrintDefaults writes them (--duration).
func Parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return errors.New(nameRe.ReplaceAllString(err.Error(), "$1 --$2"))
}
