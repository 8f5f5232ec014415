-- Inspect: who holds a lock on this node, read-only. KEYS[1]: the lock's
-- key (a key lock's, a path's holder key, a read lock's or a
-- semaphore's); KEYS[2]: its fence counter; KEYS[3]: its readers key.
-- ARGV[1]: the readers' marker value. ARGV[2]: the semaphore's limit
-- member prefix.
-- Returns {kind, pttl, fence, id1, meta1, ttl1, id2, ...}: kind is
-- 'none' (free), 'key' (a string value: a key or path lock), 'read'
-- (readers hold it), 'sem' (a semaphore's sorted set) or 'other' (a
-- value none of our kinds writes); pttl is the key's PTTL; fence the
-- counter (0 when none). Each holder follows as three items: an opaque
-- id (the SHA-1 of its token, so that nodes can be compared without the
-- token leaving the node), its metadata, and its time to live in ms.
local ty = redis.call('TYPE', KEYS[1]).ok
local fence = tonumber(redis.pcall('GET', KEYS[2]) or '0') or 0
local pttl = redis.call('PTTL', KEYS[1])
local out = {'none', pttl, fence}
local function member(m, ttl)
  out[#out + 1] = redis.sha1hex(tokenOf(m))
  out[#out + 1] = meta(m)
  out[#out + 1] = ttl
end
local function zmembers(k, skip)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local ms = redis.call('ZRANGEBYSCORE', k, '(' .. now, '+inf', 'WITHSCORES')
  for i = 1, #ms, 2 do
    if not (skip and string.sub(ms[i], 1, #skip) == skip) then
      member(ms[i], math.floor(tonumber(ms[i + 1]) - now))
    end
  end
end
if ty == 'string' then
  local v = redis.call('GET', KEYS[1])
  local m = ARGV[1]
  if v == m or string.sub(v, 1, #m + 3) == m .. ':w:' then
    out[1] = 'read'
    if redis.call('TYPE', KEYS[3]).ok == 'zset' then
      zmembers(KEYS[3])
    end
  else
    out[1] = 'key'
    member(v, pttl)
  end
elseif ty == 'zset' then
  out[1] = 'sem'
  zmembers(KEYS[1], ARGV[2])
elseif ty ~= 'none' then
  out[1] = 'other'
end
return out
