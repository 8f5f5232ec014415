-- Semaphore extend, on this node. KEYS and ARGV as for sem_acquire.lua.
-- Returns 1 when our live permit was extended, 0 when it is gone (nothing
-- is changed then).
if redis.call('TYPE', KEYS[1]).ok ~= 'zset' then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s or tonumber(s) <= now then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
local top = redis.call('ZREVRANGEBYSCORE', KEYS[1], '(+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
redis.call('PEXPIRE', KEYS[1], math.max(tonumber(top[2]) - now, 1))
return 1
