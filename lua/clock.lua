-- The store's time for one call. t (the call's first number, args.lua) = time in microseconds (a clock seam
-- for tests and replays), or -1 to use Redis TIME (the normal case). Set at the start of every call, read by the algorithms:
-- with a pinned time, a key Redis still holds may belong to a window that is over by that time (Redis
-- expires keys by its own clock), so an algorithm that trusts expiry checks it then.
local CLOCK = { pinned = false }
local function store_now_us(t)
  if t >= 0 then
    CLOCK.pinned = true
    return t
  end
  CLOCK.pinned = false
  local r = r_call('TIME')
  return to_number(r[1]) * 1000000 + to_number(r[2])
end
