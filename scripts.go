package redlock

import (
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts run atomically on each node. They touch only the lock's
// own keys. go-redis runs them with EVALSHA and falls back to EVAL when a
// node does not have them cached (after a restart or SCRIPT FLUSH). The
// SHA-1 is computed once, here, not per call.

var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed extend.lua
	extendSrc string
	//go:embed release.lua
	releaseSrc string

	scriptAcquire = redis.NewScript(acquireSrc)
	scriptExtend  = redis.NewScript(extendSrc)
	scriptRelease = redis.NewScript(releaseSrc)
)

func errUnexpectedReply(v any) error {
	return fmt.Errorf("redlock: unexpected reply %v from script", v)
}
