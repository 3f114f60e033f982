-- Calendar quota: a count per period (UTC day or month) in a key named by the period, which
-- expires at the period end. The caller sends two adjacent periods (keys c.key and c.key2, bounds
-- c.start, c.boundary, c.stop in ms); bind picks the one that holds the store's time.
-- Mirrored step for step by src/counters/quota/math.ts.
-- Built on first use in a call (lua-library.ts): a script runs its whole text on every call.
ALGOS.quota = function()
  local floor = math.floor
  local OUTSIDE = 'ERR sluice: store clock outside the quota periods sent (clock skew of half a period?)'
  -- A period's count as level reads it: its key is named by the period, so whatever it holds is this period's.
  local function read_count(key)
    return to_number(r_call('GET', key)) or 0
  end
  local A
  A = {
    bind = function(c, now_ms)
      if now_ms < c.start or now_ms >= c.stop then return OUTSIDE end
      if now_ms < c.boundary then c.p_end = c.boundary else c.key, c.p_end = c.key2, c.stop end
    end,
    level = function(c, now_us)
      return read_count(c.key)
    end,
    -- allowed, remaining, reset seconds, retry-after ms, level after, period end ms (count.lua)
    decide = function(c, count, hits, now_us)
      return count_decide(count, c.cap, hits, now_us, c.p_end)
    end,
    save = function(c, count, now_us)
      r_call('SET', c.key, count, 'PXAT', int_arg(c.p_end))
    end,
    -- The one check of a request, not a shadow one (apply.lua): capacity, hits, start,
    -- boundary, stop. The same answer and the same key after as bind, level, decide and save, in fewer
    -- commands: INCRBY adds the hits in place (a key it makes gets the period's end; an existing key has
    -- it already, its name is the period's) and DECRBY takes them back when refused. A request refused
    -- whatever the count only reads.
    apply1 = function(KEYS, t, cap, hits, start, boundary, stop)
      local now_us = store_now_us(t)
      local now_ms = floor(now_us / 1000)
      if now_ms < start or now_ms >= stop then return redis.error_reply(OUTSIDE) end
      local key, e = KEYS[1], boundary
      if now_ms >= boundary then key, e = KEYS[2], stop end
      return count_apply1(key, cap, hits, e, now_us, 0, count_charge, read_count)
    end,
    -- The several-check pass (apply.lua), not a dry run: adds the hits in place (INCRBY) and returns the
    -- count before them; the pass gives them back with untake when the check or the request is refused.
    -- nil: not taken (no hits, more than the capacity, or not an integer): the pass reads and saves.
    take = function(c, now_us)
      local hits = c.hits
      if hits <= 0 or hits > c.cap then return nil end
      local count, made = count_charge(c.key, hits, c.p_end)
      if count == nil then return nil end
      c.made = made
      return count
    end,
    untake = function(c)
      if c.made then r_call('DEL', c.key) else r_call('DECRBY', c.key, int_arg(c.hits)) end
    end,
    refund = function(c, now_us)
      if c.p_end ~= c.ref then return end -- the charged period is over: its key is gone or going
      local count = tonumber(r_call('GET', c.key))
      if count and count > 0 then r_call('SET', c.key, string.format('%d', math.max(count - c.hits, 0)), 'KEEPTTL') end
    end,
  }
  return A
end
