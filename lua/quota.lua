-- Calendar quota: a count per period (UTC day or month) in a key named by the period, which
-- expires at the period end. The caller sends two adjacent periods (keys c.key and c.key2, bounds
-- c.start, c.boundary, c.stop in ms); bind picks the one that holds the store's time.
-- Mirrored step for step by src/counters/quota/math.ts.
-- Built on first use in a call (lua-library.ts): a script runs its whole text on every call.
ALGOS.quota = function()
  local A
  A = {
    bind = function(c, now_ms)
      if now_ms < c.start or now_ms >= c.stop then
        return 'ERR sluice: store clock outside the quota periods sent (clock skew of half a period?)'
      end
      if now_ms < c.boundary then c.p_end = c.boundary else c.key, c.p_end = c.key2, c.stop end
    end,
    level = function(c, now_us)
      return tonumber(redis.call('GET', c.key)) or 0
    end,
    -- allowed, remaining, reset seconds, retry-after ms, level after, period end ms (count.lua)
    decide = function(c, count, hits, now_us)
      return count_decide(count, c.cap, hits, now_us, c.p_end)
    end,
    save = function(c, count, now_us)
      redis.call('SET', c.key, count, 'PXAT', c.p_end)
    end,
    refund = function(c, now_us)
      if c.p_end ~= c.ref then return end -- the charged period is over: its key is gone or going
      local count = tonumber(redis.call('GET', c.key))
      if count and count > 0 then redis.call('SET', c.key, string.format('%d', math.max(count - c.hits, 0)), 'KEEPTTL') end
    end,
  }
  return A
end
