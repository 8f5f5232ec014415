package node

import (
	"testing"
	"time"
)

// TestCountWait: Wait returns at once at zero, when the count falls to
// zero, or after its bound, whichever comes first; the count can be
// waited for again after it rose from zero.
func TestCountWait(t *testing.T) {
	var c Count
	within := func(what string, d time.Duration, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(d):
			t.Fatalf("%s: want it to return within %v", what, d)
		}
	}
	within("Wait at zero", 5*time.Second, func() { c.Wait(time.Hour) })
	c.Add(2)
	start := time.Now()
	c.Wait(20 * time.Millisecond)
	if since := time.Since(start); since < 20*time.Millisecond {
		t.Fatalf("want Wait to last its bound while the count is 2, returned after %v", since)
	}
	waited := make(chan struct{})
	go func() { c.Wait(time.Hour); close(waited) }()
	c.Done()
	select {
	case <-waited:
		t.Fatal("want Wait to go on while the count is 1")
	case <-time.After(10 * time.Millisecond):
	}
	c.Done()
	within("Wait after the last Done", 5*time.Second, func() { <-waited })
	c.Add(1)
	go c.Done()
	within("Wait after the count rose again", 5*time.Second, func() { c.Wait(time.Hour) })
}
