-- A count that resets at end_ms: the decision shared by fixed windows and quotas (countDecide in
-- src/counters/count.ts). Returns allowed, remaining, reset seconds, retry-after ms (-1 never),
-- level after, end_ms.
local function count_decide(count, cap, hits, now_us, end_ms)
  local reset = math.ceil((end_ms * 1000 - now_us) / 1000000)
  if cap <= 0 then return 0, 0, reset, -1, count, end_ms end
  local need = math.max(hits, 1)
  if count + need <= cap then
    return 1, math.max(cap - count - hits, 0), reset, -1, count + hits, end_ms
  end
  local retry = math.max(math.ceil((end_ms * 1000 - now_us) / 1000), 1)
  if hits > cap then retry = -1 end
  return 0, math.max(cap - count, 0), reset, retry, count, end_ms
end
