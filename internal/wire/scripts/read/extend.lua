-- Read lock extend, on this node. KEYS and ARGV as for read_acquire.lua.
-- Returns 1 when our live read lease was extended, -1 when a writer holds
-- the key, 0 when our lease is gone. Nothing is changed unless 1.
-- The marker may carry a waiting writer's mark (read_acquire.lua).
local m = ARGV[3]
local v = redis.call('GET', KEYS[1])
if v ~= m and not (v and string.sub(v, 1, #m + 3) == m .. ':w:') then
  if v then
    return -1
  end
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not s or tonumber(s) <= now then
  return 0
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
local ms = math.max(tonumber(top[2]) - now, 1)
redis.call('PEXPIRE', KEYS[1], ms)
redis.call('PEXPIRE', KEYS[2], ms)
return 1
