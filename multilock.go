package redlock

import (
	"github.com/redis/go-redis/v9"
)

// MultiLock is a Client whose locks must be held on every one of its
// nodes, not on a majority: NewMultiLock makes one. Every method of
// Client works on it unchanged, with the quorum (Client.Quorum) N, and so
// does everything built on a Client (an Election, Inspect, the lock
// family), with every node as the quorum.
//
// It trades availability for tolerance of data loss: while any node is
// down or slow, no lock can be won (and a held lock can be neither
// extended nor proven released), but a lock stays exclusive as long as one
// node still holds its key, so up to N-1 nodes may lose their data
// without two holders. A round still decides early: an attempt fails as
// soon as one node refuses or fails. See docs/multilock.md for when to
// pick which.
type MultiLock = Client

// NewMultiLock returns a MultiLock over nodes, which must be independent
// Redis masters, as for New: its locks need every node. It does no I/O.
// Options and errors are those of New.
func NewMultiLock(nodes []redis.UniversalClient, opts ...Option) (*MultiLock, error) {
	return newClient(nodes, len(nodes), opts, false)
}
