package nodeurl

import (
	"testing"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://a:1":               "redis://a:1",
		"redis://u:pw@a:1/0":        "redis://u:xxxxx@a:1/0",
		"rediss://:pw@a:1":          "rediss://:xxxxx@a:1",
		"redis://u:p@w@a:1\x7f":     "redis://u:xxxxx@a:1\x7f",
		"redis://user-only@a:1\x7f": "redis://user-only@a:1\x7f",
		"not a url at all\x7f":      "not a url at all\x7f",
		"redis+sentinel://s:1?master_name=m&password=mpw&sentinel_password=spw": "redis+sentinel://s:1?master_name=m&password=xxxxx&sentinel_password=xxxxx",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q): want %q, got %q", in, want, got)
		}
	}
}

// The fail-fast settings fill what a URL leaves unset, and only that.
