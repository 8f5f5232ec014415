-- Read lock acquire, on this node. KEYS[1]: the lock key; KEYS[2]: its
-- readers (a sorted set: token -> expiry in ms on this node's clock).
-- ARGV[1]: our token. ARGV[2]: TTL in milliseconds. ARGV[3]: the readers'
-- marker value.
-- While readers hold the key, the lock key holds the marker, with the
-- latest reader's expiry: a writer's acquire sees a value that is not its
-- token and is refused, with no change to the writer's path. A writer
-- that waits (Lock) marks it on its refusal (acquire.lua: the marker,
-- ':w:' and the mark's end in ms); while the mark lasts only a reader
-- with a live lease of its own may refresh it, and new readers are
-- refused, so that the readers drain and the writer gets in. The mark
-- goes with the key, at the last reader's release.
-- Returns 1 when we hold a read lease (a lease of ours is refreshed),
-- {0, metadata, pttl} when a writer holds the key (its metadata, never
-- its token, and the key's remaining time to live in ms; own.lua), 0
-- when a writer waits for it.
local m = ARGV[3]
local v = redis.call('GET', KEYS[1])
local marked = false
if v and v ~= m then
  if string.sub(v, 1, #m + 3) ~= m .. ':w:' then
    return {0, meta(v), holderTTL(KEYS[1])}
  end
  marked = true
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if marked and (tonumber(string.sub(v, #m + 4)) or 0) > now then
  local s = redis.call('ZSCORE', KEYS[2], ARGV[1])
  if not s or tonumber(s) <= now then
    return 0
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
local ms = math.max(tonumber(top[2]) - now, 1)
redis.call('SET', KEYS[1], v or m, 'PX', ms)
redis.call('PEXPIRE', KEYS[2], ms)
return 1
