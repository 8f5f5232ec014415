package wire

import (
	"testing"
	"time"
)

func TestPXMillis(t *testing.T) {
	for _, tc := range []struct {
		ttl  time.Duration
		want int64
	}{
		{time.Second, 1000},
		{1500 * time.Microsecond, 2}, // rounded up: a longer key is safe
		{time.Millisecond + 1, 2},
		{time.Nanosecond, 1},
	} {
		if got := PXMillis(tc.ttl); got != tc.want {
			t.Errorf("PXMillis(%v): want %d, got %d", tc.ttl, tc.want, got)
		}
	}
}
