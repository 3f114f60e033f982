-- Token bucket (the case study's script, generalised to a cost and a fractional refill).
-- The key is one string: tokens and last (microseconds) as two binary doubles (struct 'dd', exact,
-- 16 bytes), written with its TTL in one SET. Mirrored step for step by src/counters/token_bucket/math.ts.
-- The epsilons: capacity / rate is often a hair above a whole number in floating point.
-- Built on first use in a call (lua-library.ts): a script runs its whole text on every call.
ALGOS.token_bucket = function()
  -- Locals, not global lookups, on every check.
  local ceil, floor = math.ceil, math.floor
  local pack, unpack = struct.pack, struct.unpack
  -- One source of the maths, on plain numbers, for both the check table's path and apply1.
  -- math.min(a, b) is written `b < a and b or a` and math.max(a, b) `b > a and b or a`: the same
  -- comparisons in the same order (the same zero's sign too), without a C call (about 200 instructions).
  -- Tokens available now.
  local function level(key, cap, rate, now_us)
    local v = r_call('GET', key)
    if not v then return cap end
    local tokens, last = unpack('dd', v)
    local elapsed = now_us - last
    elapsed = 0 > elapsed and 0 or elapsed
    tokens = tokens + (elapsed / 1000000) * rate
    return tokens < cap and tokens or cap
  end
  -- allowed, remaining, reset seconds, retry-after ms, level after, 0
  local function decide(cap, rate, tokens, hits)
    if cap <= 0 or rate <= 0 then return 0, 0, 0, -1, tokens, 0 end
    local need = 1 > hits and 1 or hits
    local allowed, after, retry = 0, tokens, -1
    if tokens >= need then
      allowed, after = 1, tokens - hits
    elseif hits <= cap then
      retry = ceil((need - tokens) / rate * 1000 - 1e-6)
      retry = 1 > retry and 1 or retry
    end
    local remaining, reset = floor(after), ceil((cap - after) / rate - 1e-9)
    return allowed, 0 > remaining and 0 or remaining, 0 > reset and 0 or reset, retry, after, 0
  end
  -- Expires after the time to fill from empty (never below empty: leases take only tokens that are
  -- there): an idle bucket older than that is full, so the key can go.
  local function save(key, cap, rate, tokens, now_us)
    local empty = cap - tokens > cap and cap - tokens or cap
    local ttl = ceil(empty / rate - 1e-9)
    r_call('SET', key, pack('dd', tokens, now_us), 'EX', int_arg(1 > ttl and 1 or ttl))
  end
  local A
  A = {
    level = function(c, now_us)
      return level(c.key, c.cap, c.rate, now_us)
    end,
    decide = function(c, tokens, hits, now_us)
      return decide(c.cap, c.rate, tokens, hits)
    end,
    save = function(c, tokens, now_us)
      save(c.key, c.cap, c.rate, tokens, now_us)
    end,
    -- The one check of a request, not a shadow one (apply.lua): capacity, hits, rate. The steps of
    -- apply.lua's one-check path, without its check table (that path: 64,084 instructions per call for
    -- tb1; this: 49,886). A copy of the maths written out here saved only 4.2 % more (47,790), so there is
    -- none: `node bench/redis-instructions.mjs --sets tb1,tb2,tb5` (tb2, tb5 the same either way).
    apply1 = function(KEYS, t, cap, hits, rate)
      local now_us = store_now_us(t)
      local key = KEYS[1]
      local allowed, remaining, reset, retry, after = decide(cap, rate, level(key, cap, rate, now_us), hits)
      if allowed == 1 and hits > 0 then save(key, cap, rate, after, now_us) end
      return reply1(allowed, remaining, reset, retry, 0, false)
    end,
    refund = function(c, now_us)
      local tokens = level(c.key, c.cap, c.rate, now_us) + c.hits
      save(c.key, c.cap, c.rate, tokens < c.cap and tokens or c.cap, now_us)
    end,
  }
  return A
end
