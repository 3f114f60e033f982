-- Fixed window, aligned to the epoch. The key holds the count and expires at the window end,
-- so the window is not in the key name (the app cannot know Redis's time).
-- Mirrored step for step by src/counters/fixed_window/math.ts.
-- Built on first use in a call (lua-library.ts): a script runs its whole text on every call.
ALGOS.fixed_window = function()
  -- Locals, not global lookups, on every check.
  local floor, max = math.floor, math.max
  local function fw_end_ms(win, now_us)
    return (floor(now_us / (win * 1000000)) * win + win) * 1000
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
    -- Integers go to Redis as numbers (Lua's %.17g writes them whole): no string.format per call.
    save = function(c, count, now_us)
      redis.call('SET', c.key, count, 'PXAT', fw_end_ms(c.win, now_us))
    end,
    -- The one check of a request, not a shadow one (apply.lua): ARGV[4..6] = capacity, hits, window.
    -- The same answer and the same key after as level, decide and save, in fewer commands: PEXPIRETIME
    -- says whether the key holds this window's count (it expires at the window end); if so INCRBY adds
    -- the hits in place (the TTL stays) and DECRBY takes them back when refused.
    apply1 = function(key, ARGV, now_us)
      local cap, hits, win = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
      if win <= 0 then return reply1(0, 0, 0, -1, 0, true) end
      local e = fw_end_ms(win, now_us)
      local pe = redis.call('PEXPIRETIME', key)
      local count, current = 0, pe == e
      if not current and pe ~= -2 then redis.call('GET', key) end -- a key of another type fails, as in level
      if current then
        local n = redis.pcall('INCRBY', key, hits)
        if type(n) == 'number' then
          count = n - hits
        else -- not an integer: as level reads it, and saved whole below
          count, current = tonumber(redis.call('GET', key)) or 0, false
        end
      end
      local allowed, remaining, reset, retry = count_decide(count, cap, hits, now_us, e)
      if current then
        if allowed ~= 1 and hits ~= 0 then redis.call('DECRBY', key, hits) end
      elseif allowed == 1 and hits > 0 then
        redis.call('SET', key, count + hits, 'PXAT', e)
      end
      return reply1(allowed, remaining, reset, retry, e, true)
    end,
    -- Only while the window that was charged (c.ref = its end) is still the current one.
    refund = function(c, now_us)
      if fw_end_ms(c.win, now_us) ~= c.ref then return end
      local count = A.level(c, now_us)
      if count > 0 then A.save(c, max(count - c.hits, 0), now_us) end
    end,
  }
  return A
end
