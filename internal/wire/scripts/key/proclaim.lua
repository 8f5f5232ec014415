-- Proclaim: a key lock's holder rewrites its metadata, on this node.
-- KEYS[1]: the lock's key. KEYS[2] (optional): an election's history, a
-- sorted set of the leaderships' publications (score: the term).
-- ARGV[1]: the holder's value when it acquired (own.lua). ARGV[2]: the
-- new value, its token and the new metadata. ARGV[3] (optional): a
-- channel on which to announce the change; ARGV[4]: the announcement's
-- message. With KEYS[2]: ARGV[5] the entry's term, ARGV[6] its member,
-- ARGV[7] how many entries to keep (the highest), ARGV[8] the history's
-- expiry in ms, refreshed here.
-- Keeps the key's TTL. The history is written before the metadata, so a
-- node that refuses the history's commands (ACL) changes nothing.
-- Returns 1 when the key held our token (rewritten), -1 when it holds
-- another's, 0 when it is missing.
local v = redis.call('GET', KEYS[1])
if own(v, ARGV[1]) then
  if KEYS[2] then
    redis.call('ZADD', KEYS[2], ARGV[5], ARGV[6])
    redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[7]) + 1))
    redis.call('PEXPIRE', KEYS[2], ARGV[8])
  end
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
