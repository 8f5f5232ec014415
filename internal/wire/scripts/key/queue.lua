-- A waiting Lock's check-in at its key's wait queue, on the key's queue
-- node alone (docs/contention.md). The queue is a sorted set of waiter
-- ids scored by their tickets (the time each began to wait, on its own
-- clock).
-- KEYS[1]: the lock's key; KEYS[2]: its queue; KEYS[3]: the mark of the
-- waiter named last.
-- ARGV[1]: our waiter id. ARGV[2]: our ticket. ARGV[3]: the queue's
-- lifetime in milliseconds. ARGV[4]: how long a waiter named stays the
-- one expected, in milliseconds. ARGV[5], ARGV[6]: the release channel
-- prefix ('' for none) and the key prefix's length (see release.lua).
-- Returns {rank, held}: our rank in the queue (0: next) and 1 when the
-- key is held on this node. {0, 0}, the key free and we next, takes us
-- out of the queue: our attempt follows.
local k, q, mark, id = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
redis.call('ZADD', q, ARGV[2], id)
redis.call('PEXPIRE', q, ARGV[3])
if redis.call('EXISTS', k) == 1 then
  return {redis.call('ZRANK', q, id), 1}
end
local first = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
if first[1] == id then
  redis.call('ZREM', q, id)
  return {0, 0}
end
if redis.call('EXISTS', mark) == 0 then
  -- Free, and no waiter named lately: the one named last died or
  -- missed its turn. Name the head, so that a waiter gone from the queue
  -- holds the others up once, for one mark's time, and no longer.
  redis.call('ZREM', q, first[1])
  redis.call('SET', mark, first[1], 'PX', ARGV[4])
  if ARGV[5] ~= '' then
    redis.pcall('PUBLISH', ARGV[5] .. string.sub(k, tonumber(ARGV[6]) + 1), 'q:' .. first[1] .. ':' .. first[2])
  end
end
return {redis.call('ZRANK', q, id), 0}
