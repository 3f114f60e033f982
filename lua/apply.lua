-- Driver: evaluates every check of one request atomically (all or nothing). Preceded by
-- `local ALGOS = {}`, the algorithm files and checks.lua (see src/store/scripts.ts).
-- Returns 5 integers per check: allowed (0/1), remaining, reset seconds, retry-after ms (-1 never),
-- window or period end ms (0 for a token bucket).
local now_us = store_now_us()
local checks, err = read_checks(now_us)
if not checks then return redis.error_reply(err) end
local out = {}
local pending = {} -- key -> level after this request's earlier checks (same key twice counts twice)
local stored = {} -- key -> level as read, for reporting when the request is refused
local commits = {}
local blocked = false
for i, c in ipairs(checks) do
  if stored[c.key] == nil then stored[c.key] = c.a.level(c.key, c.cap, c.win, c.rate, now_us, c.p_end) end
  local level = pending[c.key]
  if level == nil then level = stored[c.key] end
  local allowed, remaining, reset, retry, after, p_end = c.a.decide(level, c.cap, c.win, c.rate, c.hits, now_us, c.p_end)
  local o = (i - 1) * 5
  out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = allowed, remaining, reset, retry, p_end
  if allowed == 1 then
    if c.hits > 0 then
      pending[c.key] = after
      commits[#commits + 1] = c
    end
  elseif not c.shadow then
    blocked = true
  end
end
if not blocked then
  local done = {}
  for j = #commits, 1, -1 do -- last commit per key carries the final level
    local c = commits[j]
    if not done[c.key] then
      done[c.key] = true
      c.a.save(c.key, pending[c.key], c.cap, c.win, c.rate, now_us, c.p_end)
    end
  end
  return out
end
-- Refused: nothing was consumed, so the allowed checks report what is still there.
for i, c in ipairs(checks) do
  local o = (i - 1) * 5
  if out[o + 1] == 1 and c.hits > 0 then
    local _, remaining, reset = c.a.decide(stored[c.key], c.cap, c.win, c.rate, 0, now_us, c.p_end)
    out[o + 2], out[o + 3] = remaining, reset
  end
end
return out
