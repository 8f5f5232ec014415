-- Semaphore release, on this node. KEYS[1]: the semaphore. ARGV[1]: our
-- token. ARGV[2] (optional): the release channel prefix; ARGV[3]
-- (optional): how many leading bytes of the key are its key prefix (see
-- release.lua).
-- Removes our permit and announces it, so that a waiter retries at once;
-- the semaphore is deleted with its last live permit.
-- Returns 1 when our permit was there, 0 otherwise (the key holds no
-- semaphore). A key of a type none of our locks writes is the node's
-- WRONGTYPE error (scripts.go).
local ty = redis.call('TYPE', KEYS[1]).ok
if ty == 'string' or ty == 'none' then
  return 0
elseif ty ~= 'zset' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local top = redis.call('ZREVRANGEBYSCORE', KEYS[1], '(+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
if #top == 0 then
  redis.call('DEL', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], math.max(tonumber(top[2]) - now, 1))
end
if removed == 1 and ARGV[2] and ARGV[2] ~= '' then
  local skip = tonumber(ARGV[3] or '0') or 0
  redis.pcall('PUBLISH', ARGV[2] .. string.sub(KEYS[1], skip + 1), '')
end
if removed == 1 then
  return 1
end
return 0
