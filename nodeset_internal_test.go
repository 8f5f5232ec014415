package redlock

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNodeSet: the zero set holds nothing; indexes below and above the
// bit mask's 64 are kept apart and each is found once added.
func TestNodeSet(t *testing.T) {
	t.Parallel()
	var s nodeSet
	in := []int{0, 1, 63, 64, 65, 1000}
	for _, i := range in {
		require.False(t, s.has(i), "zero set has %d", i)
	}
	for k, i := range in {
		s.add(i)
		s.add(i) // twice: still one member
		for j, x := range in {
			require.Equal(t, j <= k, s.has(x), "after adding %v: has(%d)", in[:k+1], x)
		}
	}
	require.False(t, s.has(2))
	require.False(t, s.has(66))
	require.Len(t, s.more, 3)
}
