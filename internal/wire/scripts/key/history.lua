-- History: an election's recent publications on this node, read-only.
-- KEYS[1]: the election's history (key/proclaim.lua writes it). ARGV[1]:
-- the lowest term to return.
-- Returns {member1, term1, member2, term2, ...} in (term, member) order,
-- empty when the history is missing.
return redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf', 'WITHSCORES')
