package redlock

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

// QueueNodeForTest is the index of the node that keeps key's wait
// queue among n (no key prefix).
func QueueNodeForTest(key string, n int) int { return queueNode("", key, n) }

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

// LineForTest returns how many of c's Lock calls are in key's line, and
// whether its front call waits to be handed the key (handon.go).
func LineForTest(c *Client, key string) (n int, asks bool) {
	c.lines.mu.Lock()
	defer c.lines.mu.Unlock()
	if ln := c.lines.m[key]; ln != nil {
		return ln.n, ln.ask != nil
	}
	return 0, false
}
