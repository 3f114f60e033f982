-- Fixed window, aligned to the epoch. Two keys per limit: c.key for even windows, and for odd ones that
-- key with ODD_WINDOW_SUFFIX (core/keys.ts; only the first is sent). A window's count lives in its
-- parity's key, which expires at that window's end, so a key Redis still holds is this window's (the same
-- parity's last window ended a whole window ago) and the count needs no check of its expiry when the time
-- is Redis's own (CLOCK, clock.lua).
-- Mirrored step for step by src/counters/fixed_window/math.ts.
-- Built on first use in a call (lua-library.ts): a script runs its whole text on every call.
ALGOS.fixed_window = function()
  -- Locals, not global lookups, on every check.
  local floor, max = math.floor, math.max
  -- Whether a key that exists holds this window's count: always with Redis's time; with a pinned time
  -- only when it expires at this window's end (PEXPIRETIME is absolute, so this holds whatever clock).
  local function current(key, e)
    return not CLOCK.pinned or r_call('PEXPIRETIME', key) == e
  end
  -- Adds hits to key in place (INCRBY) in the window ending at e. Returns the count before them, whether
  -- this call made the key (give back: delete it), and the other window's count and expiry it replaced
  -- (a pinned time only; give back: put them back). nil: the key holds no integer. With Redis's time
  -- that is count_charge alone, which the one-check path passes instead (a call less per check).
  local function charge(key, hits, e)
    local count, made = count_charge(key, hits, e)
    if count == nil or made or not CLOCK.pinned then return count, made end
    local pe = r_call('PEXPIRETIME', key)
    if pe ~= e then -- another window's count: this window starts from nothing
      r_call('SET', key, int_arg(hits), 'PXAT', int_arg(e))
      return 0, true, count, pe
    end
    return count, false
  end
  -- A window's count as level reads it (a key of another type fails there too).
  local function read_count(key, e)
    local v = r_call('GET', key)
    if not v or not current(key, e) then return 0 end
    return to_number(v) or 0
  end
  local A
  A = {
    -- The key of the window the store's time is in, and that window's end.
    bind = function(c, now_ms)
      if c.win <= 0 then return end
      local idx = floor(now_ms / (c.win * 1000))
      if idx % 2 == 1 then c.key = c.key .. ODD_WINDOW_SUFFIX end
      c.p_end = (idx * c.win + c.win) * 1000
    end,
    -- Count already used in the current window.
    level = function(c, now_us)
      if c.win <= 0 then return 0 end
      return read_count(c.key, c.p_end)
    end,
    -- allowed, remaining, reset seconds, retry-after ms, level after, window end ms (count.lua)
    decide = function(c, count, hits, now_us)
      if c.win <= 0 then return 0, 0, 0, -1, count, 0 end
      return count_decide(count, c.cap, hits, now_us, c.p_end)
    end,
    save = function(c, count, now_us)
      r_call('SET', c.key, count, 'PXAT', int_arg(c.p_end))
    end,
    -- The one check of a request, not a shadow one (apply.lua): capacity, hits, window.
    -- The same answer and the same keys after as bind, level, decide and save, in fewer commands: INCRBY
    -- adds the hits in place (a key it makes then gets the window's end; an existing key keeps its TTL)
    -- and DECRBY takes them back when refused. A request refused whatever the count only reads.
    -- The window and its end come from the store's whole second (store_now_split): with a window of whole
    -- seconds no window ends inside a second, so they are the same at any µs of it.
    apply1 = function(KEYS, t, cap, hits, win)
      if win <= 0 then return reply1(0, 0, 0, -1, 0, true) end
      local now_s, us = store_now_split(t)
      if win % 1 ~= 0 then now_s, us = now_s + to_number(us), 0 end
      local idx = floor(now_s / (win * 1000000))
      local e = (idx * win + win) * 1000
      local key = KEYS[1]
      if idx % 2 == 1 then key = key .. ODD_WINDOW_SUFFIX end
      return count_apply1(key, cap, hits, e, now_s, us, CLOCK.pinned and charge or count_charge, read_count)
    end,
    -- The several-check pass (apply.lua), not a dry run: adds the hits in place (INCRBY) and returns the
    -- count before them; the pass gives them back with untake when the check or the request is refused.
    -- nil: not taken (no hits, more than the capacity, or not an integer): the pass reads and saves.
    take = function(c, now_us)
      local hits = c.hits
      if c.win <= 0 or hits <= 0 or hits > c.cap then return nil end
      local count, made, old, old_end = charge(c.key, hits, c.p_end)
      if count == nil then return nil end
      c.made = made
      if old then c.restore = { old, old_end } end
      return count
    end,
    untake = function(c)
      local r = c.restore
      if r then
        if r[2] > 0 then r_call('SET', c.key, r[1], 'PXAT', int_arg(r[2])) else r_call('SET', c.key, r[1]) end
      elseif c.made then
        r_call('DEL', c.key)
      else
        r_call('DECRBY', c.key, int_arg(c.hits))
      end
    end,
    -- Only while the window that was charged (c.ref = its end) is still the current one.
    refund = function(c, now_us)
      if c.win <= 0 or c.p_end ~= c.ref then return end
      local count = A.level(c, now_us)
      if count > 0 then A.save(c, max(count - c.hits, 0), now_us) end
    end,
  }
  return A
end
