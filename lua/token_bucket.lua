-- Token bucket (the case study's script, generalised to a cost and a fractional refill).
-- The key is one string: tokens and last (microseconds) as two binary doubles (struct 'dd', exact,
-- 16 bytes), written with its TTL in one SET. Mirrored step for step by src/store/algorithms.ts.
-- The epsilons: capacity / rate is often a hair above a whole number in floating point.
ALGOS[2] = {
  -- Tokens available now.
  level = function(key, cap, win, rate, now_us)
    local v = redis.call('GET', key)
    if not v then return cap end
    local tokens, last = struct.unpack('dd', v)
    local elapsed = math.max(now_us - last, 0)
    return math.min(cap, tokens + (elapsed / 1000000) * rate)
  end,
  -- allowed, remaining, reset seconds, retry-after ms, level after, 0
  decide = function(tokens, cap, win, rate, hits, now_us)
    if cap <= 0 or rate <= 0 then return 0, 0, 0, -1, tokens, 0 end
    local need = math.max(hits, 1)
    local allowed, after, retry = 0, tokens, -1
    if tokens >= need then
      allowed, after = 1, tokens - hits
    elseif hits <= cap then
      retry = math.max(math.ceil((need - tokens) / rate * 1000 - 1e-6), 1)
    end
    local reset = math.max(math.ceil((cap - after) / rate - 1e-9), 0)
    return allowed, math.max(math.floor(after), 0), reset, retry, after, 0
  end,
  save = function(key, tokens, cap, win, rate, now_us)
    -- Time to fill from empty: an idle bucket older than that is full, so the key can go.
    redis.call('SET', key, struct.pack('dd', tokens, now_us), 'EX', math.max(math.ceil(cap / rate - 1e-9), 1))
  end,
  refund = function(key, cap, win, rate, hits, ref_ms, now_us)
    local tokens = ALGOS[2].level(key, cap, win, rate, now_us)
    ALGOS[2].save(key, math.min(cap, tokens + hits), cap, win, rate, now_us)
  end,
}
