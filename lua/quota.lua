-- Calendar quota: a count per period (UTC day or month) in a key named by the period, which
-- expires at the period end. The caller computes the period bounds; the driver picks the key
-- whose period holds the store's time and passes its end as p_end (ms).
-- Mirrored step for step by src/store/algorithms.ts.
ALGOS[3] = {
  level = function(key, cap, win, rate, now_us, p_end)
    return tonumber(redis.call('GET', key)) or 0
  end,
  -- allowed, remaining, reset seconds, retry-after ms, level after, period end ms (count.lua)
  decide = function(count, cap, win, rate, hits, now_us, p_end)
    return count_decide(count, cap, hits, now_us, p_end)
  end,
  save = function(key, count, cap, win, rate, now_us, p_end)
    redis.call('SET', key, string.format('%d', count), 'PXAT', string.format('%d', p_end))
  end,
  refund = function(key, cap, win, rate, hits, ref_ms, now_us, p_end)
    if p_end ~= ref_ms then return end -- the charged period is over: its key is gone or going
    local count = tonumber(redis.call('GET', key))
    if count and count > 0 then redis.call('SET', key, string.format('%d', math.max(count - hits, 0)), 'KEEPTTL') end
  end,
}
