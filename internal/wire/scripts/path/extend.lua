-- Folder (path) lock extend, on this node. KEYS and ARGV as for
-- path_acquire.lua. Returns 1 when the path held our token and its lease
-- (and our intention records on its ancestors) was extended, -1 when
-- another owner holds the path, 0 when the path is not held. Nothing is
-- changed unless 1.
local d = #KEYS / 2
local v = redis.call('GET', KEYS[d])
if v ~= ARGV[1] then
  if v then
    return -1
  end
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = now + tonumber(ARGV[2])
redis.call('PEXPIRE', KEYS[d], ARGV[2])
for i = 1, d - 1 do
  local b = KEYS[d + i]
  redis.call('ZADD', b, exp, ARGV[1])
  local top = redis.call('ZRANGE', b, -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', b, math.max(tonumber(top[2]) - now, 1))
end
return 1
