-- Release of one key: compare-and-delete on this node, as release.lua
-- for a lock of one key, in fewer steps (most locks have one key).
-- KEYS[1]: the lock's key. ARGV[1]: our token. ARGV[2] (optional): the
-- release channel prefix; ARGV[3] (optional): the key prefix's length
-- (see release.lua).
-- Returns 1 when the key held our token (deleted), -1 when it holds
-- another token, 0 when it is missing.
local v = redis.call('GET', KEYS[1])
if own(v, ARGV[1]) then
  redis.call('DEL', KEYS[1])
  if ARGV[2] and ARGV[2] ~= '' then
    -- pcall: a user without the channel permission still releases.
    local k = KEYS[1]
    if ARGV[3] then
      k = string.sub(k, tonumber(ARGV[3]) + 1)
    end
    redis.pcall('PUBLISH', ARGV[2] .. k, '')
  end
  return 1
end
if v then
  return -1
end
return 0
