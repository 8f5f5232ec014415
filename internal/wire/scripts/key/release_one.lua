-- Release of one key: compare-and-delete on this node, as release.lua
-- for a lock of one key. Every unlock of a key lock runs it, so it is
-- written for the node's CPU: it defines no functions (a script's chunk
-- builds each of its local functions on every call) and runs no pcall'd
-- body. A WRONGTYPE GET answers as typed() does: -1 where the key holds
-- a sorted set (another of our lock kinds), the error otherwise.
-- KEYS[1]: the lock's key. ARGV[1]: our token. ARGV[2] (optional): the
-- release channel prefix ('' for none); ARGV[3] (optional): the key
-- prefix's length (see release.lua); ARGV[4] (optional): how long the
-- waiter named stays the one expected, in milliseconds.
-- With ARGV[4], the release takes the head out of the key's wait queue
-- (KEYS[1] .. ':queue', key/queue.lua), marks it as named
-- (KEYS[1] .. ':queue:named') and names it in the announcement
-- ('q:' .. its id .. ':' .. its ticket): queued waiters wake on their
-- own name alone. The queue's keys are not declared, and every command
-- on them is pcall'd: a user whose ACL covers the lock's key alone
-- still releases, and its waiters fall back to their retry delay.
-- Returns 1 when the key held our token (deleted), -1 when it holds
-- another token, 0 when it is missing.
local v = redis.pcall('GET', KEYS[1])
local t = ARGV[1]
if v ~= t then
  if type(v) == 'table' then
    local msg = v.err or tostring(v)
    local at = string.find(msg, 'WRONGTYPE', 1, true)
    if not at then
      return redis.error_reply(msg)
    end
    local ty = redis.pcall('TYPE', KEYS[1])
    if type(ty) == 'table' and ty.ok == 'zset' then
      return -1
    end
    return redis.error_reply(string.sub(msg, at))
  end
  if not v then
    return 0
  end
  -- A value with metadata (token, NUL, metadata; see own.lua) is ours
  -- when the tokens match.
  local i = string.find(v, '\0', 1, true)
  if i then
    v = string.sub(v, 1, i - 1)
  end
  i = string.find(t, '\0', 1, true)
  if i then
    t = string.sub(t, 1, i - 1)
  end
  if v ~= t then
    return -1
  end
end
redis.call('DEL', KEYS[1])
local msg = ''
if ARGV[4] then
  local p = redis.pcall('ZPOPMIN', KEYS[1] .. ':queue')
  if type(p) == 'table' and p[1] then
    redis.pcall('SET', KEYS[1] .. ':queue:named', p[1], 'PX', ARGV[4])
    msg = 'q:' .. p[1] .. ':' .. p[2]
  end
end
if ARGV[2] and ARGV[2] ~= '' then
  -- pcall: a user without the channel permission still releases.
  local k = KEYS[1]
  if ARGV[3] then
    k = string.sub(k, tonumber(ARGV[3]) + 1)
  end
  redis.pcall('PUBLISH', ARGV[2] .. k, msg)
end
return 1
