-- Proclaim: a key lock's holder rewrites its metadata, on this node.
-- KEYS[1]: the lock's key. ARGV[1]: the holder's value when it acquired
-- (own.lua). ARGV[2]: the new value, its token and the new metadata.
-- ARGV[3] (optional): a channel on which to announce the change;
-- ARGV[4]: the announcement's message.
-- Keeps the key's TTL. Returns 1 when the key held our token (rewritten),
-- -1 when it holds another's, 0 when it is missing.
local v = redis.call('GET', KEYS[1])
if own(v, ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
  if ARGV[3] and ARGV[3] ~= '' then
    redis.pcall('PUBLISH', ARGV[3], ARGV[4] or '')
  end
  return 1
end
if v then
  return -1
end
return 0
