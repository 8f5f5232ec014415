-- Release: compare-and-delete on this node. Deletes only keys holding our
-- token. KEYS: the lock's keys. ARGV[1]: our token. ARGV[2] (optional): a
-- channel prefix; when given, each deleted key is announced on
-- prefix .. key, so that waiters retry at once (pub/sub hand-off).
-- ARGV[3] (optional, with a key prefix): how many leading bytes of each
-- key are its key prefix, which ARGV[2] already begins with and which
-- the channel therefore leaves out of the key.
-- Returns 1 when every key held our token (all deleted), -1 when a key
-- holds another token, 0 otherwise (a key was missing).
local n = 0
local other = false
local skip = tonumber(ARGV[3] or '0') or 0
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if own(v, ARGV[1]) then
    redis.call('DEL', KEYS[i])
    n = n + 1
    if ARGV[2] and ARGV[2] ~= '' then
      -- pcall: a user without the channel permission still releases.
      redis.pcall('PUBLISH', ARGV[2] .. string.sub(KEYS[i], skip + 1), '')
    end
  elseif v then
    other = true
  end
end
if n == #KEYS then
  return 1
end
if other then
  return -1
end
return 0
