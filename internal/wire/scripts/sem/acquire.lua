-- Semaphore acquire, on this node. KEYS[1]: the semaphore, a sorted set
-- of permits (token -> expiry in ms on this node's clock) and one member
-- ARGV[4] .. limit with score +inf that records the limit in use.
-- ARGV[1]: our token. ARGV[2]: TTL in milliseconds. ARGV[3]: the limit.
-- ARGV[4]: the limit member's prefix.
-- Returns 1 when we hold a permit (ours is refreshed), 0 when limit live
-- permits are held (or the key holds a string: another kind of our
-- locks), -2 when live permits were taken under another limit. A key of
-- a type none of our locks writes is the node's WRONGTYPE error
-- (scripts.go).
local ty = redis.call('TYPE', KEYS[1]).ok
if ty == 'string' then
  return 0
elseif ty ~= 'zset' and ty ~= 'none' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local mark = ARGV[4] .. ARGV[3]
local marks = redis.call('ZRANGEBYSCORE', KEYS[1], '+inf', '+inf')
local n = redis.call('ZCARD', KEYS[1]) - #marks
if #marks > 0 and (#marks > 1 or marks[1] ~= mark) then
  if n > 0 then
    return -2
  end
  redis.call('ZREM', KEYS[1], unpack(marks))
end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and n >= tonumber(ARGV[3]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZADD', KEYS[1], '+inf', mark)
local top = redis.call('ZREVRANGEBYSCORE', KEYS[1], '(+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
redis.call('PEXPIRE', KEYS[1], math.max(tonumber(top[2]) - now, 1))
return 1
