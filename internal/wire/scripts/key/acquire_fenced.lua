-- Fenced acquire: acquire.lua plus the fencing counters, on this node.
-- KEYS[1..n]: the lock's keys; KEYS[n+1..2n]: their fence counters.
-- ARGV[1]: our token. ARGV[2]: TTL in milliseconds. ARGV[3], ARGV[4]
-- (optional): a waiting writer's mark (writer_mark.lua).
-- When no key holds another token, sets every key to our token and every
-- counter to f = 1 + the largest of the counters, and returns {1, f}: the
-- counters are raised while our token holds the keys, in one atomic step.
-- Returns {0, 0, metadata, pttl} when a key holds another token (its
-- holder's metadata and the key's remaining time to live in ms, as
-- acquire.lua), and changes nothing but a waiting writer's mark
-- (writer_mark.lua).
-- Counters never expire and never decrease.
local n = #KEYS / 2
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v and not own(v, ARGV[1]) then
    markReaders(n)
    return {0, 0, meta(v), holderTTL(KEYS[i])}
  end
end
local f = 0
for i = n + 1, #KEYS do
  local c = tonumber(redis.call('GET', KEYS[i]) or '0')
  if not c then
    return redis.error_reply('redlock: fence counter ' .. KEYS[i] .. ' is not a number')
  end
  if c > f then
    f = c
  end
end
f = f + 1
local fs = string.format('%d', f)
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  redis.call('SET', KEYS[n + i], fs)
end
return {1, f}
