-- The store's time for one call. t (the call's first number, args.lua) = time in microseconds (a clock seam
-- for tests and replays), or -1 to use Redis TIME (the normal case). Set at the start of every call, read by the algorithms:
-- with a pinned time, a key Redis still holds may belong to a window that is over by that time (Redis
-- expires keys by its own clock), so an algorithm that trusts expiry checks it then.
local CLOCK = { pinned = false }
-- TIME's seconds as last read, as text and in microseconds: they change once a second, and Lua's strings
-- are interned, so telling them unchanged is one comparison where reading them is a strtod.
local TIME_S, TIME_S_US = nil, 0
local function store_now_us(t)
  if t >= 0 then
    CLOCK.pinned = true
    return t
  end
  CLOCK.pinned = false
  local r = r_call('TIME')
  local sec = r[1]
  if sec ~= TIME_S then TIME_S, TIME_S_US = sec, to_number(sec) * 1000000 end
  return TIME_S_US + to_number(r[2])
end
-- The same time in two parts: the whole second, in µs, and the µs past it: TIME's text, read into a number
-- only where wanted, or with a pinned time a number (exact: both parts of a double of this size are). A
-- fixed window's usual allowed request is decided from the second alone (count_apply1), so it reads no µs:
-- a strtod and the rest, about 1,500 instructions. Its TIME lines are store_now_us's, written out: one
-- calling the other would cost every check a Lua call (about 250 instructions).
local function store_now_split(t)
  if t >= 0 then
    CLOCK.pinned = true
    local us = t % 1000000
    return t - us, us
  end
  CLOCK.pinned = false
  local r = r_call('TIME')
  local sec = r[1]
  if sec ~= TIME_S then TIME_S, TIME_S_US = sec, to_number(sec) * 1000000 end
  return TIME_S_US, r[2]
end
