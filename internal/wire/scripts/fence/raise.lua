-- Fence: the second round of a fenced acquire, on this node.
-- KEYS[1..n]: the lock's keys; KEYS[n+1..2n]: their fence counters.
-- ARGV[1]: our token. ARGV[2]: our fencing token f.
-- When every key still holds our token, raises each counter to f (never
-- lowers it) and returns 1. Returns -1 when a key holds another token, 0
-- when a key is missing; nothing is changed then.
local n = #KEYS / 2
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if not own(v, ARGV[1]) then
    if v then
      return -1
    end
    return 0
  end
end
local f = tonumber(ARGV[2])
local low = {}
for i = n + 1, #KEYS do
  local c = tonumber(redis.call('GET', KEYS[i]) or '0')
  if not c then
    return redis.error_reply('redlock: fence counter ' .. KEYS[i] .. ' is not a number')
  end
  if c < f then
    low[#low + 1] = KEYS[i]
  end
end
for i = 1, #low do
  redis.call('SET', low[i], ARGV[2])
end
return 1
