-- A count that resets at end_ms: the decision shared by fixed windows and quotas (countDecide in
-- src/counters/count.ts). Returns allowed, remaining, reset seconds, retry-after ms (-1 never),
-- level after, end_ms.
local function count_decide(count, cap, hits, now_us, end_ms)
  local reset = m_ceil((end_ms * 1000 - now_us) / 1000000)
  if cap <= 0 then return 0, 0, reset, -1, count, end_ms end
  -- Comparisons, not math.max, on the allowed path: a call of a C function costs Redis about 200 instructions.
  local need = hits > 1 and hits or 1
  if count + need <= cap then
    local remaining = cap - count - hits
    return 1, remaining > 0 and remaining or 0, reset, -1, count + hits, end_ms
  end
  local retry = m_max(m_ceil((end_ms * 1000 - now_us) / 1000), 1)
  if hits > cap then retry = -1 end
  return 0, m_max(cap - count, 0), reset, retry, count, end_ms
end

-- A key INCRBY made whose PEXPIREAT was refused (e: its error; an ACL without it): a script is not a
-- transaction, so the key would stay without an end. It goes (or, DEL refused too, gets its end from SET),
-- and the call fails naming the command.
local function unmade(key, n, end_ms, e)
  if r_pcall('DEL', key) ~= 1 then r_pcall('SET', key, n, 'PXAT', int_arg(end_ms)) end
  error({ err = 'NOPERM pexpireat: ' .. tostring(e.err or e) })
end

-- Adds hits to a count's key in place (INCRBY): a key this call made (or one holding 0) gets end_ms as
-- its expiry, an existing key keeps its own. Returns the count before the hits and whether this call
-- made the key (a give-back deletes it); nil: the key holds no integer, or INCRBY was refused (the caller
-- reads and SETs with the end). Fixed windows and quotas.
local function count_charge(key, hits, end_ms)
  local n = r_pcall('INCRBY', key, hits == 1 and '1' or int_arg(hits))
  if type_of(n) ~= 'number' then return nil end
  if n == hits then
    local e = r_pcall('PEXPIREAT', key, int_arg(end_ms))
    if e ~= 1 then unmade(key, n, end_ms, e) end
    return 0, true
  end
  return n - hits, false
end

-- One count check of a request (apply1 of fixed windows and quotas): charges the hits to key in place
-- with charge (count_charge, or the fixed window's own with a pinned time), decides, and takes them back
-- when refused. A request refused whatever the count (no hits, more than the capacity), or a key holding
-- no integer, only reads (read(key, e)) and is saved whole when allowed. The count ends at e.
-- The time is now_s + us (clock.lua store_now_split; us may be TIME's text). When us is not 0, e must be
-- a whole second: then an allowed request's answer is the same at any µs of the second (its reset is
-- ceil((e - now) / 1 s), the same from the second's start), and only a refusal's retry-after (ms) reads us.
local function count_apply1(key, cap, hits, e, now_s, us, charge, read)
  local count -- nil: read only
  if hits > 0 and hits <= cap then count = charge(key, hits, e) end
  if count == nil then
    count = read(key, e)
    local allowed, remaining, reset, retry = count_decide(count, cap, hits, now_s + to_number(us), e)
    if allowed == 1 and hits > 0 then r_call('SET', key, count + hits, 'PXAT', int_arg(e)) end
    return reply1(allowed, remaining, reset, retry, e, true)
  end
  -- A key the charge made starts at 0 with hits <= cap: always allowed, so a refusal only takes back.
  local allowed, remaining, reset, retry = count_decide(count, cap, hits, now_s, e)
  if allowed ~= 1 then
    r_call('DECRBY', key, int_arg(hits))
    allowed, remaining, reset, retry = count_decide(count, cap, hits, now_s + to_number(us), e)
  end
  return reply1(allowed, remaining, reset, retry, e, true)
end
