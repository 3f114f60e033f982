-- Driver: evaluates every check of one request atomically. Preceded by `local ALGOS = {}` and
-- the algorithm files (see src/store/scripts.ts).
-- KEYS[i] = key of check i; ARGV per check (6 each): algorithm id, capacity, window seconds,
-- refill per second, hits, shadow (0/1).
-- Returns 4 integers per check: allowed (0/1), remaining, reset seconds, retry-after seconds (-1 never).
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = #KEYS
local out = {}
local algo, arg = {}, {}
local pending = {} -- key -> level after this request's earlier checks (same key twice counts twice)
local stored = {} -- key -> level as read, for reporting when the request is refused
local commits = {}
local blocked = false
for i = 1, n do
  local b = (i - 1) * 6
  local a = ALGOS[tonumber(ARGV[b + 1])]
  if not a then return redis.error_reply('ERR sluice: unknown algorithm ' .. tostring(ARGV[b + 1])) end
  local cap, win, rate = tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
  local hits, shadow = tonumber(ARGV[b + 5]), ARGV[b + 6] == '1'
  local key = KEYS[i]
  if stored[key] == nil then stored[key] = a.level(key, cap, win, rate, now_us) end
  local level = pending[key]
  if level == nil then level = stored[key] end
  local allowed, remaining, reset, retry, after = a.decide(level, cap, win, rate, hits, now_us)
  local o = (i - 1) * 4
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = allowed, remaining, reset, retry
  if allowed == 1 then
    if hits > 0 then
      pending[key] = after
      commits[#commits + 1] = { a, key, cap, win, rate }
    end
  elseif not shadow then
    blocked = true
  end
end
if not blocked then
  local done = {}
  for j = #commits, 1, -1 do -- last commit per key carries the final level
    local c = commits[j]
    if not done[c[2]] then
      done[c[2]] = true
      c[1].save(c[2], pending[c[2]], c[3], c[4], c[5], now_us)
    end
  end
  return out
end
-- Refused: nothing was consumed, so the allowed checks report what is still there.
for i = 1, n do
  local b, o = (i - 1) * 6, (i - 1) * 4
  local hits = tonumber(ARGV[b + 5])
  if out[o + 1] == 1 and hits > 0 then
    local a = ALGOS[tonumber(ARGV[b + 1])]
    local cap, win, rate = tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
    local _, remaining, reset = a.decide(stored[KEYS[i]], cap, win, rate, 0, now_us)
    out[o + 2], out[o + 3] = remaining, reset
  end
end
return out
