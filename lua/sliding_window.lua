-- Sliding window counter over epoch-aligned windows of c.win seconds. The key is one string
-- "index:cur:prev": the window index of cur, this window's count, the previous window's. The previous
-- count is weighted by the part of it still inside a window-long span ending now; a request passes
-- while that estimate plus its cost stays within the limit. Kept for two windows.
-- Mirrored step for step by src/counters/sliding_window/math.ts.
-- Built on first use in a call (lua-library.ts): a script runs its whole text on every call.
ALGOS.sliding_window = function()
  local function sw_read(key)
    local v = redis.call('GET', key)
    if not v then return nil end
    local index, cur, prev = string.match(v, '^(%d+):(%d+):(%d+)$')
    if not index then return nil end
    return tonumber(index), tonumber(cur), tonumber(prev)
  end
  -- Until both counts have slid out: the end of the next window if this one counted, else of this one.
  local function sw_reset(l, win_us, elapsed)
    if l.cur > 0 then return math.ceil((2 * win_us - elapsed) / 1000000) end
    if l.prev > 0 then return math.ceil((win_us - elapsed) / 1000000) end
    return 0
  end
  local A
  A = {
    -- The counts rolled to the window that holds now_us: { cur, prev }.
    level = function(c, now_us)
      if c.win <= 0 then return { cur = 0, prev = 0 } end
      local index, cur, prev = sw_read(c.key)
      if not index then return { cur = 0, prev = 0 } end
      local now_index = math.floor(now_us / (c.win * 1000000))
      -- A store clock that stepped back a little keeps the counts it has.
      if index >= now_index then return { cur = cur, prev = prev } end
      if index == now_index - 1 then return { cur = 0, prev = cur } end
      return { cur = 0, prev = 0 }
    end,
    -- allowed, remaining, reset seconds, retry-after ms, level after, window end ms
    decide = function(c, l, hits, now_us)
      local cap = c.cap
      if c.win <= 0 then return 0, 0, 0, -1, l, 0 end
      local win_us = c.win * 1000000
      local start_us = math.floor(now_us / (c.win * 1000000)) * win_us
      local elapsed = now_us - start_us
      local end_ms = (start_us + win_us) / 1000
      local estimate = l.prev * ((win_us - elapsed) / win_us) + l.cur
      local need = math.max(hits, 1)
      if cap > 0 and estimate + need <= cap then
        local after = { cur = l.cur + hits, prev = l.prev }
        return 1, math.max(math.floor(cap - estimate - hits), 0), sw_reset(after, win_us, elapsed), -1, after, end_ms
      end
      local retry = -1
      if cap > 0 and hits <= cap then
        local wait_us
        if l.cur + need <= cap then
          -- This window's count fits: wait until enough of the previous window has slid out.
          wait_us = win_us * (1 - (cap - need - l.cur) / l.prev) - elapsed
        else
          -- Only after this window becomes the previous one, and enough of it has slid out.
          wait_us = win_us - elapsed + win_us * (1 - (cap - need) / l.cur)
        end
        retry = math.max(math.ceil(wait_us / 1000), 1)
      end
      return 0, math.max(math.floor(cap - estimate), 0), sw_reset(l, win_us, elapsed), retry, l, end_ms
    end,
    save = function(c, l, now_us)
      local index = math.floor(now_us / (c.win * 1000000))
      redis.call('SET', c.key, string.format('%d:%d:%d', index, l.cur, l.prev), 'PXAT', string.format('%d', (index + 2) * c.win * 1000))
    end,
    -- Gives back from cur while the charged window (c.ref = its end) is the stored one, from prev once
    -- it has become the previous one. The key keeps its expiry.
    refund = function(c, now_us)
      local index, cur, prev = sw_read(c.key)
      if not index then return end
      local charged = c.ref / (c.win * 1000) - 1
      if index == charged then
        cur = math.max(cur - c.hits, 0)
      elseif index == charged + 1 then
        prev = math.max(prev - c.hits, 0)
      else
        return
      end
      redis.call('SET', c.key, string.format('%d:%d:%d', index, cur, prev), 'KEEPTTL')
    end,
  }
  return A
end
