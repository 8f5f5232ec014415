package main

import (
	"io"
	"reflect"
	"testing"
)

func TestCount(t *testing.T) {
	c, err := count("testdata/sample")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"types":   {"T", "I", "G"},
		"funcs":   {"F"},
		"methods": {"T.M", "T.P", "G.Get"},
		"vars":    {"V1", "V3"},
		"consts":  {"C1", "C3"},
	}
	if !reflect.DeepEqual(c.names, want) {
		t.Errorf("want %v, got %v", want, c.names)
	}
	if got := c.total(); got != 11 {
		t.Errorf("want 11 identifiers, got %d", got)
	}
}

func TestLimit(t *testing.T) {
	for _, tc := range []struct{ limit, code int }{{0, 0}, {11, 0}, {10, 1}} {
		if got := run(io.Discard, "testdata/sample", tc.limit, false); got != tc.code {
			t.Errorf("limit %d: want exit code %d, got %d", tc.limit, tc.code, got)
		}
	}
	if got := run(io.Discard, "testdata/missing", 0, false); got != 2 {
		t.Errorf("missing dir: want exit code 2, got %d", got)
	}
}
