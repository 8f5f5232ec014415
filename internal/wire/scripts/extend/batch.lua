-- Batched extend (scheduler.go): the extends of many locks in one call on
-- this node, each checked and extended on its own, exactly as its own
-- script would (extend.lua, path_extend.lua, read_extend.lua,
-- sem_extend.lua): one lock's refusal changes nothing for the others.
-- KEYS: every lock's keys, lock after lock. ARGV[1]: the read marker.
-- ARGV[2]: the locks, one after another, each as its kind ('k' key lock,
-- 'p' path, 'r' read, 's' semaphore permit), how many of KEYS are its
-- keys, a space, its TTL in milliseconds, a space, its token's length, a
-- space, and its token: "k1 30000 32 <token>k1 30000 32 <token>...".
-- One argument for all, so that the client writes (and the server reads)
-- a few large arguments, not four small ones per lock.
-- Returns a string of one character per lock: '1' extended, '0' not held
-- (missing), 't' held by another, 'e' the node failed it (another error).
-- A key of another type (WRONGTYPE), whether another of our kinds' or a
-- value none of them writes, is 't': the lock cannot be held there, so
-- the node is not ours, as extend.lua's is (scripts.go). One lock's
-- error does not abort the others'.
local marker = ARGV[1]
local now
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end

-- held: 1 when key k holds want, -1 when it holds something else, 0
-- when it is missing.
local function held(k, want)
  local v = redis.call('GET', k)
  if own(v, want) then
    return 1
  elseif v then
    return -1
  end
  return 0
end

local function key(k0, n, tok, ttl)
  for i = k0, k0 + n - 1 do
    local h = held(KEYS[i], tok)
    if h ~= 1 then
      return h
    end
  end
  for i = k0, k0 + n - 1 do
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
  return 1
end

local function path(k0, n, tok, ttl)
  local d = n / 2
  local h = held(KEYS[k0 + d - 1], tok)
  if h ~= 1 then
    return h
  end
  local t = clock()
  local exp = t + tonumber(ttl)
  redis.call('PEXPIRE', KEYS[k0 + d - 1], ttl)
  for i = 1, d - 1 do
    local b = KEYS[k0 + d - 1 + i]
    redis.call('ZADD', b, exp, tok)
    local top = redis.call('ZRANGE', b, -1, -1, 'WITHSCORES')
    redis.call('PEXPIRE', b, math.max(tonumber(top[2]) - t, 1))
  end
  return 1
end

local function read(k0, n, tok, ttl)
  -- The marker, or the marker with a waiting writer's mark
  -- (read_acquire.lua).
  local v = redis.call('GET', KEYS[k0])
  if not v then
    return 0
  elseif v ~= marker and string.sub(v, 1, #marker + 3) ~= marker .. ':w:' then
    return -1
  end
  local t = clock()
  local s = redis.call('ZSCORE', KEYS[k0 + 1], tok)
  if not s or tonumber(s) <= t then
    return 0
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[k0 + 1], '-inf', t)
  redis.call('ZADD', KEYS[k0 + 1], t + tonumber(ttl), tok)
  local top = redis.call('ZRANGE', KEYS[k0 + 1], -1, -1, 'WITHSCORES')
  local ms = math.max(tonumber(top[2]) - t, 1)
  redis.call('PEXPIRE', KEYS[k0], ms)
  redis.call('PEXPIRE', KEYS[k0 + 1], ms)
  return 1
end

local function permit(k0, n, tok, ttl)
  if redis.call('TYPE', KEYS[k0]).ok ~= 'zset' then
    return 0
  end
  local t = clock()
  local s = redis.call('ZSCORE', KEYS[k0], tok)
  if not s or tonumber(s) <= t then
    return 0
  end
  redis.call('ZADD', KEYS[k0], t + tonumber(ttl), tok)
  local top = redis.call('ZREVRANGEBYSCORE', KEYS[k0], '(+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  redis.call('PEXPIRE', KEYS[k0], math.max(tonumber(top[2]) - t, 1))
  return 1
end

local kinds = {k = key, p = path, r = read, s = permit}
local codes = {[1] = '1', [0] = '0', [-1] = 't'}
local out = {}
local b = ARGV[2]
local p = 1
local k0 = 1
while p <= #b do
  local kind, n, ttl, tl, at = string.match(b, '^(%a)(%d+) (%d+) (%d+) ()', p)
  if not kind then
    return redis.error_reply('malformed batch at byte ' .. p)
  end
  n = tonumber(n)
  tl = tonumber(tl)
  local tok = string.sub(b, at, at + tl - 1)
  p = at + tl
  local ok, r = pcall(kinds[kind], k0, n, tok, ttl)
  if ok then
    r = codes[r] or 'e'
  else
    local msg = type(r) == 'table' and r.err or tostring(r)
    if string.find(msg, 'WRONGTYPE', 1, true) then
      r = 't'
    else
      r = 'e'
    end
  end
  out[#out + 1] = r
  k0 = k0 + n
end
return table.concat(out)
