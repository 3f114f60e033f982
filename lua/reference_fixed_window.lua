-- envoyproxy/ratelimit's fixed window (SLUICE_REFERENCE_KEYS): a count in the reference's own key,
-- `<prefix><domain>_<k1>_<v1>_..._<window start, unix seconds>`, raised by every request, refused ones
-- too unless c.refused is 0 (its STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true), and given the unit as its
-- TTL at each raise (the reference's INCRBY + EXPIRE), so reference instances and sluice's count together
-- on one Redis. The caller sends the key without the window
-- start and the store's clock picks the window: the key is named inside the script, which is why this
-- runs on one Redis node only (never a cluster; settings.ts refuses that).
-- Mirrored step for step by src/counters/reference_fixed_window/math.ts.
ALGOS.reference_fixed_window = function()
  local function end_ms(win, now_us)
    return (math.floor(now_us / (win * 1000000)) * win + win) * 1000
  end
  local A
  A = {
    bind = function(c, now_ms)
      c.key = c.key .. string.format('%d', math.floor(now_ms / (c.win * 1000)) * c.win)
      c.counts_refused = c.refused == 1
    end,
    level = function(c, now_us)
      return tonumber(redis.call('GET', c.key)) or 0
    end,
    -- The reference's verdict: over once the count after this request exceeds the limit; with
    -- c.counts_refused, apply.lua saves a refused request's count too.
    decide = function(c, count, hits, now_us)
      local e = end_ms(c.win, now_us)
      local reset = math.ceil((e * 1000 - now_us) / 1000000)
      local after = count + hits
      if after <= c.cap then return 1, c.cap - after, reset, -1, after, e end
      local retry = math.max(math.ceil((e * 1000 - now_us) / 1000), 1)
      if hits > c.cap then retry = -1 end
      return 0, 0, reset, retry, after, e
    end,
    save = function(c, count, now_us)
      redis.call('SET', c.key, string.format('%d', count), 'EX', c.win)
    end,
    -- The reference never gives a count back.
    refund = function(c, now_us) end,
  }
  return A
end
