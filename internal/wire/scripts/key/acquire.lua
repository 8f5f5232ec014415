-- Acquire: all of KEYS or none, on this node.
-- KEYS: the lock's keys. ARGV[1]: our token. ARGV[2]: TTL in milliseconds.
-- ARGV[3], ARGV[4] (optional): a waiting writer's mark (writer_mark.lua).
-- Returns 1 when every key now holds our token (a key already holding our
-- token is refreshed: acquire is idempotent), and when a key holds
-- another, {0, metadata, pttl}: the holder's metadata (never its token,
-- own.lua) and the key's remaining time to live in milliseconds.
-- On a refusal, every key that readers hold is marked (writer_mark.lua).
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v and not own(v, ARGV[1]) then
    markReaders(#KEYS)
    return {0, meta(v), holderTTL(KEYS[i])}
  end
end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return 1
