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

	scriptAcquire       = newLua(writerMarkSrc + acquireSrc)
	scriptAcquireFenced = newLua(writerMarkSrc + acquireFencedSrc)
	scriptFence         = newLua(fenceSrc)
	scriptExtend        = newLua(extendSrc)
	scriptRelease       = newLua(releaseSrc)
	scriptReleaseOne    = newLua(releaseOneSrc)
	scriptFencedSet     = newLua(fencedSetSrc)

	// The lock family (family.go): per kind, acquire, extend, release.
	familyScripts = [...][3]*luaScript{
		kindRead:   {newLua(readAcquireSrc), newLua(readExtendSrc), newLua(readReleaseSrc)},
		kindPath:   {newLua(pathAcquireSrc), newLua(pathExtendSrc), newLua(pathReleaseSrc)},
		kindPermit: {newLua(semAcquireSrc), newLua(semExtendSrc), newLua(semReleaseSrc)},
	}
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
