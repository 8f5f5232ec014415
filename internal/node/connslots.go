package node

import (
	"runtime"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/redis/go-redis/v9"
)

// ConnSlots bounds how many connections of one go-redis client the pipe
// leaders (leaderConn) hold at once, over every Client in the process
// that shares it: a quarter of its pool (PoolSize/4, at least 1).
//
// A leader's connection is out of the pool for as long as the node is
// busy. Without the bound, Clients that share a go-redis client, each
// with a busy leader, held its whole pool: the client's other users (a
// direct PING, another leader's extension batch, sent through the pool)
// then waited for PoolTimeout, and auto-extended locks ran out meanwhile.
// A leader that finds no free slot sends through the pool, as a leader
// of a client that does not fit (ownConnFits) always does, and looks
// again at its next request.
//
// The slots live in a process-wide table, as a pool is shared
// process-wide. They are shared by every client of one server address,
// database, user and pool size (slotsKey), not kept per *redis.Client:
// go-redis's WithTimeout makes a new *redis.Client on the same pool (and
// a copy of its Options), which a table keyed by client would have given
// a quarter of the pool of its own. Two clients made apart for the same
// server share one quarter of a pool: their leaders hold fewer
// connections than they might, never more. An entry goes when the last
// client using it is garbage collected (as the restart guard's dial
// counters do, guard.go).
type ConnSlots struct {
	held atomic.Int32
	max  int32
	key  slotsKey
	refs int // clients using it; slotsMu
}

// slotsKey is what the clients sharing a pool have in common.
type slotsKey struct {
	network, addr, user string
	db, pool            int
}

// take takes a slot if one is free.
func (s *ConnSlots) take() bool {
	for {
		n := s.held.Load()
		if n >= s.max {
			return false
		}
		if s.held.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// give gives back a slot that take took.
func (s *ConnSlots) give() { s.held.Add(-1) }

// Held returns how many slots are taken now.
func (s *ConnSlots) Held() int32 { return s.held.Load() }

// Max returns how many slots there are.
func (s *ConnSlots) Max() int32 { return s.max }

// connSlotsFor is how many connections of a client with options o its
// leaders may hold at once.
func ConnSlotsFor(o *redis.Options) int32 {
	return int32(max(1, o.PoolSize/4))
}

var (
	slotsMu  sync.Mutex
	slotsTab = map[weak.Pointer[redis.Client]]*ConnSlots{} // the slots of each client seen
	slotsBy  = map[slotsKey]*ConnSlots{}                   // the same, by what clients share
)

// connSlotsOf returns rc's slots, made on first use.
func ConnSlotsOf(rc *redis.Client) *ConnSlots {
	k := weak.Make(rc)
	slotsMu.Lock()
	defer slotsMu.Unlock()
	if s := slotsTab[k]; s != nil {
		return s
	}
	o := rc.Options()
	sk := slotsKey{network: o.Network, addr: o.Addr, user: o.Username, db: o.DB, pool: o.PoolSize}
	s := slotsBy[sk]
	if s == nil {
		s = &ConnSlots{max: ConnSlotsFor(o), key: sk}
		slotsBy[sk] = s
	}
	s.refs++
	slotsTab[k] = s
	runtime.AddCleanup(rc, func(k weak.Pointer[redis.Client]) {
		slotsMu.Lock()
		defer slotsMu.Unlock()
		if s := slotsTab[k]; s != nil {
			delete(slotsTab, k)
			if s.refs--; s.refs == 0 {
				delete(slotsBy, s.key)
			}
		}
	}, k)
	return s
}
