package redlock

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// Fencing tokens (WithFencing).
//
// Every node keeps, beside each lock key k, a counter fenceKey(k) that
// never expires and never decreases. A fenced acquisition runs:
//
//  1. The acquire round (key/acquire_fenced.lua, under internal/wire/scripts). On a node that grants, the
//     script sets k to our token and, in the same atomic step, every
//     counter of the lock's keys to c = 1 + the largest of them, and
//     returns c. The round is won, as any round, on the first N/2+1
//     grants; call that set Q. The token is f = max of c over Q.
//  2. When every node of Q returned f, the counters already equal f on a
//     majority, each raised while our token held the key: done, no second
//     round (the usual case: all nodes see every acquisition, so their
//     counters move in lock-step). Otherwise a raise round (fence/raise.lua)
//     sets every counter to max(counter, f) on each node where our token
//     still holds every key, and must itself reach N/2+1 nodes within the
//     lock's validity, else the acquisition fails (ErrNotObtained) and is
//     released.
//
// Either way the acquisition ends with a set R of at least N/2+1 nodes on
// each of which, at some instant r(n), our token held the keys and the
// counters were raised to at least f.
//
// Claim: if acquisition B starts (sends its first request) after
// fenced acquisition A returned, and both win, then f(B) > f(A), as long
// as no node loses data (counters and keys survive restarts).
//
// Proof: R(A) and Q(B) are both majorities of the same N nodes, so they
// share a node n. A's raise at r(n) happened before A returned, hence
// before B's grant on n at g(n) > r(n). Counters never decrease, so at
// g(n) every counter of A's keys on n is >= f(A). B's script read them
// (B shares at least one key with A: for one key, that key; for
// multi-key locks, every key is fenced) and returned c(n) >= f(A) + 1, so
// f(B) >= c(n) > f(A). QED. Nothing in it depends on timing: the early
// decision of a round only means Q and R are the first majorities to
// answer, and late replies can only raise counters further.
//
// Successive holders satisfy the premise: B cannot win while A holds the
// lock, so B's winning attempt starts after A's acquisition returned
// unless Redlock's own timing assumption was broken (see the README).
//
// The single-round design, max over Q of INCR, fails because a large
// counter seen only by A's quorum is raised on one node alone: A on
// {100, 5, 7} gets 100; B on {6, 8, 9} gets 9. Step 2 raises the counter
// on a majority, which every later quorum meets.
//
// Limits: a node that loses its data (restart without appendfsync always)
// may forget its counter, and if every node a later quorum shares with R
// forgot it, the token can go backwards; the restart guard narrows but
// does not close that window. A Redis Cluster node needs each key in a
// hash tag ({...}), because a key and its counter must share a slot.

// Fence returns the lock's fencing token, or 0 when the lock was acquired
// without WithFencing (and for a nil *Lock). For successive holders of a
// key, tokens strictly increase while no node loses its data; for a lock
// over several keys the token exceeds that of every earlier holder of any
// of them. Pass it to the protected resource (see FencedSet), which must
// reject any token lower than one it has seen.
func (l *Lock) Fence() int64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// quorumFence returns the largest counter among the granting nodes and
// whether they all had it.
func quorumFence(res []NodeResult, fences []int64) (f int64, synced bool) {
	synced = true
	first := true
	for i, r := range res {
		if r.Status != statusOK {
			continue
		}
		if first {
			f, first = fences[i], false
			continue
		}
		if fences[i] != f {
			synced = false
		}
		f = max(f, fences[i])
	}
	return f, synced
}

// fenceLock completes a won fenced acquisition: it runs the raise round
// when the winning quorum's counters differ, and sets l.fence. On failure
// the lock is released and the error matches ErrNotObtained.
func fenceLock(ctx context.Context, c *Client, l *Lock, out outcome, cfg *config) error {
	if out.fence <= 0 {
		_ = l.Unlock(context.WithoutCancel(ctx))
		return out.rd.resultError(ErrNotObtained, wire.ErrUnexpectedReply(out.fence))
	}
	if !out.fenceSynced {
		fo := runReq(ctx, c, &request{
			w:    wire.Request{Op: opFence, Token: l.token, TTL: l.ttl, Fence: out.fence},
			keys: l.keys, origin: out.start,
		}, cfg)
		if !fo.won {
			_ = l.Unlock(context.WithoutCancel(ctx))
			return fo.err
		}
	}
	l.fence = out.fence
	return nil
}

// FencedSet stores value in the resource key on c (a hash with fields
// "value" and "fence") when fence is greater than every fence the
// resource has accepted, in one Lua script: the resource side of fencing,
// which refuses a holder that paused past its validity. c is the Redis
// that keeps the resource, usually not a lock node; read the value with
// HGET key value.
//
// Errors: ErrStaleFence when fence is not above the highest accepted;
// ErrInvalid for a nil ctx or c, an empty key or a fence <= 0 (a lock
// taken without WithFencing has Fence 0); otherwise the Redis error.
func FencedSet(ctx context.Context, c redis.Scripter, key string, fence int64, value any) error {
	switch {
	case ctx == nil:
		return invalidf("nil context")
	case c == nil || isNilPointer(c):
		return invalidf("nil redis.Scripter")
	case key == "":
		return invalidf("empty key")
	case fence <= 0:
		return invalidf("fencing token %d is not positive (was the lock acquired WithFencing?)", fence)
	}
	vs, err := wire.ScriptFencedSet.Run(ctx, c, []string{key}, fence, value).Int64Slice()
	if err != nil {
		return err
	}
	if len(vs) != 2 {
		return wire.ErrUnexpectedReply(vs)
	}
	if vs[0] != 1 {
		return fmt.Errorf("%w: %q refused token %d, has seen %d", ErrStaleFence, key, fence, vs[1])
	}
	return nil
}
