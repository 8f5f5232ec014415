package redlock

// Internal tests of the pure key helpers; the behaviour of multi-key locks
// on real nodes is tested in multilock_test.go.

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestKeysValid: a multi-key call refuses no keys, empty keys and
// duplicates, naming the offending key, and copies what it accepts.
func TestKeysValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []string
		want string // "" when valid
	}{
		{"nil", nil, "no keys"},
		{"empty slice", []string{}, "no keys"},
		{"empty key", []string{"a", ""}, "empty key at index 1"},
		{"duplicate", []string{"a", "b", "a"}, `duplicate key "a" at indexes 0 and 2`},
		{"one", []string{"a"}, ""},
		{"several", []string{"b", "a", "{a}"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := validKeys(tc.keys)
			if tc.want != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("want an ErrInvalid naming %q, got %v", tc.want, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("want no error, got %v", err)
			}
			if strings.Join(got, ",") != strings.Join(tc.keys, ",") {
				t.Fatalf("want %q, got %q", tc.keys, got)
			}
			got[0] = "changed"
			if tc.keys[0] == "changed" {
				t.Fatalf("want a copy, got the caller's slice")
			}
		})
	}
}

// TestKeysSlot: keySlot agrees with CLUSTER KEYSLOT of redis-server 7 (the
// values were read from a real cluster) and with the hash-tag rules of
// the cluster specification.
func TestKeysSlot(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16 check value: want 0x31C3, got %#x", got)
	}
	for _, tc := range []struct {
		key  string
		tag  string
		slot int
	}{
		{"123456789", "123456789", 12739},
		{"foo", "foo", 12182},
		{"bar", "bar", 5061},
		{"hello", "hello", 866},
		{"somekey", "somekey", 11058},
		{"{user1000}.following", "user1000", 3443},
		{"foo{}{bar}", "foo{}{bar}", 8363}, // empty first tag: whole key
		{"foo{{bar}}zap", "{bar", 4015},    // tag runs to the first "}"
		{"foo{bar}{zap}", "bar", 5061},     // only the first tag counts
		{"{}", "{}", 15257},
		{"a{b", "a{b", 13340}, // no closing brace: whole key
		{"", "", 0},
	} {
		if got := hashTag(tc.key); got != tc.tag {
			t.Errorf("hashTag(%q): want %q, got %q", tc.key, tc.tag, got)
		}
		if got := keySlot(tc.key); got != tc.slot {
			t.Errorf("keySlot(%q): want %d, got %d", tc.key, tc.slot, got)
		}
	}
	if keySlot("{order:42}:items") != keySlot("{order:42}:stock") {
		t.Errorf("keys with one hash tag: want one slot, got %d and %d", keySlot("{order:42}:items"), keySlot("{order:42}:stock"))
	}
}

// TestKeysShards: a sharded node refuses keys it cannot take in one script
// call, with an ErrInvalid naming the key; plain nodes take any keys.
func TestKeysShards(t *testing.T) {
	// "bar" and "k3544" share slot 5061 but not a hash tag: one Redis
	// Cluster slot, yet possibly two Ring shards. "foo" is in slot 12182.
	for _, tc := range []struct {
		name string
		keys []string
		s    sharding
		want string // "" when accepted
	}{
		{"plain, any keys", []string{"foo", "bar"}, shardNone, ""},
		{"cluster, one key", []string{"foo"}, shardSlot, ""},
		{"cluster, one tag", []string{"{order:42}:items", "{order:42}:stock", "x{order:42}"}, shardSlot, ""},
		{"cluster, one slot, no tag", []string{"bar", "k3544", "foo{bar}{zap}"}, shardSlot, ""},
		{"cluster, two slots", []string{"{o}:a", "{o}:b", "foo"}, shardSlot, `key "foo" is in hash slot 12182 but key "{o}:a"`},
		{"ring, one tag", []string{"{order:42}:items", "{order:42}:stock"}, shardTag, ""},
		{"ring, one tag, no braces", []string{"bar", "foo{bar}{zap}"}, shardTag, ""},
		{"ring, one slot, two tags", []string{"bar", "foo{bar}{zap}", "k3544"}, shardTag, `key "k3544" has hash tag "k3544" but key "bar" has "bar"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkShards(tc.keys, tc.s)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want no error, got %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "hash tag") {
				t.Fatalf("want an ErrInvalid naming %q and explaining hash tags, got %v", tc.want, err)
			}
		})
	}
	for _, tc := range []struct {
		c    redis.UniversalClient
		want sharding
	}{
		{(*redis.Client)(nil), shardNone},
		{(*redis.ClusterClient)(nil), shardSlot},
		{(*redis.Ring)(nil), shardTag},
	} {
		if got := shardingOf(tc.c); got != tc.want {
			t.Errorf("shardingOf(%T): want %d, got %d", tc.c, tc.want, got)
		}
	}
}
