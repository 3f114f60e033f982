-- Fixed window, aligned to the epoch. The key holds the count and expires at the window end,
-- so the window is not in the key name (the app cannot know Redis's time).
-- Mirrored step for step by src/counters/fixed_window/math.ts.
-- Built on first use in a call (scripts.ts): a script runs its whole text on every call.
ALGOS.fixed_window = function()
  local function fw_end_ms(win, now_us)
    return (math.floor(now_us / (win * 1000000)) * win + win) * 1000
  end
  local A
  A = {
    -- Count already used in the current window.
    level = function(c, now_us)
      if c.win <= 0 then return 0 end
      local v = redis.call('GET', c.key)
      if not v then return 0 end
      -- The key expires at its window's end: a count from another window (an expiry race at the
      -- boundary, or a key without TTL) is not this window's. PEXPIRETIME is absolute, so this holds
      -- whatever clock the script was given.
      if redis.call('PEXPIRETIME', c.key) ~= fw_end_ms(c.win, now_us) then return 0 end
      return tonumber(v) or 0
    end,
    -- allowed, remaining, reset seconds, retry-after ms, level after, window end ms (count.lua)
    decide = function(c, count, hits, now_us)
      if c.win <= 0 then return 0, 0, 0, -1, count, 0 end
      return count_decide(count, c.cap, hits, now_us, fw_end_ms(c.win, now_us))
    end,
    save = function(c, count, now_us)
      redis.call('SET', c.key, string.format('%d', count), 'PXAT', string.format('%d', fw_end_ms(c.win, now_us)))
    end,
    -- Only while the window that was charged (c.ref = its end) is still the current one.
    refund = function(c, now_us)
      if fw_end_ms(c.win, now_us) ~= c.ref then return end
      local count = A.level(c, now_us)
      if count > 0 then A.save(c, math.max(count - c.hits, 0), now_us) end
    end,
  }
  return A
end
