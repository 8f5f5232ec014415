package wire

import (
	"testing"
	"time"
)

func TestSplitValue(t *testing.T) {
	for _, tc := range []struct{ v, token, meta string }{
		{"abc", "abc", ""},
		{"abc\x00host-a", "abc", "host-a"},
		{"abc\x00", "abc", ""},
		{"abc\x00a\x00b", "abc", "a\x00b"}, // metadata may hold NUL bytes
	} {
		tok, meta := SplitValue(tc.v)
		if tok != tc.token || meta != tc.meta {
			t.Errorf("SplitValue(%q): want %q, %q, got %q, %q", tc.v, tc.token, tc.meta, tok, meta)
		}
		if tc.meta != "" && Value(tok, meta) != tc.v {
			t.Errorf("Value(%q, %q): want %q", tok, meta, tc.v)
		}
	}
	if Value("abc", "") != "abc" {
		t.Error("Value without metadata: want the token alone")
	}
}

func TestClassifyRefusal(t *testing.T) {
	key := &Request{Op: OpAcquire, Kind: KindKey}
	fenced := &Request{Op: OpAcquire, Kind: KindKey, Fenced: true}
	permit := &Request{Op: OpAcquire, Kind: KindPermit, Sem: &Semaphore{Name: "s", Limit: 1}}
	for _, tc := range []struct {
		name string
		r    *Request
		res  any
		want Reply
	}{
		{"granted", key, int64(1), Reply{St: StatusOK}},
		{"refused, plain", key, int64(0), Reply{St: StatusTaken}},
		{"refused by a holder", key, []any{int64(0), "host-a", int64(1500)}, Reply{St: StatusTaken, Holder: "host-a", HolderTTL: 1500 * time.Millisecond}},
		{"refused, no PTTL", key, []any{int64(0), "", int64(-1)}, Reply{St: StatusTaken, HolderTTL: -1}},
		{"fenced granted", fenced, []any{int64(1), int64(7)}, Reply{St: StatusOK, Fence: 7}},
		{"fenced refused", fenced, []any{int64(0), int64(0), "h", int64(5)}, Reply{St: StatusTaken, Holder: "h", HolderTTL: 5 * time.Millisecond}},
		{"fenced shape unfenced", key, []any{int64(0), int64(0), "h", int64(5)}, Reply{St: StatusFailed}},
		{"refusal of 1", key, []any{int64(1), "h", int64(5)}, Reply{St: StatusFailed}},
		{"permit never parses a holder", permit, []any{int64(0), "h", int64(5)}, Reply{St: StatusFailed}},
	} {
		got := Classify(tc.r, tc.res)
		if got.St != tc.want.St || got.Holder != tc.want.Holder || got.HolderTTL != tc.want.HolderTTL || got.Fence != tc.want.Fence {
			t.Errorf("%s: want %+v, got %+v", tc.name, tc.want, got)
		}
	}
}

func TestParseInspect(t *testing.T) {
	in, err := ParseInspect([]any{"key", int64(900), int64(3), "id1", "meta", int64(900)})
	if err != nil || in.Kind != InspectKey || in.PTTL != 900*time.Millisecond || in.Fence != 3 ||
		len(in.Holders) != 1 || in.Holders[0] != (Holder{ID: "id1", Meta: "meta", TTL: 900 * time.Millisecond}) {
		t.Errorf("want a key held by id1, got %+v, %v", in, err)
	}
	in, err = ParseInspect([]any{"none", int64(-2), int64(0)})
	if err != nil || in.Kind != InspectNone || in.PTTL != -1 || len(in.Holders) != 0 {
		t.Errorf("want free, got %+v, %v", in, err)
	}
	for _, bad := range []any{
		nil, int64(1), []any{"key", int64(1)},
		[]any{"what", int64(1), int64(0)},
		[]any{"key", int64(1), int64(0), "id"},
		[]any{"key", "1", int64(0)},
		[]any{"key", int64(1), int64(0), "id", "m", "900"},
	} {
		if _, err := ParseInspect(bad); err == nil {
			t.Errorf("ParseInspect(%#v): want an error", bad)
		}
	}
}
