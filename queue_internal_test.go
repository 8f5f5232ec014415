package redlock

import "testing"

// Read-only views of a Client's wait state for queue_test.go (package
// redlock_test): exported here, in a test file, so that they exist in
// the test binary only.

// QueueIdleForTest reports whether c has no Lock call waiting: no line
// of any key, no hub waiter and no subscription session.
func QueueIdleForTest(c *Client) bool {
	c.lines.mu.Lock()
	lines := len(c.lines.m)
	c.lines.mu.Unlock()
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	return lines == 0 && c.hub.n == 0 && c.hub.sess == nil
}

// WaiterIDForTest returns c's id in the nodes' wait queues.
func WaiterIDForTest(c *Client) string { return c.hub.id }

// TestQueueNodeForTestAgrees: the queue node index that queue_test.go
// recomputes (CRC-16/XMODEM mod N) is the library's.
func TestQueueNodeForTestAgrees(t *testing.T) {
	for _, k := range []string{"", "a", "123456789", "TestQueue-17", "{tag}x", "ключ"} {
		for n := 1; n <= 7; n++ {
			want := queueNode(k, n)
			var crc uint16
			for i := 0; i < len(k); i++ {
				crc ^= uint16(k[i]) << 8
				for range 8 {
					if crc&0x8000 != 0 {
						crc = crc<<1 ^ 0x1021
					} else {
						crc <<= 1
					}
				}
			}
			if got := int(crc) % n; got != want {
				t.Fatalf("key %q, %d nodes: recomputed queue node %d, library's %d", k, n, got, want)
			}
		}
	}
}

// WaitersForTest returns how many of c's Lock calls wait in its hub
// (they found their key held), and how many of them wait as queued ones
// (woken only by a release naming them), not as fallen back to waking on
// any release.
func WaitersForTest(c *Client) (joined, queued int) {
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	seen := make(map[*waiter]bool)
	for _, m := range c.hub.waiters {
		for w := range m {
			if !seen[w] {
				seen[w] = true
				joined++
				if w.queued.Load() {
					queued++
				}
			}
		}
	}
	return joined, queued
}
