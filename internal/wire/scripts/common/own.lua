-- A key lock's value is its token, or its token, a NUL byte and the
-- holder's metadata (WithMetadata); Proclaim rewrites the metadata and
-- keeps the token. own(v, t) reports whether value v belongs to the
-- holder whose value was t when it acquired: the same value, or the same
-- token (the bytes before the first NUL, which no token contains).
-- meta(v) returns the metadata of value v ('' when it has none).
local function tokenOf(v)
  local i = string.find(v, '\0', 1, true)
  if i then
    return string.sub(v, 1, i - 1)
  end
  return v
end

local function own(v, t)
  if v == t then
    return true
  end
  return type(v) == 'string' and tokenOf(v) == tokenOf(t)
end

local function meta(v)
  local i = string.find(v, '\0', 1, true)
  if i then
    return string.sub(v, i + 1)
  end
  return ''
end

-- holderTTL(k) returns k's PTTL, or -1 where the ACL user may not run
-- PTTL (a user given only the commands the locks need).
local function holderTTL(k)
  local t = redis.pcall('PTTL', k)
  if type(t) ~= 'number' then
    return -1
  end
  return t
end

