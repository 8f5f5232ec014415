-- The extension of each lock kind on this node, one function per kind,
-- shared by the single-lock scripts (key/extend.lua, path/extend.lua,
-- read/extend.lua, sem/extend.lua) and the batch (extend/batch.lua).
-- Each takes the lock's keys as KEYS[k0 .. k0+n-1], its token (the value
-- a key lock's holder keeps: its token, and its metadata as last
-- proclaimed; own.lua) and its TTL in milliseconds, and returns:
--    1  the node held the lock: extended;
--    2  the node had lost it (the key, or the lease, is missing) and no
--       other owner holds it: put back, exactly as the holder had it,
--       with the TTL (healed);
--    0  missing and not put back (another lock of ours holds a related
--       path, or a semaphore's permits are all taken): nothing changed;
--   -1  another owner holds it: nothing changed.
-- A healed node did not hold the lock: the client does not count it
-- towards the extension's quorum (a lock that lost its quorum must not
-- be resurrected), and releases it when the lock is over (docs/safety.md,
-- "Healing"). A write happens only after every read that may refuse,
-- so a refusal changes nothing; a key of another type fails the GET with
-- WRONGTYPE before any write.
local now
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end

-- extendKey: a key lock of n keys; with fence (a fenced lock's token),
-- KEYS[k0+n .. k0+2n-1] are their fence counters, raised to at least
-- fence where the lock is healed: a node that lost the key lost the
-- counter with it, and the next holder's token must still exceed ours.
local function extendKey(k0, n, tok, ttl, fence)
  local missing, mine = {}, {}
  for i = k0, k0 + n - 1 do
    local v = redis.call('GET', KEYS[i])
    if own(v, tok) then
      mine[#mine + 1] = KEYS[i]
    elseif v then
      return -1
    else
      missing[#missing + 1] = KEYS[i]
    end
  end
  if #missing == 0 then
    for i = k0, k0 + n - 1 do
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
    return 1
  end
  local low = {}
  if fence then
    local f = tonumber(fence)
    for i = k0 + n, k0 + 2 * n - 1 do
      local c = tonumber(redis.call('GET', KEYS[i]) or '0')
      if not c then
        return redis.error_reply('redlock: fence counter ' .. KEYS[i] .. ' is not a number')
      end
      if c < f then
        low[#low + 1] = KEYS[i]
      end
    end
  end
  for _, k in ipairs(mine) do
    redis.call('PEXPIRE', k, ttl)
  end
  for _, k in ipairs(missing) do
    redis.call('SET', k, tok, 'NX', 'PX', ttl)
  end
  for _, k in ipairs(low) do
    redis.call('SET', k, fence)
  end
  return 2
end

-- extendPath: a folder lock of depth d = n/2 (path/acquire.lua's KEYS).
-- Healed as path/acquire.lua would grant it: not while another owner
-- holds an ancestor or a descendant.
local function extendPath(k0, n, tok, ttl)
  local d = n / 2
  local hk = KEYS[k0 + d - 1]
  local v = redis.call('GET', hk)
  local healed = false
  if v ~= tok then
    if v then
      return -1
    end
    for i = k0, k0 + d - 2 do
      local a = redis.call('GET', KEYS[i])
      if a and a ~= tok then
        return 0
      end
    end
    local t = clock()
    local below = KEYS[k0 + 2 * d - 1]
    redis.call('ZREMRANGEBYSCORE', below, '-inf', t)
    local c = redis.call('ZCARD', below)
    if c > 1 or (c == 1 and not redis.call('ZSCORE', below, tok)) then
      return 0
    end
    healed = true
  end
  local t = clock()
  local exp = t + tonumber(ttl)
  if healed then
    redis.call('SET', hk, tok, 'NX', 'PX', ttl)
  else
    redis.call('PEXPIRE', hk, ttl)
  end
  for i = 1, d - 1 do
    local b = KEYS[k0 + d - 1 + i]
    redis.call('ZADD', b, exp, tok)
    local top = redis.call('ZRANGE', b, -1, -1, 'WITHSCORES')
    redis.call('PEXPIRE', b, math.max(tonumber(top[2]) - t, 1))
  end
  if healed then
    return 2
  end
  return 1
end

-- extendRead: a read lease; KEYS[k0] the lock key, KEYS[k0+1] its
-- readers. The marker may carry a waiting writer's mark
-- (read/acquire.lua), which a heal keeps: the holder's lease is put back
-- beside the other readers', as it was.
local function extendRead(k0, n, tok, ttl, marker)
  local v = redis.call('GET', KEYS[k0])
  if v and v ~= marker and string.sub(v, 1, #marker + 3) ~= marker .. ':w:' then
    return -1
  end
  local t = clock()
  local s = redis.call('ZSCORE', KEYS[k0 + 1], tok)
  local held = v and s and tonumber(s) > t
  redis.call('ZREMRANGEBYSCORE', KEYS[k0 + 1], '-inf', t)
  redis.call('ZADD', KEYS[k0 + 1], t + tonumber(ttl), tok)
  local top = redis.call('ZRANGE', KEYS[k0 + 1], -1, -1, 'WITHSCORES')
  local ms = math.max(tonumber(top[2]) - t, 1)
  if v then
    redis.call('PEXPIRE', KEYS[k0], ms)
  else
    redis.call('SET', KEYS[k0], marker, 'NX', 'PX', ms)
  end
  redis.call('PEXPIRE', KEYS[k0 + 1], ms)
  if held then
    return 1
  end
  return 2
end

-- extendPermit: a semaphore's permit; KEYS[k0] the semaphore (see
-- sem/acquire.lua). A permit is put back only where fewer than limit
-- live permits are held under the same limit: never over the limit.
local function extendPermit(k0, n, tok, ttl, limit, prefix)
  local k = KEYS[k0]
  local ty = redis.call('TYPE', k).ok
  if ty ~= 'zset' and ty ~= 'none' then
    return 0
  end
  local t = clock()
  if ty == 'zset' then
    local s = redis.call('ZSCORE', k, tok)
    if s and tonumber(s) > t then
      redis.call('ZADD', k, t + tonumber(ttl), tok)
      local top = redis.call('ZREVRANGEBYSCORE', k, '(+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
      redis.call('PEXPIRE', k, math.max(tonumber(top[2]) - t, 1))
      return 1
    end
  end
  redis.call('ZREMRANGEBYSCORE', k, '-inf', t)
  local mark = prefix .. limit
  local marks = redis.call('ZRANGEBYSCORE', k, '+inf', '+inf')
  local live = redis.call('ZCARD', k) - #marks
  if #marks > 0 and (#marks > 1 or marks[1] ~= mark) then
    if live > 0 then
      return 0
    end
    redis.call('ZREM', k, unpack(marks))
  end
  if live >= tonumber(limit) then
    return 0
  end
  redis.call('ZADD', k, t + tonumber(ttl), tok)
  redis.call('ZADD', k, '+inf', mark)
  local top = redis.call('ZREVRANGEBYSCORE', k, '(+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  redis.call('PEXPIRE', k, math.max(tonumber(top[2]) - t, 1))
  return 2
end
