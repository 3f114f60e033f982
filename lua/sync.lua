-- Driver for approximate limits: adds one instance's unsynced hits per key (each check's hits) and
-- reports what every key then holds, with the store's time. A batch is applied once: the last KEY is
-- the instance's mark, the last ARGV the batch's sequence number, and a batch whose number the mark
-- already holds (a retry after a lost reply) only reports. Same check layout as apply (checks.lua).
-- Mirrored by src/approximate/ (the local view runs src/counters/engine.ts on what this returns).
local now_us = store_now_us(ARGV)
local checks, err = read_checks(KEYS, ARGV, now_us, false)
if not checks then return redis.error_reply(err) end
local mark = KEYS[#KEYS]
local seq = tonumber(ARGV[#ARGV])
local last = tonumber(redis.call('GET', mark))
if not last or seq > last then
  for _, c in ipairs(checks) do
    if c.hits > 0 then c.a.save(c, c.a.charge(c, c.a.level(c, now_us), c.hits), now_us) end
  end
  -- Kept an hour: a batch is retried at every sync interval until it is answered.
  redis.call('SET', mark, string.format('%d', seq), 'PX', 3600000)
end
local out = { now_us }
for _, c in ipairs(checks) do
  out[#out + 1] = redis.call('GET', c.key) or ''
  out[#out + 1] = redis.call('PEXPIRETIME', c.key)
end
return out
