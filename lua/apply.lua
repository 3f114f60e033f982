-- Driver: evaluates every check of one request atomically (all or nothing). Preceded by
-- `local ALGOS = {}`, the ODD_WINDOW_SUFFIX of core/keys.ts, globals.lua, args.lua, clock.lua, reply.lua, count.lua, the algorithm files, algo(id) and checks.lua (see src/store/lua-library.ts).
-- Mirrored by src/counters/engine.ts.
-- Returns, as one string of doubles (reply.lua), per check: remaining if allowed, else -(remaining + 1);
-- reset seconds; when refused, the retry-after ms (-1 never); for an algorithm that reports an end (a
-- window or quota), that end ms. An allowed token bucket is two numbers (the common case).
-- One check (most requests) of an algorithm that decides a plain one (not a dry run, not shadow) itself
-- (apply1), in fewer commands, with the same answer and the same key after: its numbers (time, count, id,
-- capacity, hits, up to three parameters) straight into locals, without a table. apply1 is given the time
-- as sent (clock.lua) and reads the store's clock itself, as much of it as it needs. unpack's last value is
-- the position after the numbers: an algorithm reads only its own parameters.
-- (The lookups are written out: a Lua call costs a few hundred instructions.)
if not r_call then bind_globals() end
local s = ARGV[1]
if #s <= 64 then
  local t, n, id, cap, hits, p1, p2, p3 = s_unpack(ARG_FORMATS[#s / 8] or doubles_format(#s / 8), s)
  local a = n == 1 and id > 0 and (BY_ID[id] or algo(id))
  if a and a.apply1 then return a.apply1(KEYS, t, cap, hits, p1, p2, p3) end
end
local V = call_numbers(ARGV)
local now_us = store_now_us(V[1])
local n = V[2]
if n == 1 or n == -1 then
  -- One check otherwise: the same rule without the tables of the all-or-nothing pass.
  local c, err = read_check(KEYS, V, 3, 1, false, m_floor(now_us / 1000))
  if not c then return redis.error_reply(err) end
  local a = c.a
  local level = a.level(c, now_us)
  local allowed, remaining, reset, retry, after, p_end = a.decide(c, level, c.hits, now_us)
  if n == 1 then
    -- An algorithm that counts refused requests (the reference's) saves whatever it decided.
    if (allowed == 1 or c.counts_refused) and c.hits > 0 then a.save(c, after, now_us) end
  elseif allowed == 1 and c.hits > 0 and not c.counts_refused then
    -- Dry run: nothing is consumed, so report what is still there.
    local _
    _, remaining, reset = a.decide(c, level, 0, now_us)
  end
  return reply1(allowed, remaining, reset, retry, p_end, a.reports_end)
end
local checks, err, dry = read_checks(KEYS, V, now_us, false)
if not checks then return redis.error_reply(err) end
-- Each check's outcome is kept in its own table (allowed, remaining, reset, retry, r_end; took: charged in
-- place, commit: to be saved), whose fields read_check presized: tables of their own per purpose grew from
-- empty on every call, and a table's growth cost more than the rest of a check's pass.
local nc = #checks
local pending = {} -- key -> level after this request's earlier checks (same key twice counts twice)
local stored = {} -- key -> level as read, for reporting when the request is refused
local blocked = dry -- a dry run reports as if refused: nothing is saved
for i = 1, nc do
  local c = checks[i]
  local a, key = c.a, c.key
  -- An algorithm that can charge in place (take: the fixed window's INCRBY) does so instead of read,
  -- decide, save: one command, with the same answers (parity tests). A key's later checks in the same
  -- request read what the earlier ones left (pending) and save, as for any algorithm.
  local level = nil
  if not dry and a.take and stored[key] == nil then level = a.take(c, now_us) end
  local taken = level ~= nil
  if taken then
    if stored[key] == nil then stored[key] = level end
  else
    if stored[key] == nil then stored[key] = a.level(c, now_us) end
    level = pending[key]
    if level == nil then level = stored[key] end
  end
  local allowed, remaining, reset, retry, after, p_end = a.decide(c, level, c.hits, now_us)
  c.allowed, c.remaining, c.reset, c.retry, c.r_end = allowed, remaining, reset, retry, p_end
  if taken then
    if allowed == 1 then
      pending[key] = after
      c.took = true
    else
      a.untake(c)
    end
  elseif (allowed == 1 or c.counts_refused) and c.hits > 0 then
    -- An algorithm that counts refused requests (the reference's) commits whatever it decided.
    pending[key] = after
    c.commit = true
  end
  if allowed ~= 1 and not c.shadow then blocked = true end
end
if blocked then
  for j = nc, 1, -1 do
    local c = checks[j]
    if c.took then c.a.untake(c) end
  end
end
-- Refused: only what counts refused requests is saved (nothing on a dry run).
if not blocked or not dry then
  for j = nc, 1, -1 do -- the last commit per key carries the final level; saved, the key leaves pending
    local c = checks[j]
    local level = pending[c.key]
    if c.commit and level ~= nil and (not blocked or c.counts_refused) then
      pending[c.key] = nil
      c.a.save(c, level, now_us)
    end
  end
end
if blocked then
  -- Refused: nothing else was consumed, so the other allowed checks report what is still there.
  for i = 1, nc do
    local c = checks[i]
    if c.allowed == 1 and c.hits > 0 and not c.counts_refused then
      local _, remaining, reset = c.a.decide(c, stored[c.key], 0, now_us)
      c.remaining, c.reset = remaining, reset
    end
  end
end
local out, m = {}, 0
for i = 1, nc do
  local c = checks[i]
  m = reply_check(out, m, c.a.reports_end, c.allowed, c.remaining, c.reset, c.retry, c.r_end)
end
return pack_doubles(out, m)
