-- Shared by the drivers: the store's time and the checks as the caller encoded them.
-- ARGV[1] = time in microseconds, or '' to use Redis TIME (the normal case; see src/store/scripts.ts).
-- ARGV[2] = number of checks, negated for a dry run (evaluate, consume nothing); then per check: algorithm id (negated for a shadow limit), capacity, the
-- algorithm's parameter (fixed window: window seconds; token bucket: refill per second; quota: 0),
-- hits; the refund driver adds ref ms (the window or period end that was charged); a quota adds three
-- more: start, boundary, end (ms). KEYS: one per check, two for a quota (its two periods).
local function store_now_us()
  if ARGV[1] ~= '' then return tonumber(ARGV[1]) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Returns the checks and whether this is a dry run.
local function read_checks(now_us, with_ref)
  local now_ms = math.floor(now_us / 1000)
  local checks = {}
  local ai, ki = 3, 1
  local n = tonumber(ARGV[2])
  local dry = n < 0
  if dry then n = -n end
  for i = 1, n do
    local id = tonumber(ARGV[ai])
    local shadow = false
    if id and id < 0 then id, shadow = -id, true end
    local a = ALGOS[id]
    if not a then return nil, 'ERR sluice: unknown algorithm ' .. tostring(ARGV[ai]) end
    local param = tonumber(ARGV[ai + 2])
    local c = { a = a, id = id, cap = tonumber(ARGV[ai + 1]), win = 0, rate = 0, hits = tonumber(ARGV[ai + 3]), shadow = shadow, ref = 0, p_end = 0 }
    if id == 1 then c.win = param elseif id == 2 then c.rate = param end
    ai = ai + 4
    if with_ref then
      c.ref = tonumber(ARGV[ai])
      ai = ai + 1
    end
    if id == 3 then
      local start, boundary, stop = tonumber(ARGV[ai]), tonumber(ARGV[ai + 1]), tonumber(ARGV[ai + 2])
      ai = ai + 3
      if now_ms < start or now_ms >= stop then
        return nil, 'ERR sluice: store clock outside the quota periods sent (clock skew of half a period?)'
      end
      if now_ms < boundary then c.key, c.p_end = KEYS[ki], boundary else c.key, c.p_end = KEYS[ki + 1], stop end
      ki = ki + 2
    else
      c.key = KEYS[ki]
      ki = ki + 1
    end
    checks[i] = c
  end
  return checks, nil, dry
end
