-- Driver for approximate limits: leases. Per key, first gives back `back` unused units of an earlier
-- lease (the algorithm's own refund, judged by the window or period it was charged in: c.ref), then
-- takes up to c.hits units, at least `need`: the largest count the algorithm's own decide admits, so
-- every unit an instance admits locally was counted here first (Redis TIME deciding the window).
-- Then a probe: the decision for `need` more against what is left (remaining, reset, retry, end).
-- Same check layout as refund (checks.lua, with ref), then per check need and back at the end of the call's numbers.
-- Mirrored by src/approximate/ (leases.ts reads the reply); no state of its own.
bind_globals()
local V = call_numbers(ARGV)
local now_us = store_now_us(V[1])
local checks, err = read_checks(KEYS, V, now_us, true)
if not checks then return redis.error_reply(err) end
local n = #checks
local tail = #V - 2 * n
local out = { now_us }
for i, c in ipairs(checks) do
  local want = c.hits
  local need = V[tail + 2 * i - 1]
  local back = V[tail + 2 * i]
  if back > 0 then
    c.hits = back
    c.a.refund(c, now_us)
  end
  local level = c.a.level(c, now_us)
  local taken = 0
  if want > 0 then
    local ok, _, _, _, after = c.a.decide(c, level, want, now_us)
    if ok == 1 then
      taken = want
    elseif want > need and c.a.decide(c, level, need, now_us) == 1 then
      -- The largest count in [need, want) the algorithm admits (admission is monotone in the count).
      local lo, hi = need, want - 1
      while lo < hi do
        local mid = m_ceil((lo + hi) / 2)
        if c.a.decide(c, level, mid, now_us) == 1 then lo = mid else hi = mid - 1 end
      end
      taken = lo
      ok, _, _, _, after = c.a.decide(c, level, taken, now_us)
    end
    if taken > 0 then
      level = after
      c.a.save(c, level, now_us)
    end
  end
  local allowed, remaining, reset, retry, _, p_end = c.a.decide(c, level, need, now_us)
  local o = #out
  out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = taken, allowed, remaining, reset, retry, p_end or 0
end
return out
