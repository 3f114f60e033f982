-- Token bucket (the case study's script, generalised to a cost and a fractional refill).
-- The key is one string: tokens and last (microseconds) as two binary doubles (struct 'dd', exact,
-- 16 bytes), written with its TTL in one SET. Mirrored step for step by src/counters/token_bucket/math.ts.
-- The epsilons: capacity / rate is often a hair above a whole number in floating point.
-- Built on first use in a call (lua-library.ts): a script runs its whole text on every call.
ALGOS.token_bucket = function()
  -- Locals, not global lookups, on every check.
  local ceil, floor, max, min = math.ceil, math.floor, math.max, math.min
  local pack, unpack = struct.pack, struct.unpack
  local A
  A = {
    -- Tokens available now.
    level = function(c, now_us)
      local v = r_call('GET', c.key)
      if not v then return c.cap end
      local tokens, last = unpack('dd', v)
      local elapsed = max(now_us - last, 0)
      return min(c.cap, tokens + (elapsed / 1000000) * c.rate)
    end,
    -- allowed, remaining, reset seconds, retry-after ms, level after, 0
    decide = function(c, tokens, hits, now_us)
      local cap, rate = c.cap, c.rate
      if cap <= 0 or rate <= 0 then return 0, 0, 0, -1, tokens, 0 end
      local need = max(hits, 1)
      local allowed, after, retry = 0, tokens, -1
      if tokens >= need then
        allowed, after = 1, tokens - hits
      elseif hits <= cap then
        retry = max(ceil((need - tokens) / rate * 1000 - 1e-6), 1)
      end
      local reset = max(ceil((cap - after) / rate - 1e-9), 0)
      return allowed, max(floor(after), 0), reset, retry, after, 0
    end,
    save = function(c, tokens, now_us)
      -- Time to fill from empty (never below empty: leases take only tokens that are there): an idle bucket older than
      -- that is full, so the key can go.
      r_call('SET', c.key, pack('dd', tokens, now_us), 'EX', int_arg(max(ceil(max(c.cap, c.cap - tokens) / c.rate - 1e-9), 1)))
    end,
    -- The one check of a request, not a shadow one (apply.lua): capacity, hits, rate.
    -- level, decide and save written out in one function (no check table, no calls through A): the
    -- same steps in the same order, so the same answer and the same key after (parity tests).
    apply1 = function(KEYS, t, cap, hits, rate)
      local now_us = store_now_us(t)
      local key = KEYS[1]
      -- Up to an allowed answer math.min(a, b) is written `b < a and b or a` and math.max(a, b) `b > a and b or a`,
      -- the same comparisons in the same order (the same zero's sign too): a C call costs about 200 instructions.
      local tokens = cap
      local v = r_call('GET', key)
      if v then
        local held, last = unpack('dd', v)
        local elapsed = now_us - last
        elapsed = 0 > elapsed and 0 or elapsed
        tokens = held + (elapsed / 1000000) * rate
        tokens = tokens < cap and tokens or cap
      end
      if cap <= 0 or rate <= 0 then return reply1(0, 0, 0, -1, 0, false) end
      if tokens >= (1 > hits and 1 or hits) then
        local after = tokens - hits
        if hits > 0 then
          local empty = cap - after > cap and cap - after or cap
          local ttl = ceil(empty / rate - 1e-9)
          r_call('SET', key, pack('dd', after, now_us), 'EX', int_arg(1 > ttl and 1 or ttl))
        end
        local remaining, reset = floor(after), ceil((cap - after) / rate - 1e-9)
        return reply1(1, 0 > remaining and 0 or remaining, 0 > reset and 0 or reset, -1, 0, false)
      end
      local retry = -1
      if hits <= cap then retry = max(ceil((max(hits, 1) - tokens) / rate * 1000 - 1e-6), 1) end
      return reply1(0, max(floor(tokens), 0), max(ceil((cap - tokens) / rate - 1e-9), 0), retry, 0, false)
    end,
    refund = function(c, now_us)
      local tokens = A.level(c, now_us)
      A.save(c, min(c.cap, tokens + c.hits), now_us)
    end,
  }
  return A
end
