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

	scriptAcquire       = redis.NewScript(acquireSrc)
	scriptAcquireFenced = redis.NewScript(acquireFencedSrc)
	scriptFence         = redis.NewScript(fenceSrc)
	scriptExtend        = redis.NewScript(extendSrc)
	scriptRelease       = redis.NewScript(releaseSrc)
	scriptFencedSet     = redis.NewScript(fencedSetSrc)
)

func errUnexpectedReply(v any) error {
	return fmt.Errorf("redlock: unexpected reply %v from script", v)
}
