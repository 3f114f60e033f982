-- The store's time for one call. ARGV[1] = time in microseconds (a clock seam for tests and replays),
-- or '' to use Redis TIME (the normal case). Set at the start of every call, read by the algorithms:
-- with a pinned time, a key Redis still holds may belong to a window that is over by that time (Redis
-- expires keys by its own clock), so an algorithm that trusts expiry checks it then.
local CLOCK = { pinned = false }
local function store_now_us(ARGV)
  if ARGV[1] ~= '' then
    CLOCK.pinned = true
    return tonumber(ARGV[1])
  end
  CLOCK.pinned = false
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
