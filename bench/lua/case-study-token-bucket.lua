-- KEYS[1] = bucket key; ARGV = capacity, refill per second, ttl (whole seconds)
local t = redis.call('TIME')
local now = t[1] + t[2] / 1000000
local b = redis.call('HMGET', KEYS[1], 'tokens', 'last')
local capacity = tonumber(ARGV[1])
local tokens = tonumber(b[1]) or capacity
local last = tonumber(b[2]) or now
tokens = math.min(capacity, tokens + (now - last) * tonumber(ARGV[2]))
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'last', now)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return allowed
