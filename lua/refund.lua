-- Driver: gives back what an earlier apply consumed, when another store node refused the request.
-- Same arguments as apply (checks.lua), with each check's ref ms set from its apply result.
-- Mirrored by src/counters/engine.ts.
bind_globals()
local V = call_numbers(ARGV)
local now_us = store_now_us(V[1])
local checks, err = read_checks(KEYS, V, now_us, true)
if not checks then return redis.error_reply(err) end
for _, c in ipairs(checks) do
  if c.hits > 0 then c.a.refund(c, now_us) end
end
return #checks
