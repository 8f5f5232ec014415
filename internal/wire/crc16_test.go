package wire

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCRC16: CRC-16/XMODEM's check value, and Redis Cluster's key slots
// (CRC16 mod 16384) as its documentation and CLUSTER KEYSLOT give them.
func TestCRC16(t *testing.T) {
	t.Parallel()
	require.Equal(t, uint16(0x31C3), CRC16("123456789"), "the CRC's check value")
	require.Equal(t, uint16(0), CRC16(""))
	for key, slot := range map[string]uint16{"foo": 12182, "bar": 5061, "somekey": 11058} {
		require.Equal(t, slot, CRC16(key)%16384, "slot of %q", key)
	}
}

// TestQueueNode: a key's queue is on one node of n, the same every time,
// and keys spread over every node.
func TestQueueNode(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3, 5} {
		seen := map[int]bool{}
		for i := range 100 {
			k := string(rune('a'+i%26)) + string(rune('A'+i/26))
			q := QueueNode(k, n)
			require.True(t, q >= 0 && q < n, "node %d of %d", q, n)
			require.Equal(t, q, QueueNode(k, n))
			seen[q] = true
		}
		require.Len(t, seen, n, "100 keys on %d nodes", n)
	}
}
