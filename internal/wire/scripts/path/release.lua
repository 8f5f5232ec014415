-- Folder (path) lock release, on this node. KEYS as for path_acquire.lua.
-- ARGV[1]: our token. ARGV[2] (optional): the release channel prefix;
-- ARGV[3] (optional): how many leading bytes of a key are its key prefix
-- (see release.lua).
-- Deletes the path's holder key if it holds our token, and our intention
-- records on its ancestors either way. A release is announced on the
-- channel of the path and of every ancestor: a waiter listens on its own
-- path and its ancestors, so a waiter on a related path wakes.
-- Returns 1 when the path held our token, -1 when another owner holds
-- it, 0 otherwise.
local d = #KEYS / 2
local v = redis.call('GET', KEYS[d])
if v == ARGV[1] then
  redis.call('DEL', KEYS[d])
end
for i = 1, d - 1 do
  local b = KEYS[d + i]
  if redis.call('ZREM', b, ARGV[1]) == 1 and redis.call('ZCARD', b) == 0 then
    redis.call('DEL', b)
  end
end
if v == ARGV[1] then
  if ARGV[2] and ARGV[2] ~= '' then
    local skip = tonumber(ARGV[3] or '0') or 0
    for i = 1, d do
      redis.pcall('PUBLISH', ARGV[2] .. string.sub(KEYS[i], skip + 1), '')
    end
  end
  return 1
end
if v then
  return -1
end
return 0
