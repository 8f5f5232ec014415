package redlock

import (
	"sync"
	"time"
)

// timers recycles the rounds' timers: since Go 1.23 a stopped timer can
// be reset with no stale tick to drain.
var timers = sync.Pool{New: func() any { return time.NewTimer(time.Hour) }}

func getTimer(d time.Duration) *time.Timer {
	t := timers.Get().(*time.Timer)
	t.Reset(d)
	return t
}

func putTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}
