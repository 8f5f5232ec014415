package chaos

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"math"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Clock skew is injected by a go-redis hook, not by changing the node's
// clock: libfaketime crashes Debian's redis-server (jemalloc), and a
// node's expiry timer can only be made to run at another rate from
// outside by changing the TTLs it is given. A node whose clock runs r
// times faster than real time expires a key set with PX t after t/r real
// milliseconds; the hook gives it PX t/r instead, which has the same
// effect on the keys' lifetimes. Every go-redis client the Cluster makes
// for the node carries the node's hook, so the skew is a property of the
// node, whoever talks to it.

// SkewHook is a redis.Hook that divides every millisecond TTL sent to a
// node by the node's clock rate. It rewrites:
//
//   - EVAL/EVALSHA of a script that passes ARGV[2] to PX or PEXPIRE:
//     the lock's acquire and extend scripts (ARGV[1] = token, ARGV[2] =
//     TTL in ms). Scripts are told apart by their source, which the hook
//     reads from EVAL: go-redis sends EVALSHA first and EVAL after a
//     NOSCRIPT reply, so the source of every script that reaches a node
//     through a hook is seen before its SHA is used. An unknown SHA is
//     left alone, and so is every other script (release, the fencing
//     round, whose ARGV[2] is a fencing token, not a TTL);
//   - SET ... PX ms (and EX s, turned into PX), PEXPIRE key ms and
//     PSETEX key ms value.
//
// It is safe for concurrent use; Set may be called mid-lock.
type SkewHook struct {
	rate atomic.Uint64 // float64 bits; 0 means 1 (no skew)
}

// ttlScripts maps the SHA-1 of every script source a SkewHook has seen
// to whether ARGV[2] is a TTL in it. Shared by all hooks: a script has
// the same SHA everywhere.
var ttlScripts sync.Map // string -> bool

// ttlArg matches a Lua call that passes ARGV[2] as a millisecond TTL:
// 'PX', ARGV[2] or 'PEXPIRE', <key>, ARGV[2].
var ttlArg = regexp.MustCompile(`(?i)['"](px['"]\s*,|pexpire['"]\s*,\s*[^,()]+,)\s*ARGV\[2\]`)

// learnScript records whether src uses ARGV[2] as a TTL, and returns it.
func learnScript(src string) bool {
	sum := sha1.Sum([]byte(src))
	ttl := ttlArg.MatchString(src)
	ttlScripts.Store(hex.EncodeToString(sum[:]), ttl)
	return ttl
}

var _ redis.Hook = (*SkewHook)(nil)

// Set makes the node's clock run rate times as fast as real time: rate 2
// halves every TTL, rate 1 removes the skew. rate must be positive;
// others are taken as 1.
func (h *SkewHook) Set(rate float64) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		rate = 1
	}
	h.rate.Store(math.Float64bits(rate))
}

// Rate returns the node's clock rate (1: no skew).
func (h *SkewHook) Rate() float64 {
	b := h.rate.Load()
	if b == 0 {
		return 1
	}
	return math.Float64frombits(b)
}

// DialHook passes dials through.
func (h *SkewHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook rewrites the TTL of one command.
func (h *SkewHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.rewrite(cmd.Args())
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook rewrites the TTLs of every command of a pipeline.
func (h *SkewHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.rewrite(c.Args())
		}
		return next(ctx, cmds)
	}
}

// rewrite learns script sources and scales TTLs in args.
func (h *SkewHook) rewrite(args []any) {
	if len(args) > 1 {
		if name, _ := args[0].(string); strings.EqualFold(name, "eval") || strings.EqualFold(name, "eval_ro") {
			if src, ok := args[1].(string); ok {
				learnScript(src)
			}
		}
	}
	if r := h.Rate(); r != 1 {
		ScaleTTL(args, r)
	}
}

// ScaleTTL divides, in place, the millisecond TTL in a command's
// arguments by rate (see SkewHook for the commands and scripts it
// knows), rounding down, to no less than 1 ms. It reports whether it changed anything.
func ScaleTTL(args []any, rate float64) bool {
	if len(args) == 0 {
		return false
	}
	name, _ := args[0].(string)
	scale := func(ms int64) int64 { return max(1, int64(math.Floor(float64(ms)/rate))) }
	switch strings.ToLower(name) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
		if len(args) < 3 || !isTTLScript(strings.ToLower(name), args[1]) {
			return false
		}
		nk, ok := toInt(args[2])
		if !ok || nk < 0 {
			return false
		}
		argv := 3 + int(nk)
		if len(args) < argv+2 {
			return false
		}
		if ms, ok := toInt(args[argv+1]); ok {
			args[argv+1] = scale(ms)
			return true
		}
	case "set":
		for i := 3; i+1 < len(args); i++ {
			opt, _ := args[i].(string)
			v, ok := toInt(args[i+1])
			if !ok {
				continue
			}
			switch strings.ToLower(opt) {
			case "px":
				args[i+1] = scale(v)
				return true
			case "ex":
				args[i], args[i+1] = "px", scale(v*1000)
				return true
			}
		}
	case "pexpire", "psetex":
		if len(args) < 3 {
			return false
		}
		if v, ok := toInt(args[2]); ok {
			args[2] = scale(v)
			return true
		}
	}
	return false
}

// isTTLScript reports whether the script that an EVAL (source) or
// EVALSHA (SHA) names passes ARGV[2] as a TTL.
func isTTLScript(cmd string, script any) bool {
	s, _ := script.(string)
	if strings.HasPrefix(cmd, "evalsha") {
		ttl, _ := ttlScripts.Load(strings.ToLower(s))
		b, _ := ttl.(bool)
		return b
	}
	return ttlArg.MatchString(s)
}

// toInt reads an integer argument as go-redis holds it: an int type.
// Strings are left alone even when they are digits: a token may be.
func toInt(a any) (int64, bool) {
	switch v := a.(type) {
	case int:
		return int64(v), true
	case int64:
		return v, true
	case int32:
		return int64(v), true
	case uint64:
		return int64(v), true
	case uint32:
		return int64(v), true
	}
	return 0, false
}
