package wire

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// TestSwapTakesOnlyFromPrev: a hand-on (key/swap.lua, Request.Prev)
// takes the key where it holds the old holder's token, with or without
// metadata, or is missing; and never from anyone else, nor from a read
// lock or another kind. Run on a real node, each state afresh.
func TestSwapTakesOnlyFromPrev(t *testing.T) {
	node, err := redisnode.Start(redisnode.Options{})
	if err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(func() { _ = node.Close() })
	c := redis.NewClient(&redis.Options{Addr: node.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	const key, prev, next = "k", "tok-prev", "tok-next\x00meta-b"
	cases := []struct {
		name   string
		set    func() error // nil: the key is missing
		st     Status
		free   bool
		kept   bool   // the key keeps its value
		holder string // a refusal's metadata
	}{
		{"missing", nil, StatusOK, true, false, ""},
		{"the old holder's", func() error { return c.Set(ctx, key, prev, time.Minute).Err() }, StatusOK, false, false, ""},
		{"the old holder's with metadata", func() error { return c.Set(ctx, key, prev+"\x00meta-a", time.Minute).Err() }, StatusOK, false, false, ""},
		{"already the new holder's", func() error { return c.Set(ctx, key, "tok-next", time.Minute).Err() }, StatusOK, false, false, ""},
		{"another's", func() error { return c.Set(ctx, key, "tok-other\x00meta-c", time.Minute).Err() }, StatusTaken, false, true, "meta-c"},
		{"a prefix of the old token", func() error { return c.Set(ctx, key, "tok-pre", time.Minute).Err() }, StatusTaken, false, true, ""},
		{"readers", func() error { return c.Set(ctx, key, ReadMarker, time.Minute).Err() }, StatusTaken, false, true, ""},
		{"a semaphore", func() error { return c.ZAdd(ctx, key, redis.Z{Score: 1, Member: prev}).Err() }, StatusTaken, false, true, ""},
		{"a hash", func() error { return c.HSet(ctx, key, "f", prev).Err() }, StatusFailed, false, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			if tc.set != nil {
				if err := tc.set(); err != nil {
					t.Fatal(err)
				}
			}
			typ := c.Type(ctx, key).Val()
			before := c.Dump(ctx, key).Val()
			r := &Request{Op: OpAcquire, Token: next, TTL: time.Minute, Prev: prev, Intent: time.Second}
			r.Prepare(1, []string{key}, Announce{})
			if r.Setnx || r.Script != ScriptSwap {
				t.Fatalf("a hand-on must run key/swap.lua, got setnx %v", r.Setnx)
			}
			args := r.Args(0)
			res, err := c.Do(ctx, append([]any{"eval", ScriptSwap.Src}, args[2:]...)...).Result()
			var rep Reply
			if err != nil {
				rep = Reply{St: StatusFailed, Err: err}
			} else {
				rep = Classify(r, res)
			}
			if rep.St != tc.st || rep.Free != tc.free || rep.Holder != tc.holder {
				t.Fatalf("reply %v (%v): want status %v free %v holder %q, got %+v", res, err, tc.st, tc.free, tc.holder, rep)
			}
			if tc.kept {
				if c.Type(ctx, key).Val() != typ || c.Dump(ctx, key).Val() != before {
					t.Fatalf("the key changed: was %s", typ)
				}
				return
			}
			if v := c.Get(ctx, key).Val(); v != next {
				t.Fatalf("the key holds %q, want the new holder's %q", v, next)
			}
			if ttl := c.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Minute {
				t.Fatalf("the key's TTL is %v, want the new holder's minute", ttl)
			}
		})
	}
	// 2 is a hand-on's "free" and no other acquire's.
	if r := Classify(&Request{Op: OpAcquire}, int64(2)); r.St != StatusFailed {
		t.Errorf("a plain acquire's 2: want failed, got %+v", r)
	}
}
