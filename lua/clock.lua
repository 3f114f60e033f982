-- The store's time for one call. V[1] (the call's numbers, args.lua) = time in microseconds (a clock seam
-- for tests and replays), or -1 to use Redis TIME (the normal case). Set at the start of every call, read by the algorithms:
-- with a pinned time, a key Redis still holds may belong to a window that is over by that time (Redis
-- expires keys by its own clock), so an algorithm that trusts expiry checks it then.
local CLOCK = { pinned = false }
local function store_now_us(V)
  if V[1] >= 0 then
    CLOCK.pinned = true
    return V[1]
  end
  CLOCK.pinned = false
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
