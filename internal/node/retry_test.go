package node

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// awaitNoPending waits (bounded) until nd has no queued release.
func awaitNoPending(t *testing.T, nd *Node, within time.Duration, msg string) {
	t.Helper()
	require.Eventually(t, func() bool { return nd.PendingReleases() == 0 }, within, 10*time.Millisecond, msg)
}

// TestRetryReleaseLandsAfterOutage: a release queued while its node is
// stopped is tried again until the node answers, and then the key is
// gone and nothing stays queued.
func TestRetryReleaseLandsAfterOutage(t *testing.T) {
	t.Parallel()
	node := redistest.Nodes(t, 1)[0]
	rc := redistest.Client(t, node)
	nd, h := newTestNode(t, rc)
	ctx := context.Background()
	require.Equal(t, wire.StatusOK, nd.Exec(ctx, prepared(wire.OpAcquire, "k", "tok")).St)
	require.NoError(t, node.Pause())
	t.Cleanup(func() { _ = node.Resume() })
	nd.RetryRelease(prepared(wire.OpRelease, "k", "tok"), []string{"k"}, time.Now().Add(time.Minute), 0)
	require.Equal(t, 1, nd.PendingReleases())
	require.NoError(t, node.Resume())
	awaitNoPending(t, nd, 20*time.Second, "the release is still queued after the node came back")
	require.Eventually(t, func() bool {
		n, err := rc.Exists(ctx, "k").Result()
		return err == nil && n == 0
	}, 5*time.Second, 10*time.Millisecond, "the key outlived its retried release")
	require.Zero(t, h.dropped.Load())
}

// TestRetryReleaseGivesUpAtExpiry: a release whose key has expired on
// the node by itself (until has passed) is dropped from the queue, even
// while the node stays stopped: the loop does not retry forever.
func TestRetryReleaseGivesUpAtExpiry(t *testing.T) {
	t.Parallel()
	node := redistest.Nodes(t, 1)[0]
	nd, _ := newTestNode(t, redistest.Client(t, node))
	require.NoError(t, node.Pause())
	t.Cleanup(func() { _ = node.Resume() })
	nd.RetryRelease(prepared(wire.OpRelease, "k", "tok"), []string{"k"}, time.Now().Add(300*time.Millisecond), 0)
	awaitNoPending(t, nd, 20*time.Second, "a release whose key has expired is still queued")
}

// TestRetryReleaseAfterClose: after the Client's Close, a release is not
// queued but reported dropped (its key expires with its TTL), and a
// recheck of a release that found nothing is queued for later, not run
// at once.
func TestRetryReleaseAfterClose(t *testing.T) {
	t.Parallel()
	rc := redistest.Client(t, redistest.Nodes(t, 1)[0])
	nd, h := newTestNode(t, rc)
	nd.RetryRelease(prepared(wire.OpRelease, "r", "tok"), []string{"r"}, time.Now().Add(time.Minute), time.Hour)
	require.Equal(t, 1, nd.PendingReleases(), "a recheck an hour away")
	h.close()
	awaitNoPending(t, nd, 20*time.Second, "Close left a queued release")
	require.Eventually(t, func() bool {
		nd.retry.mu.Lock()
		defer nd.retry.mu.Unlock()
		return !nd.retry.running
	}, 20*time.Second, 10*time.Millisecond, "the retry loop outlived Close")
	nd.RetryRelease(prepared(wire.OpRelease, "k", "tok"), []string{"k"}, time.Now().Add(time.Minute), 0)
	require.Zero(t, nd.PendingReleases())
	require.Equal(t, int64(1), h.dropped.Load())
}

// TestRetryReleaseDroppedAtClose: a queued release that Close's last
// attempt cannot deliver (its node is stopped) is reported dropped, so
// the Client's log names it, and the loop ends within the final wait.
func TestRetryReleaseDroppedAtClose(t *testing.T) {
	t.Parallel()
	node := redistest.Nodes(t, 1)[0]
	nd, h := newTestNode(t, redistest.Client(t, node))
	require.NoError(t, node.Pause())
	t.Cleanup(func() { _ = node.Resume() })
	for _, k := range []string{"a", "b"} {
		nd.RetryRelease(prepared(wire.OpRelease, k, "tok"), []string{k}, time.Now().Add(time.Minute), 0)
	}
	require.Equal(t, 2, nd.PendingReleases())
	h.close()
	require.Eventually(t, func() bool { return h.dropped.Load() == 2 }, 20*time.Second, 10*time.Millisecond,
		"want both releases reported dropped")
	require.Zero(t, nd.PendingReleases())
}
