-- The globals a call reads, as upvalues (bind_globals, first thing in every driver). In a function library
-- a global read is a lookup in the library's environment and then in the globals: about 250 instructions,
-- an upvalue a few. At FUNCTION LOAD only `redis` exists, so they are bound on the library's first call
-- (as scripts, on every call).
local r_call, r_pcall, to_number, type_of
local m_ceil, m_floor, m_max, m_min
local s_pack, s_unpack, s_format, s_rep, t_unpack, t_concat
local function bind_globals()
  if r_call then return end
  r_call, r_pcall, to_number, type_of = redis.call, redis.pcall, tonumber, type
  m_ceil, m_floor, m_max, m_min = math.ceil, math.floor, math.max, math.min
  s_pack, s_unpack, s_format, s_rep, t_unpack, t_concat = struct.pack, struct.unpack, string.format, string.rep, unpack, table.concat
end
