-- Batched extend (scheduler.go): the extends of many locks in one call on
-- this node, each checked and extended (or healed) on its own by its
-- kind's function (extend/kinds.lua), exactly as its own script would:
-- one lock's refusal changes nothing for the others.
-- KEYS: every lock's keys, lock after lock. ARGV[1]: the read marker.
-- ARGV[2]: the locks, one after another, each as its kind ('k' key lock,
-- 'f' fenced key lock, 'p' path, 'r' read, 's' semaphore permit), how
-- many of KEYS are its keys, a space, its TTL in milliseconds, a space,
-- its token's length, a space, and its token; a fenced lock's fencing
-- token or a permit's limit follows, and a space:
-- "k1 30000 32 <token>f2 30000 32 <token>7 ...". A fenced lock's keys
-- are its keys, then their fence counters. ARGV[3]: the semaphores'
-- limit member prefix.
-- One argument for all, so that the client writes (and the server reads)
-- a few large arguments, not four small ones per lock.
-- Returns a string of one character per lock: '1' extended, 'h' healed
-- (missing, and put back), '0' not held (missing), 't' held by another,
-- 'e' the node failed it (another error). A key of another type
-- (WRONGTYPE), whether another of our kinds' or a value none of them
-- writes, is 't': the lock cannot be held there, so the node is not
-- ours, as extend.lua's is (scripts.go). One lock's error does not abort
-- the others'.
local marker = ARGV[1]
local prefix = ARGV[3]

local kinds = {
  k = function(k0, n, tok, ttl) return extendKey(k0, n, tok, ttl) end,
  f = function(k0, n, tok, ttl, x) return extendKey(k0, n / 2, tok, ttl, x) end,
  p = extendPath,
  r = function(k0, n, tok, ttl) return extendRead(k0, n, tok, ttl, marker) end,
  s = function(k0, n, tok, ttl, x) return extendPermit(k0, n, tok, ttl, x, prefix) end,
}
local codes = {[1] = '1', [2] = 'h', [0] = '0', [-1] = 't'}
local out = {}
local b = ARGV[2]
local p = 1
local k0 = 1
while p <= #b do
  local kind, n, ttl, tl, at = string.match(b, '^(%a)(%d+) (%d+) (%d+) ()', p)
  if not kind or not kinds[kind] then
    return redis.error_reply('malformed batch at byte ' .. p)
  end
  n = tonumber(n)
  tl = tonumber(tl)
  local tok = string.sub(b, at, at + tl - 1)
  p = at + tl
  local x
  if kind == 'f' or kind == 's' then
    x, p = string.match(b, '^(%d+) ()', p)
    if not x then
      return redis.error_reply('malformed batch at byte ' .. (at + tl))
    end
  end
  local ok, r = pcall(kinds[kind], k0, n, tok, ttl, x)
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
