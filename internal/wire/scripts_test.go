package wire

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// TestReleaseOneAgreesWithRelease: the release of one key
// (key/release_one.lua, written for the node's CPU) answers as the
// general release (key/release.lua under own() and typed()) in every
// state the key can be in, deletes the same, and announces the same
// channel. Run on a real node, each state set up afresh for each script.
func TestReleaseOneAgreesWithRelease(t *testing.T) {
	node, err := redisnode.Start(redisnode.Options{})
	if err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(func() { _ = node.Close() })
	c := redis.NewClient(&redis.Options{Addr: node.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()

	const prefix = "app:"
	key := prefix + "k"
	ours, meta := "tok-ours", "tok-ours\x00host-a"
	states := []struct {
		name string
		set  func() error // nil: the key is missing
	}{
		{"missing", nil},
		{"ours", func() error { return c.Set(ctx, key, ours, time.Minute).Err() }},
		{"ours with metadata", func() error { return c.Set(ctx, key, meta, time.Minute).Err() }},
		{"another's", func() error { return c.Set(ctx, key, "tok-other", time.Minute).Err() }},
		{"another's with our metadata", func() error { return c.Set(ctx, key, "tok-other\x00host-a", time.Minute).Err() }},
		{"a prefix of ours", func() error { return c.Set(ctx, key, "tok-ou", time.Minute).Err() }},
		{"empty", func() error { return c.Set(ctx, key, "", time.Minute).Err() }},
		{"a sorted set (a semaphore)", func() error { return c.ZAdd(ctx, key, redis.Z{Score: 1, Member: ours}).Err() }},
		{"a set", func() error { return c.SAdd(ctx, key, ours).Err() }},
		{"a hash", func() error { return c.HSet(ctx, key, "f", ours).Err() }},
	}
	type result struct {
		reply   string
		left    string // the key's type after the release
		channel string // what was announced, "" for nothing
	}
	run := func(t *testing.T, s *Script, set func() error, token string, argv []any) result {
		t.Helper()
		require := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		require(c.Del(ctx, key).Err())
		if set != nil {
			require(set())
		}
		sub := c.PSubscribe(ctx, "rel:*")
		defer sub.Close()
		_, err := sub.Receive(ctx) // the subscription's confirmation
		require(err)
		res, err := c.EvalSha(ctx, s.SHA.(string), []string{key}, append([]any{token}, argv...)...).Result()
		if IsNoScript(err) {
			res, err = c.Eval(ctx, s.Src.(string), []string{key}, append([]any{token}, argv...)...).Result()
		}
		r := result{reply: fmt.Sprint(res)}
		if err != nil {
			r.reply = "error: " + err.Error()
		}
		typ, err := c.Type(ctx, key).Result()
		require(err)
		r.left = typ
		// A PING through the subscription orders the reply after any
		// message the release published.
		require(sub.Ping(ctx))
		for {
			m, err := sub.Receive(ctx)
			require(err)
			if msg, ok := m.(*redis.Message); ok {
				r.channel = msg.Channel
				continue
			}
			break // the pong
		}
		return r
	}
	for _, st := range states {
		for _, token := range []string{ours, meta} {
			for _, argv := range [][]any{nil, {"rel:"}, {"rel:", len(prefix)}} {
				name := fmt.Sprintf("%s/token %q/argv %q", st.name, token, argv)
				t.Run(name, func(t *testing.T) {
					want := run(t, ScriptRelease, st.set, token, argv)
					got := run(t, ScriptReleaseOne, st.set, token, argv)
					if got != want {
						t.Fatalf("release_one: %+v, release: %+v", got, want)
					}
				})
			}
		}
	}
	// The states above reach every answer: held and deleted, missing,
	// another's, and the node's error.
	for _, tc := range []struct {
		state string
		want  string
	}{{"ours", "1"}, {"missing", "0"}, {"another's", "-1"}, {"a sorted set (a semaphore)", "-1"}} {
		for _, st := range states {
			if st.name == tc.state {
				if got := run(t, ScriptReleaseOne, st.set, ours, nil).reply; got != tc.want {
					t.Errorf("%s: want %s, got %s", tc.state, tc.want, got)
				}
			}
		}
	}
	if got := run(t, ScriptReleaseOne, states[9].set, ours, nil).reply; !strings.HasPrefix(got, "error: WRONGTYPE") {
		t.Errorf("a hash: want the node's WRONGTYPE error, got %s", got)
	}
}
