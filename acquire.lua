-- Acquire: all of KEYS or none, on this node.
-- KEYS: the lock's keys. ARGV[1]: our token. ARGV[2]: TTL in milliseconds.
-- ARGV[3], ARGV[4] (optional: Lock's attempts, not TryLock's): how long,
-- in milliseconds, a waiting writer marks a key that readers hold, and
-- the readers' marker value.
-- Returns 1 when every key now holds our token (a key already holding our
-- token is refreshed: acquire is idempotent), 0 when any key holds another.
-- On a refusal with ARGV[4], every key that readers hold (its value the
-- marker, marked or not) is marked: its value becomes marker .. ':w:' ..
-- the mark's end in milliseconds on this node's clock, its expiry kept.
-- New readers are refused while the mark lasts (read_acquire.lua), so a
-- stream of overlapping readers cannot keep a waiting writer out.
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v and v ~= ARGV[1] then
    local m = ARGV[4]
    if m then
      local now
      for j = 1, #KEYS do
        local w = redis.call('GET', KEYS[j])
        if w and (w == m or string.sub(w, 1, #m + 3) == m .. ':w:') then
          local pttl = redis.call('PTTL', KEYS[j])
          if pttl > 0 then
            if not now then
              local t = redis.call('TIME')
              now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
            end
            redis.call('SET', KEYS[j], m .. ':w:' .. string.format('%d', now + tonumber(ARGV[3])), 'PX', pttl)
          end
        end
      end
    end
    return 0
  end
end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return 1
