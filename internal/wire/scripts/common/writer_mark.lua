-- A waiting writer's mark, put before acquire.lua and acquire_fenced.lua
-- (scripts.go). ARGV[3], ARGV[4] (optional: Lock's attempts, not
-- TryLock's): how long, in milliseconds, the mark lasts, and the readers'
-- marker value. markReaders(n) marks each of KEYS[1..n] that readers hold
-- (its value the marker, marked or not): its value becomes marker ..
-- ':w:' .. the mark's end in milliseconds on this node's clock, its
-- expiry kept. New readers are refused while the mark lasts
-- (read_acquire.lua), so a stream of overlapping readers cannot keep a
-- waiting writer out. Called on a refusal only. A key of another type
-- is skipped: what it means is the acquire's to decide (scripts.go).
local function markReaders(n)
  local m = ARGV[4]
  if not m then
    return
  end
  local now
  for j = 1, n do
    local w = redis.pcall('GET', KEYS[j])
    if type(w) == 'string' and (w == m or string.sub(w, 1, #m + 3) == m .. ':w:') then
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

