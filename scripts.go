package redlock

import (
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts run atomically on each node. They touch only the lock's
// own keys (and, with fencing, their counters FenceKey(key)). go-redis
// runs them with EVALSHA and falls back to EVAL when a node does not have
// them cached (after a restart or SCRIPT FLUSH). The SHA-1 is computed
// once, here, not per call. An unfenced acquire of one key goes as a
// plain SET NX PX, and runs acquire.lua only when refused (see
// request.prepare); a release of one key runs release_one.lua.

var (
	//go:embed writer_mark.lua
	writerMarkSrc string
	//go:embed acquire.lua
	acquireSrc string
	//go:embed acquire_fenced.lua
	acquireFencedSrc string
	//go:embed fence.lua
	fenceSrc string
	//go:embed extend.lua
	extendSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed release_one.lua
	releaseOneSrc string
	//go:embed fenced_set.lua
	fencedSetSrc string
	//go:embed read_acquire.lua
	readAcquireSrc string
	//go:embed read_extend.lua
	readExtendSrc string
	//go:embed read_release.lua
	readReleaseSrc string
	//go:embed path_acquire.lua
	pathAcquireSrc string
	//go:embed path_extend.lua
	pathExtendSrc string
	//go:embed path_release.lua
	pathReleaseSrc string
	//go:embed sem_acquire.lua
	semAcquireSrc string
	//go:embed sem_extend.lua
	semExtendSrc string
	//go:embed sem_release.lua
	semReleaseSrc string

	scriptAcquire       = newLua(writerMarkSrc + typed(acquireSrc, "0"))
	scriptAcquireFenced = newLua(writerMarkSrc + typed(acquireFencedSrc, "{0, 0}"))
	scriptFence         = newLua(typed(fenceSrc, "-1"))
	scriptExtend        = newLua(extendSrc)
	scriptRelease       = newLua(typed(releaseSrc, "-1"))
	scriptReleaseOne    = newLua(typed(releaseOneSrc, "-1"))
	scriptFencedSet     = newLua(fencedSetSrc)

	// The lock family (family.go): per kind, acquire, extend, release.
	// The semaphore's scripts check the key's type themselves.
	familyScripts = [...][3]*luaScript{
		kindRead:   {newLua(typed(readAcquireSrc, "0")), newLua(readExtendSrc), newLua(typed(readReleaseSrc, "-1"))},
		kindPath:   {newLua(typed(pathAcquireSrc, "0")), newLua(pathExtendSrc), newLua(typed(pathReleaseSrc, "-1"))},
		kindPermit: {newLua(semAcquireSrc), newLua(semExtendSrc), newLua(semReleaseSrc)},
	}
)

// A key of a lock may hold a value of another type than the script
// reads there. Whose value it is decides what that means:
//
//   - Our lock kinds write strings (a lock's token, the readers' marker,
//     a path's holder, a fence counter) and sorted sets (a semaphore, a
//     read lock's readers, a path's intention records). A key lock on a
//     semaphore's key, or a permit on a lock's key, meets another of our
//     locks: the key is taken, as by another token.
//   - Any other type (a set, a list, a hash, a stream, a module's type)
//     is no lock of ours: the application keeps its own data under the
//     lock's name. Retrying cannot win it, and calling it contention
//     would hide the mistake behind a wait, so the node fails with the
//     server's WRONGTYPE error (a redis.Error), and a round that too many
//     such nodes fail ends in ErrUnreachable (and Lock stops retrying:
//     foreignBlocked).
//
// An extension meets either kind as "not ours" (NodeTaken; request.after,
// extend_batch.lua): the lock cannot be held on that node, which is what
// the loss of a lock is judged by.
//
// The check costs nothing on the way that succeeds: typed runs the
// script's body under pcall, and only when it fails with WRONGTYPE reads
// the TYPE of the script's keys, answering refused (the script's "taken"
// reply) when each is a string, a sorted set or missing, and the error
// otherwise. An acquire reads each of its keys before it writes any
// (path_acquire.lua clears expired intention records first for this), so
// one that fails so has changed nothing but expired members of a sorted
// set; a release may have removed our own token from the keys before the
// one it failed on. A node where TYPE is denied (an ACL of plain locks
// only) reports every WRONGTYPE as the error.
const typedEpilogue = `
end
local ok, r = pcall(body)
if ok then
  return r
end
local msg = type(r) == 'table' and r.err or tostring(r)
local at = string.find(msg, 'WRONGTYPE', 1, true)
if not at then
  return redis.error_reply(msg)
end
msg = string.sub(msg, at)
for i = 1, #KEYS do
  local ty = redis.pcall('TYPE', KEYS[i])
  ty = type(ty) == 'table' and ty.ok
  if ty ~= 'string' and ty ~= 'zset' and ty ~= 'none' then
    return redis.error_reply(msg)
  end
end
return `

// typed wraps an acquire's or a release's script src so that a key of
// our own other kind reads as taken (the reply refused) and any other
// type as the node's WRONGTYPE error (see typedEpilogue).
func typed(src, refused string) string {
	return "local function body()\n" + src + typedEpilogue + refused + "\n"
}

// luaScript is a redis.Script with its source and SHA-1 boxed once, so
// that building a command for it allocates neither.
type luaScript struct {
	*redis.Script
	src any // the source, for EVAL
	sha any // the SHA-1, for EVALSHA
}

func newLua(src string) *luaScript {
	s := redis.NewScript(src)
	return &luaScript{Script: s, src: src, sha: s.Hash()}
}

func errUnexpectedReply(v any) error {
	return fmt.Errorf("redlock: unexpected reply %v from script", v)
}
