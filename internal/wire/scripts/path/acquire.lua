-- Folder (path) lock acquire, on this node. For a path of depth d:
-- KEYS[1..d]: the holder keys of its ancestors, outermost first, then of
-- the path itself (KEYS[d]); KEYS[d+1..2d]: their "below" keys, sorted
-- sets of the holders of locks strictly below each folder (token ->
-- expiry in ms on this node's clock): intention records.
-- ARGV[1]: our token. ARGV[2]: TTL in milliseconds.
-- An attempt reads O(d) keys, whatever the number of locks held: a held
-- ancestor or the path itself is a holder key; a held descendant is a
-- live member of the path's below key.
-- Returns 1 when we hold the path (a lease of ours is refreshed),
-- {0, metadata, pttl} when another owner holds it or an ancestor (its
-- metadata, never its token, and the holder key's remaining time to live
-- in ms; own.lua), 0 when another owner holds a descendant.
local d = #KEYS / 2
for i = 1, d do
  local v = redis.call('GET', KEYS[i])
  if v and v ~= ARGV[1] then
    return {0, meta(v), holderTTL(KEYS[i])}
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local below = KEYS[2 * d]
redis.call('ZREMRANGEBYSCORE', below, '-inf', now)
local n = redis.call('ZCARD', below)
if n > 1 or (n == 1 and not redis.call('ZSCORE', below, ARGV[1])) then
  return 0
end
local exp = now + tonumber(ARGV[2])
-- Every key is read (and its type checked) before any is written.
for i = 1, d - 1 do
  redis.call('ZREMRANGEBYSCORE', KEYS[d + i], '-inf', now)
end
redis.call('SET', KEYS[d], ARGV[1], 'PX', ARGV[2])
for i = 1, d - 1 do
  local b = KEYS[d + i]
  redis.call('ZADD', b, exp, ARGV[1])
  local top = redis.call('ZRANGE', b, -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', b, math.max(tonumber(top[2]) - now, 1))
end
return 1
