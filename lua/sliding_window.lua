-- Sliding window counter over epoch-aligned windows of c.win seconds. The key is one string
-- "index:cur:prev": the window index of cur, this window's count, the previous window's. The previous
-- count is weighted by the part of it still inside a window-long span ending now; a request passes
-- while that estimate plus its cost stays within the limit. Kept for two windows.
-- Mirrored step for step by src/counters/sliding_window/math.ts.
-- Built on first use in a call (lua-library.ts): a script runs its whole text on every call.
ALGOS.sliding_window = function()
  local floor, ceil, max = math.floor, math.ceil, math.max
  local function sw_read(key)
    local v = r_call('GET', key)
    if not v then return nil end
    local index, cur, prev = string.match(v, '^(%d+):(%d+):(%d+)$')
    if not index then return nil end
    return to_number(index), to_number(cur), to_number(prev)
  end
  -- Until both counts have slid out: the end of the next window if this one counted, else of this one.
  local function sw_reset(cur, prev, win_us, elapsed)
    if cur > 0 then return ceil((2 * win_us - elapsed) / 1000000) end
    if prev > 0 then return ceil((win_us - elapsed) / 1000000) end
    return 0
  end
  -- The counts rolled to the window that holds now_us: cur, prev.
  local function sw_level(key, win, now_us)
    if win <= 0 then return 0, 0 end
    local index, cur, prev = sw_read(key)
    if not index then return 0, 0 end
    local now_index = floor(now_us / (win * 1000000))
    -- A store clock that stepped back a little keeps the counts it has.
    if index >= now_index then return cur, prev end
    if index == now_index - 1 then return 0, cur end
    return 0, 0
  end
  -- allowed, remaining, reset seconds, retry-after ms, cur after, window end ms (prev is unchanged)
  local function sw_decide(cap, win, cur, prev, hits, now_us)
    if win <= 0 then return 0, 0, 0, -1, cur, 0 end
    local win_us = win * 1000000
    local start_us = floor(now_us / (win * 1000000)) * win_us
    local elapsed = now_us - start_us
    local end_ms = (start_us + win_us) / 1000
    local estimate = prev * ((win_us - elapsed) / win_us) + cur
    local need = max(hits, 1)
    if cap > 0 and estimate + need <= cap then
      return 1, max(floor(cap - estimate - hits), 0), sw_reset(cur + hits, prev, win_us, elapsed), -1, cur + hits, end_ms
    end
    local retry = -1
    if cap > 0 and hits <= cap then
      local wait_us
      if cur + need <= cap then
        -- This window's count fits: wait until enough of the previous window has slid out.
        wait_us = win_us * (1 - (cap - need - cur) / prev) - elapsed
      else
        -- Only after this window becomes the previous one, and enough of it has slid out.
        wait_us = win_us - elapsed + win_us * (1 - (cap - need) / cur)
      end
      retry = max(ceil(wait_us / 1000), 1)
    end
    return 0, max(floor(cap - estimate), 0), sw_reset(cur, prev, win_us, elapsed), retry, cur, end_ms
  end
  local function sw_save(key, win, cur, prev, now_us)
    local index = floor(now_us / (win * 1000000))
    r_call('SET', key, s_format('%d:%d:%d', index, cur, prev), 'PXAT', s_format('%d', (index + 2) * win * 1000))
  end
  local A
  A = {
    -- The counts rolled to the window that holds now_us: { cur, prev }.
    level = function(c, now_us)
      local cur, prev = sw_level(c.key, c.win, now_us)
      return { cur = cur, prev = prev }
    end,
    -- allowed, remaining, reset seconds, retry-after ms, level after, window end ms
    decide = function(c, l, hits, now_us)
      local allowed, remaining, reset, retry, cur, end_ms = sw_decide(c.cap, c.win, l.cur, l.prev, hits, now_us)
      if allowed == 1 then return allowed, remaining, reset, retry, { cur = cur, prev = l.prev }, end_ms end
      return allowed, remaining, reset, retry, l, end_ms
    end,
    save = function(c, l, now_us)
      sw_save(c.key, c.win, l.cur, l.prev, now_us)
    end,
    -- The one check of a request, not a shadow one (apply.lua): capacity, hits, window.
    -- level, decide and save without their tables: the same steps, so the same answer and key after.
    apply1 = function(KEYS, t, cap, hits, win)
      local now_us = store_now_us(t)
      local key = KEYS[1]
      local cur, prev = sw_level(key, win, now_us)
      local allowed, remaining, reset, retry, after, end_ms = sw_decide(cap, win, cur, prev, hits, now_us)
      if allowed == 1 and hits > 0 then sw_save(key, win, after, prev, now_us) end
      return reply1(allowed, remaining, reset, retry, end_ms, true)
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
      r_call('SET', c.key, s_format('%d:%d:%d', index, cur, prev), 'KEEPTTL')
    end,
  }
  return A
end
