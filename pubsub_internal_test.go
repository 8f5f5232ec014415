package redlock

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// TestWakeKeyRules: which waiters of a key each announcement wakes
// (hub.wakeKey): the last reader's release ("r") wakes writers and the
// queued, never a waiting reader; a writer's release (empty) wakes
// readers and writers, and no queued waiter, which waits to be named;
// a release naming a queued waiter wakes it alone, and only with its
// current ticket; an election's announcement wakes its observers only;
// this Client's own release wakes a queued waiter only when it is next.
func TestWakeKeyRules(t *testing.T) {
	t.Parallel()
	const k = "k"
	named := func(id string, ticket int64) string { return wire.QueueMessage + id + ":" + string(rune('0'+ticket)) }
	for _, tc := range []struct {
		name, msg                               string
		reader, writer, queued, queuedHead, obs bool
	}{
		{name: "last reader left", msg: readersLeft, writer: true, queued: true, queuedHead: true, obs: true},
		{name: "writer released", msg: "", reader: true, writer: true, obs: true},
		{name: "names the queued, its ticket", msg: named("me", 3), writer: true, queued: true, obs: true},
		{name: "names the queued, an old ticket", msg: named("me", 2), writer: true, obs: true},
		{name: "names another Client's", msg: named("other", 3), writer: true, obs: true},
		{name: "elected", msg: electedMsg, obs: true},
		{name: "own release", msg: localWake, reader: true, writer: true, queuedHead: true, obs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hub{id: "me", waiters: map[string]map[*waiter]struct{}{}}
			mk := func(reader, watch, queued, head bool) *waiter {
				w := &waiter{keys: []string{k}, wake: make(chan struct{}, 1), reader: reader, watch: watch}
				w.queued.Store(queued)
				w.head.Store(head)
				w.ticket.Store(3)
				if h.waiters[k] == nil {
					h.waiters[k] = map[*waiter]struct{}{}
				}
				h.waiters[k][w] = struct{}{}
				return w
			}
			reader, writer := mk(true, false, false, false), mk(false, false, false, false)
			queued, head := mk(false, false, true, false), mk(false, false, true, true)
			head.ticket.Store(4) // not the one a "names the queued" message names
			obs := mk(false, true, false, false)
			h.wakeKey(k, tc.msg)
			woken := func(w *waiter) bool {
				select {
				case <-w.wake:
					return true
				default:
					return false
				}
			}
			require.Equal(t, tc.reader, woken(reader), "reader")
			require.Equal(t, tc.writer, woken(writer), "writer")
			require.Equal(t, tc.queued, woken(queued), "queued")
			require.Equal(t, tc.queuedHead, woken(head), "queued at the head")
			require.Equal(t, tc.obs, woken(obs), "observer")
		})
	}
}
