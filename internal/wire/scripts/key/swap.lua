-- Hand-on: an acquire of one key lock that may take the key from the
-- holder handing it on (the same Client's Unlock; see queue.go), in one
-- step instead of a release and an acquire.
-- KEYS[1]: the lock's key. ARGV[1]: the new holder's token. ARGV[2]: TTL
-- in milliseconds. ARGV[3]: the token of the holder handing it on.
-- Returns 1 when the key held the old holder's token (or already the new
-- one) and now holds the new one; 2 when it was missing and now holds the
-- new token (the old holder had lost it here); and when it holds another
-- value, {0, metadata, pttl} as key/acquire.lua.
local v = redis.call('GET', KEYS[1])
if v and not own(v, ARGV[1]) and not own(v, ARGV[3]) then
  return {0, meta(v), holderTTL(KEYS[1])}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if v then
  return 1
end
return 2
