-- Shared by the drivers: the checks as the caller encoded them. The layout per
-- algorithm (its wire id, the names of its parameters, its number of keys, whether its reply carries
-- an end) comes from src/counters/registry.ts, which src/store/lua-library.ts writes into algo(id) above.
-- KEYS and the call's numbers V (args.lua) are passed in: in a function library (FCALL) KEYS and ARGV are
-- the function's arguments.
-- V[1] = the time (clock.lua).
-- V[2] = number of checks, negated for a dry run (evaluate, consume nothing); then per check: wire
-- id (negated for a shadow limit), capacity, hits; the refund driver adds ref ms (the window or
-- period end that was charged); then the algorithm's parameters. KEYS: the algorithm's keys per check.

-- One check from V[ai] and KEYS[ki]; returns it and the next ai and ki, or nil and an error.
local function read_check(KEYS, V, ai, ki, with_ref, now_ms)
  local id = V[ai]
  local shadow = false
  if id and id < 0 then id, shadow = -id, true end
  local a = id and algo(id)
  if not a then return nil, 'ERR sluice: unknown algorithm ' .. tostring(id) end
  -- The fields set later are named here (nil until then): the table is made once at its size (apply.lua).
  local c = {
    a = a, key = KEYS[ki], cap = V[ai + 1], hits = V[ai + 2], shadow = shadow, ref = 0, p_end = 0,
    allowed = nil, remaining = nil, reset = nil, retry = nil, r_end = nil, took = nil, commit = nil,
  }
  ai = ai + 3
  if with_ref then
    c.ref = V[ai]
    ai = ai + 1
  end
  local params = a.params
  for j = 1, #params do
    c[params[j]] = V[ai]
    ai = ai + 1
  end
  if a.nkeys > 1 then c.key2 = KEYS[ki + 1] end
  ki = ki + a.nkeys
  if a.bind then
    local err = a.bind(c, now_ms)
    if err then return nil, err end
  end
  return c, ai, ki
end

-- Returns the checks, or nil and an error; and whether this is a dry run.
local function read_checks(KEYS, V, now_us, with_ref)
  local now_ms = m_floor(now_us / 1000)
  local checks = {}
  local ai, ki = 3, 1
  local n = V[2]
  local dry = n < 0
  if dry then n = -n end
  for i = 1, n do
    local c, next_ai, next_ki = read_check(KEYS, V, ai, ki, with_ref, now_ms)
    if not c then return nil, next_ai end -- the error
    checks[i], ai, ki = c, next_ai, next_ki
  end
  return checks, nil, dry
end
