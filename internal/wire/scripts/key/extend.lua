-- Extend a key lock on this node (extendKey, extend/kinds.lua).
-- KEYS: the lock's keys, then, for a fenced lock, their fence counters.
-- ARGV[1]: our value (token, and metadata as last proclaimed).
-- ARGV[2]: TTL in milliseconds. ARGV[3] (a fenced lock only): our
-- fencing token.
-- Returns 1 when every key held our token and was extended, 2 when keys
-- were missing and put back (healed), -1 when a key holds another token
-- (nothing is changed then).
local n = #KEYS
if ARGV[3] then
  n = n / 2
end
return extendKey(1, n, ARGV[1], ARGV[2], ARGV[3])
