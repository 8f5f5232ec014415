-- Read lock release, on this node. KEYS as for read_acquire.lua.
-- ARGV[1]: our token. ARGV[2]: the readers' marker value. ARGV[3]
-- (optional): the release channel prefix; ARGV[4] (optional): how many
-- leading bytes of the key are its key prefix (see release.lua).
-- Removes our lease; the last live reader's release deletes the lock key
-- and announces it, so that a waiting writer retries at once. Otherwise
-- the lock key keeps the latest live reader's expiry. The announcement's
-- message is 'r' (a writer's is empty): readers that wait ignore it, so
-- that a waiting writer, which it wakes, does not race them for the key
-- (pubsub.go).
-- Returns 1 when our lease was there, -1 when a writer holds the key, 0
-- otherwise.
local removed = redis.call('ZREM', KEYS[2], ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local v = redis.call('GET', KEYS[1])
-- Readers hold it: the marker, or the marker with a waiting writer's mark
-- (read_acquire.lua), which goes with the last reader.
local m = ARGV[2]
local readers = v == m or (v and string.sub(v, 1, #m + 3) == m .. ':w:')
if readers then
  local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if #top == 0 then
    redis.call('DEL', KEYS[1], KEYS[2])
    if ARGV[3] and ARGV[3] ~= '' then
      local skip = tonumber(ARGV[4] or '0') or 0
      redis.pcall('PUBLISH', ARGV[3] .. string.sub(KEYS[1], skip + 1), 'r')
    end
  else
    local ms = math.max(tonumber(top[2]) - now, 1)
    redis.call('PEXPIRE', KEYS[1], ms)
    redis.call('PEXPIRE', KEYS[2], ms)
  end
end
if removed == 1 then
  return 1
end
if v and not readers then
  return -1
end
return 0
