-- FencedSet: a write to a resource that rejects stale fencing tokens.
-- KEYS[1]: the resource, a hash {fence, value}. ARGV[1]: the writer's
-- fencing token. ARGV[2]: the value.
-- Stores the value and the token when the token is greater than the
-- highest accepted so far and returns {1, token}; otherwise changes
-- nothing and returns {0, highest}.
local f = tonumber(ARGV[1])
local last = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if not last then
  return redis.error_reply('redlock: fence of ' .. KEYS[1] .. ' is not a number')
end
if f <= last then
  return {0, last}
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
return {1, f}
