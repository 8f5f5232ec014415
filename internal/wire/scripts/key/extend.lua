-- Extend: compare-and-pexpire, all of KEYS or none, on this node.
-- KEYS: the lock's keys. ARGV[1]: our token. ARGV[2]: TTL in milliseconds.
-- Returns 1 when every key held our token and was extended, -1 when a key
-- holds another token, 0 when a key is missing. Nothing is changed unless 1.
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if not own(v, ARGV[1]) then
    if v then
      return -1
    end
    return 0
  end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
