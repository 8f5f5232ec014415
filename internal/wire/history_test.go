package wire

import (
	"slices"
	"testing"
)

// TestTermMemberOrder pins the member encoding: it round-trips, and the
// byte order of members is (term, seq) order, whatever the values.
func TestTermMemberOrder(t *testing.T) {
	ordered := []string{
		TermMember(1, 0, "zz"), TermMember(1, 1, ""), TermMember(1, 15, "a"), TermMember(1, 16, "a"),
		TermMember(2, 0, "a:b\x00c"), TermMember(255, 0, "a"), TermMember(256, 0, "a"),
	}
	if !slices.IsSorted(ordered) {
		t.Errorf("want members in (term, seq) order, got %q", ordered)
	}
	for _, tc := range []struct {
		term, seq int64
		value     string
	}{{1, 0, ""}, {7, 3, "host-a"}, {1 << 40, 1 << 33, "a:b\x00c"}} {
		term, seq, value, ok := ParseTermMember(TermMember(tc.term, tc.seq, tc.value))
		if !ok || term != tc.term || seq != tc.seq || value != tc.value {
			t.Errorf("ParseTermMember(TermMember(%d, %d, %q)): want them back, got %d, %d, %q, %v", tc.term, tc.seq, tc.value, term, seq, value, ok)
		}
	}
	for _, bad := range []string{"", "x", "0000000000000001:", "000000000000000g:0000000000000000:v", "0000000000000001-0000000000000000:v"} {
		if _, _, _, ok := ParseTermMember(bad); ok {
			t.Errorf("ParseTermMember(%q): want not ok", bad)
		}
	}
}

func TestParseHistory(t *testing.T) {
	m := TermMember(7, 1, "v")
	es, err := ParseHistory([]any{m, "7"})
	if err != nil || len(es) != 1 || es[0] != (TermEntry{Term: 7, Member: m, Seq: 1, Value: "v"}) {
		t.Errorf("want one entry of term 7, got %+v, %v", es, err)
	}
	if es, err := ParseHistory([]any{}); err != nil || len(es) != 0 {
		t.Errorf("want no entry, got %+v, %v", es, err)
	}
	for _, bad := range []any{nil, "x", []any{m}, []any{m, int64(7)}, []any{"junk", "7"}, []any{m, "8"}} {
		if _, err := ParseHistory(bad); err == nil {
			t.Errorf("ParseHistory(%#v): want an error", bad)
		}
	}
}
