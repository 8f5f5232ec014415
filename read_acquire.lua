-- Read lock acquire, on this node. KEYS[1]: the lock key; KEYS[2]: its
-- readers (a sorted set: token -> expiry in ms on this node's clock).
-- ARGV[1]: our token. ARGV[2]: TTL in milliseconds. ARGV[3]: the readers'
-- marker value.
-- While readers hold the key, the lock key holds the marker, with the
-- latest reader's expiry: a writer's acquire sees a value that is not its
-- token and is refused, with no change to the writer's path.
-- Returns 1 when we hold a read lease (a lease of ours is refreshed), 0
-- when a writer holds the key.
local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[3] then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
local ms = math.max(tonumber(top[2]) - now, 1)
redis.call('SET', KEYS[1], ARGV[3], 'PX', ms)
redis.call('PEXPIRE', KEYS[2], ms)
return 1
