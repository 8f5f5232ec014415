package redlock

import (
	"testing"
	"time"
)

// TestTimerPoolNoStaleTick: a timer that fired and was never read, put
// back and taken again, waits its new duration: no tick of its last use
// is left in its channel (the pool relies on Go 1.23's timers), and a
// short one still fires.
func TestTimerPoolNoStaleTick(t *testing.T) {
	t.Parallel()
	for range 100 {
		fired := getTimer(time.Nanosecond)
		time.Sleep(time.Millisecond) // let it fire unread: the state under test
		putTimer(fired)
		again := getTimer(time.Hour)
		select {
		case <-again.C:
			t.Fatal("a pooled timer delivered a stale tick")
		default:
		}
		putTimer(again)
	}
	short := getTimer(time.Millisecond)
	defer putTimer(short)
	select {
	case <-short.C:
	case <-time.After(10 * time.Second):
		t.Fatal("a pooled timer did not fire")
	}
}
