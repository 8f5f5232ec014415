package chaos_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/chaos"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

// Sources shaped like the library's scripts: acquire and extend take a
// TTL as ARGV[2]; the fencing round takes a fencing token there.
const (
	acquireSrc = "for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end return 1"
	extendSrc  = "for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end return 1"
	fenceSrc   = "local f = tonumber(ARGV[2]) redis.call('SET', KEYS[2], ARGV[2]) return 1"
)

func sha(src string) string {
	s := sha1.Sum([]byte(src))
	return hex.EncodeToString(s[:])
}

func TestScaleTTL(t *testing.T) {
	// EVALSHA of a script whose source no hook has seen yet is left alone.
	unseen := "return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) -- unseen"
	args := []any{"evalsha", sha(unseen), 1, "k", "tok", int64(1000)}
	if chaos.ScaleTTL(args, 2) {
		t.Errorf("want an unknown SHA left alone, got %v", args)
	}

	var h chaos.SkewHook
	h.Set(2)
	run := func(args []any) []any {
		t.Helper()
		cmd := redis.NewCmd(context.Background(), args...)
		_ = h.ProcessHook(func(context.Context, redis.Cmder) error { return nil })(context.Background(), cmd)
		return cmd.Args()
	}
	tests := []struct {
		name string
		args []any
		want []any
	}{
		{"eval acquire", []any{"eval", acquireSrc, 1, "k", "tok", int64(1000)}, []any{"eval", acquireSrc, 1, "k", "tok", int64(500)}},
		{"evalsha acquire once seen", []any{"evalsha", sha(acquireSrc), 1, "k", "tok", int64(1000)}, []any{"evalsha", sha(acquireSrc), 1, "k", "tok", int64(500)}},
		{"eval extend", []any{"eval", extendSrc, 2, "a", "b", "tok", int64(301)}, []any{"eval", extendSrc, 2, "a", "b", "tok", int64(150)}},
		{"fence round untouched", []any{"eval", fenceSrc, 2, "k", "k:fence", "tok", int64(7)}, []any{"eval", fenceSrc, 2, "k", "k:fence", "tok", int64(7)}},
		{"evalsha fence untouched", []any{"evalsha", sha(fenceSrc), 2, "k", "k:fence", "tok", int64(7)}, []any{"evalsha", sha(fenceSrc), 2, "k", "k:fence", "tok", int64(7)}},
		{"set px", []any{"set", "k", "v", "px", int64(1000)}, []any{"set", "k", "v", "px", int64(500)}},
		{"set ex", []any{"set", "k", "v", "ex", int64(2)}, []any{"set", "k", "v", "px", int64(1000)}},
		{"pexpire", []any{"pexpire", "k", int64(9)}, []any{"pexpire", "k", int64(4)}},
		{"never below 1ms", []any{"pexpire", "k", int64(1)}, []any{"pexpire", "k", int64(1)}},
		{"get untouched", []any{"get", "k"}, []any{"get", "k"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(tt.args)
			if len(got) != len(tt.want) {
				t.Fatalf("want %v, got %v", tt.want, got)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("want %v, got %v", tt.want, got)
				}
			}
		})
	}
}

// TestSkewHookOnNode checks the effect on a real node: a key set with PX
// 2000 through a hook of rate 4 lives about 500ms.
func TestSkewHookOnNode(t *testing.T) {
	nodes := redistest.Nodes(t, 1)
	c := redistest.Client(t, nodes[0])
	h := &chaos.SkewHook{}
	c.AddHook(h)
	ctx := context.Background()
	h.Set(4)
	if err := c.Set(ctx, "k", "v", 2*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	ttl, err := c.PTTL(ctx, "k").Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl > 500*time.Millisecond || ttl < 400*time.Millisecond {
		t.Errorf("want a TTL of about 500ms, got %v", ttl)
	}
	h.Set(1)
	if err := c.Set(ctx, "k", "v", 2*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := c.PTTL(ctx, "k").Result(); ttl < 1900*time.Millisecond {
		t.Errorf("want the TTL unscaled at rate 1, got %v", ttl)
	}
}
