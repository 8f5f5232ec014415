package wire

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// TestBatchHealsEveryKind: one batch of every kind, each lock missing on
// the node, is healed lock by lock ('h' each), the fenced lock's
// counter raised to its fencing token and the permit under its limit;
// the same batch again finds each one held ('1'). The fencing token and
// the limit ride in the batch's blob after the token, so a lock that
// follows one of them must still parse.
func TestBatchHealsEveryKind(t *testing.T) {
	node, err := redisnode.Start(redisnode.Options{})
	if err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(func() { _ = node.Close() })
	c := redis.NewClient(&redis.Options{Addr: node.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	ttl := time.Minute
	locks := []BatchLock{
		{Kind: KindLetter(KindKey, true), Keys: []string{"f", "f:fence"}, TTL: ttl, Token: "tok-f", Extra: 42},
		{Kind: KindLetter(KindPermit, false), Keys: []string{"s"}, TTL: ttl, Token: "tok-s", Extra: 2},
		{Kind: KindLetter(KindKey, false), Keys: []string{"k"}, TTL: ttl, Token: "tok-k\x00meta"},
		{Kind: KindLetter(KindRead, false), Keys: []string{"r", "r:readers"}, TTL: ttl, Token: "tok-r"},
		{Kind: KindLetter(KindPath, false), Keys: []string{"a", "a/b", "a/", "a/b/"}, TTL: ttl, Token: "tok-p"},
	}
	run := func() string {
		t.Helper()
		res, err := c.Do(ctx, BatchArgs(BatchArgv(len(locks), func(k int) *BatchLock { return &locks[k] }), true)...).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(string)
	}
	if got := run(); got != "hhhhh" {
		t.Fatalf("want every lock healed (hhhhh), got %q", got)
	}
	for k, want := range map[string]string{"f": "tok-f", "f:fence": "42", "k": "tok-k\x00meta", "r": ReadMarker, "a/b": "tok-p"} {
		if got := c.Get(ctx, k).Val(); got != want {
			t.Errorf("%s: want %q, got %q", k, want, got)
		}
	}
	if ms := c.ZRange(ctx, "s", 0, -1).Val(); len(ms) != 2 || ms[0] != "tok-s" || ms[1] != LimitMember+"2" {
		t.Errorf("semaphore: want our permit and the limit, got %v", ms)
	}
	if got := run(); got != "11111" {
		t.Fatalf("want every lock held (11111), got %q", got)
	}
}
