package redlock

import (
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// The key layout: every key and channel name the library writes. A
// lock's keys are the caller's, with the client's key prefix
// (WithKeyPrefix) put in front on the wire only.

// KeyName returns the name on each node of what the library keeps for
// name, for a user who inspects the nodes or writes an ACL. kind is one
// of "fence" (a lock's fencing counter, name + ":fence", never expiring),
// "readers" (a read lock's readers, name + ":readers"), "path" (a path
// lock's key, "a/b/c" -> "{a}/b/c"), "election" (an election's lock key,
// "redlock:election:" + name, whose "fence" counter holds the terms),
// "terms" (its history, that key + ":terms") and "release" (the channel
// announcing the releases of key name, "redlock:release:" + name).
//
// It returns "" for another kind, or a path TryLockPath refuses. Under
// WithKeyPrefix(p) every name is stored as p + KeyName(kind, name).
func KeyName(kind, name string) string {
	switch kind {
	case "fence":
		return fenceKey(name)
	case "readers":
		return readersKey(name)
	case "path":
		return pathKey(name)
	case "election":
		return electionKey(name)
	case "terms":
		return electionTermsKey(name)
	case "release":
		return releaseChannel(name)
	}
	return ""
}

// nodeKeys returns keys as stored on the nodes: with the key prefix.
// Without one it returns keys itself.
func (c *config) nodeKeys(keys []string) []string {
	return prefixKeys(c.prefix, keys)
}

// prefixKeys returns keys with p in front of each; keys itself when p is
// empty. It is the one place where the key prefix is applied to keys.
func prefixKeys(p string, keys []string) []string {
	if p == "" {
		return keys
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = p + k
	}
	return out
}

// fenceKey returns the key of the per-node fencing counter of key:
// key + ":fence". The counter never expires and never decreases; do not
// write it, and do not use a lock key that ends with ":fence". Under
// WithKeyPrefix(p) the counter of a lock on key is fenceKey(p + key).
func fenceKey(key string) string { return key + ":fence" }

// fenceKeys returns keys followed by their fence counters.
func fenceKeys(keys []string) []string {
	out := make([]string, 0, 2*len(keys))
	out = append(out, keys...)
	for _, k := range keys {
		out = append(out, fenceKey(k))
	}
	return out
}

// readersSuffix names a read lock's readers key: key + readersSuffix.
const readersSuffix = ":readers"

// readersKey returns the key of the sorted set in which a read lock on
// key records its readers on each node: key + ":readers". While readers
// hold key, key itself holds the value "redlock:readers". Under
// WithKeyPrefix(p) the readers of key are at readersKey(p + key).
func readersKey(key string) string { return key + readersSuffix }

// pathKey returns the key on each node that holds a folder lock on path
// (the path normalized, its first component as the hash tag): "a/b/c" is
// held at "{a}/b/c". Intention records of the locks below a folder are at
// pathKey(path) + "/". It returns "" for a path that TryLockPath refuses.
func pathKey(path string) string {
	comps, err := splitPath(path)
	if err != nil {
		return ""
	}
	holders, _ := pathKeys(comps)
	return holders[len(holders)-1]
}

// pathKeys returns the holder keys of comps' folders, outermost first,
// and their below keys. Every key begins with "{" + comps[0] + "}", so
// that on a Redis Cluster node one tree lives in one hash slot.
func pathKeys(comps []string) (holders, belows []string) {
	holders = make([]string, len(comps))
	belows = make([]string, len(comps))
	var b strings.Builder
	b.WriteString("{")
	b.WriteString(comps[0])
	b.WriteString("}")
	for i, c := range comps {
		if i > 0 {
			b.WriteString("/")
			b.WriteString(c)
		}
		holders[i] = b.String()
		belows[i] = holders[i] + "/"
	}
	return holders, belows
}

// electionPrefix is the prefix of the elections' keys.
const electionPrefix = "redlock:election:"

// electionKey returns the key of the lock that holds the election called
// name (Client.Election): "redlock:election:" + name. Its fencing
// counter, fenceKey(electionKey(name)), holds the terms, and its
// history, electionTermsKey(name), what each leader published. Under
// WithKeyPrefix(p) the key is p + electionKey(name). A lock on name
// never collides with it; do not lock keys that begin with
// "redlock:election:" yourself.
//
// An election's name may not end with ":fence" or ":terms" (ErrInvalid):
// its key would be another election's fence counter or history.
func electionKey(name string) string { return electionPrefix + name }

// termsSuffix names an election's history: its key + termsSuffix.
const termsSuffix = ":terms"

// electionTermsKey returns the key of the history of the election called
// name on each node: electionKey(name) + ":terms", a sorted set with one
// member per publication of a leadership (Campaign's, then each
// Proclaim's), scored by its term, which Observe reads so that it misses
// no term. Like the fence counter it shares the election key's hash tag,
// so a Redis Cluster node keeps them in one slot. Each write keeps the
// last 64 entries (electionHistoryLen) and sets the key to expire after
// max(10×ttl, 1 minute) (electionHistoryTTL): unlike the fence counter it
// does not outlive an idle election. Under WithKeyPrefix(p) the history
// is at p + electionTermsKey(name).
func electionTermsKey(name string) string { return termsKey(electionKey(name)) }

// termsKey returns the history key of an election's key as stored.
func termsKey(key string) string { return key + termsSuffix }

// releasePrefix is the prefix of the release channels.
const releasePrefix = "redlock:release:"

// releaseChannel returns the pub/sub channel on which Unlock announces the
// release of key on each node: "redlock:release:" + key. The message is
// empty, or "r" when the last reader of a read lock on key left. Waiting
// Lock calls subscribe to it (see WithHandoff); other programs may too. With WithKeyPrefix(p) the channel is
// p + releaseChannel(key).
func releaseChannel(key string) string { return releasePrefix + key }

// A lock over several keys takes all of them on a node in one script call,
// all or none (see internal/wire/scripts/key/acquire.lua). The helpers here validate the key list
// and check that a sharded node would run that one call on one server.
//
// For a node that is a Redis Cluster client the keys must hash to one
// slot; they are deliberately not split into one call per slot. Split, a
// node's vote would rest on several scripts on different masters, one of
// which may fail after another succeeded: the node would be half-held,
// and "all or nothing on that node" would no longer be true.

// slotCount is the number of hash slots of a Redis Cluster.
const slotCount = 16384

// sharding is how a node spreads keys over servers. A multi-key script
// call runs on the server of its first key, so on a sharded node every
// key must live there too. Larger values are stricter.
type sharding uint8

const (
	shardNone sharding = iota // one server: any keys
	shardSlot                 // Redis Cluster: the keys must share a hash slot
	shardTag                  // Ring: the keys must share a hash tag
)

// shardingOf returns how client c shards keys.
func shardingOf(c redis.UniversalClient) sharding {
	switch c.(type) {
	case *redis.ClusterClient:
		return shardSlot
	case *redis.Ring:
		// A Ring picks a shard by hashing the hash tag itself (the whole
		// key when it has none), not its slot: two tags in one slot may
		// still land on different shards. Were the keys not checked, two
		// locks whose first keys differ would run on different shards and
		// could both take a key they share.
		return shardTag
	}
	return shardNone
}

// clientSharding returns the strictest sharding among the client's nodes.
func clientSharding(c *Client) sharding {
	s := shardNone
	for _, n := range c.nodes {
		s = max(s, shardingOf(n.C))
	}
	return s
}

// checkSharded checks that a node sharded as the client's strictest node
// can take keys, as stored (with the key prefix) and, with fencing, with
// their fence counters, in one call. A single key without fencing always
// can.
func checkSharded(c *Client, keys []string, cfg *config) error {
	if c.shard == shardNone || (len(keys) == 1 && !cfg.fencing) {
		return nil
	}
	stored := cfg.nodeKeys(keys)
	if cfg.fencing {
		stored = fenceKeys(stored)
	}
	return checkShards(stored, c.shard)
}

// checkShards returns an error matching ErrInvalid that names the first
// key a node sharded by s cannot take in one call with keys[0], or nil.
func checkShards(keys []string, s sharding) error {
	switch s {
	case shardSlot:
		want := keySlot(keys[0])
		for _, k := range keys[1:] {
			if got := keySlot(k); got != want {
				return invalidf("key %q is in hash slot %d but key %q in slot %d: a Redis Cluster node takes a multi-key or fenced lock in one slot only (a fenced key's counter is key+\":fence\"); give every key the same hash tag, e.g. \"{order:42}:items\" and \"{order:42}:stock\"", k, got, keys[0], want)
			}
		}
	case shardTag:
		want := hashTag(keys[0])
		for _, k := range keys[1:] {
			if got := hashTag(k); got != want {
				return invalidf("key %q has hash tag %q but key %q has %q: a Ring node takes a multi-key or fenced lock on one shard only (a fenced key's counter is key+\":fence\"); give every key the same hash tag, e.g. \"{order:42}:items\" and \"{order:42}:stock\"", k, got, keys[0], want)
			}
		}
	}
	return nil
}

// hashTag returns the part of key that Redis Cluster hashes: the text
// between the first "{" and the first "}" after it, when that is not
// empty; otherwise the whole key.
func hashTag(key string) string {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}

// keySlot returns key's Redis Cluster hash slot: CRC16(hash tag) mod 16384,
// as CLUSTER KEYSLOT computes it.
func keySlot(key string) int {
	return int(crc16(hashTag(key))) % slotCount
}

// crc16 is CRC-16/XMODEM, as Redis Cluster computes key slots.
var crc16 = wire.CRC16
