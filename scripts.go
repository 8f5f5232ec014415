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
// once, here, not per call.

var (
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
	//go:embed fenced_set.lua
	fencedSetSrc string

	scriptAcquire       = newLua(acquireSrc)
	scriptAcquireFenced = newLua(acquireFencedSrc)
	scriptFence         = newLua(fenceSrc)
	scriptExtend        = newLua(extendSrc)
	scriptRelease       = newLua(releaseSrc)
	scriptFencedSet     = newLua(fencedSetSrc)
)

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
