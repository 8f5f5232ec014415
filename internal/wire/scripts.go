package wire

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts run atomically on each node, one folder per lock kind
// under scripts/. They touch only the lock's own keys (and, with
// fencing, their counters). They are sent with EVALSHA, and with EVAL
// when a node does not have them cached (after a restart or SCRIPT
// FLUSH). The SHA-1 is computed once, here, not per call. An unfenced
// acquire of one key goes as a plain SET NX PX, and runs key/acquire.lua
// only when refused (see Request.Prepare); a release of one key runs
// key/release_one.lua.

//go:embed scripts
var scriptFS embed.FS

// src returns the text of a script under scripts/.
func src(name string) string {
	b, err := scriptFS.ReadFile("scripts/" + name)
	if err != nil {
		panic("wire: missing embedded script " + name) // a build mistake
	}
	return string(b)
}

var (
	writerMarkSrc = src("common/writer_mark.lua")
	// ownSrc: a key lock's value may carry metadata after its token.
	ownSrc = src("common/own.lua")
	// extendSrc: every kind's extension, with the heal of a node that
	// lost the lock (extend/kinds.lua), shared by the single-lock
	// scripts and the batch.
	extendSrc = ownSrc + src("extend/kinds.lua")

	ScriptAcquire       = newLua(ownSrc + writerMarkSrc + typed(src("key/acquire.lua"), "0"))
	ScriptAcquireFenced = newLua(ownSrc + writerMarkSrc + typed(src("key/acquire_fenced.lua"), "{0, 0}"))
	ScriptFence         = newLua(ownSrc + typed(src("fence/raise.lua"), "-1"))
	// ScriptSwap is an acquire that takes the key from the holder handing
	// it on (Request.Prev).
	ScriptSwap    = newLua(ownSrc + typed(src("key/swap.lua"), "0"))
	ScriptExtend  = newLua(extendSrc + src("key/extend.lua"))
	ScriptRelease = newLua(ownSrc + typed(src("key/release.lua"), "-1"))
	// ScriptReleaseOne carries its own ownership and type checks, inline
	// rather than own() and typed(): every unlock runs it, and the
	// helpers cost the node about 1 µs a call, of 6–7.
	ScriptReleaseOne = newLua(src("key/release_one.lua"))
	// ScriptQueue is a waiting Lock's check-in at its key's wait queue.
	ScriptQueue = newLua(src("key/queue.lua"))
	// ScriptInspect reads who holds a lock on a node (Inspect).
	ScriptInspect = newLua(ownSrc + src("key/inspect.lua"))
	// ScriptProclaim rewrites a key lock holder's metadata (Proclaim).
	ScriptProclaim = newLua(ownSrc + src("key/proclaim.lua"))
	// ScriptHistory reads an election's recent publications (Observe).
	ScriptHistory = newLua(src("key/history.lua"))
	// ScriptFencedSet is FencedSet's: a write to a resource guarded by
	// fencing tokens.
	ScriptFencedSet = newLua(src("fence/fenced_set.lua"))
	// ScriptExtendBatch extends many locks of one node in one call (see
	// Batch).
	ScriptExtendBatch = newLua(extendSrc + src("extend/batch.lua"))

	// The lock family: per kind, acquire, extend, release. The
	// semaphore's scripts check the key's type themselves.
	familyScripts = [...][3]*Script{
		KindRead:   {newLua(ownSrc + typed(src("read/acquire.lua"), "0")), newLua(extendSrc + src("read/extend.lua")), newLua(typed(src("read/release.lua"), "-1"))},
		KindPath:   {newLua(ownSrc + typed(src("path/acquire.lua"), "0")), newLua(extendSrc + src("path/extend.lua")), newLua(typed(src("path/release.lua"), "-1"))},
		KindPermit: {newLua(src("sem/acquire.lua")), newLua(extendSrc + src("sem/extend.lua")), newLua(src("sem/release.lua"))},
	}
)

// FamilyScript returns the script of a family kind (KindRead, KindPath,
// KindPermit) for op.
func FamilyScript(k Kind, op Op) *Script {
	s := &familyScripts[k]
	switch op {
	case OpAcquire:
		return s[0]
	case OpExtend:
		return s[1]
	}
	return s[2]
}

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
//     such nodes fail ends in ErrUnreachable (and Lock stops retrying).
//
// An extension meets either kind as "not ours" (StatusTaken; Classify,
// extend/batch.lua): the lock cannot be held on that node, which is what
// the loss of a lock is judged by.
//
// The check costs nothing on the way that succeeds: typed runs the
// script's body under pcall, and only when it fails with WRONGTYPE reads
// the TYPE of the script's keys, answering refused (the script's "taken"
// reply) when each is a string, a sorted set or missing, and the error
// otherwise. An acquire reads each of its keys before it writes any
// (path/acquire.lua clears expired intention records first for this), so
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

// Script is a redis.Script with its source and SHA-1 boxed once, so
// that building a command for it allocates neither.
type Script struct {
	*redis.Script
	Src any // the source, for EVAL
	SHA any // the SHA-1, for EVALSHA
}

func newLua(src string) *Script {
	s := redis.NewScript(src)
	return &Script{Script: s, Src: src, SHA: s.Hash()}
}
