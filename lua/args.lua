-- The numbers of a call (src/store/lua-library.ts: scriptArgs): ARGV[1] is one string of little-endian
-- doubles, read by struct.unpack in C. A decimal argument costs Redis a strtod (about 1,600 instructions,
-- several times that for a 17-digit rate) and a string of its own to receive: more than the rest of a
-- one-check call's arithmetic. The doubles are the caller's numbers exactly.
local ARG_CHUNK = 200 -- values per unpack or pack: each is a C stack slot (Lua's limit is 8,000)
local ARG_FORMATS = {} -- '<' .. n 'd's by n, at most ARG_CHUNK of them
local function doubles_format(n)
  local f = ARG_FORMATS[n]
  if not f then
    f = '<' .. s_rep('d', n)
    ARG_FORMATS[n] = f
  end
  return f
end
local function call_numbers(ARGV)
  local s = ARGV[1]
  local n = #s / 8
  if n <= ARG_CHUNK then
    local v = { s_unpack(doubles_format(n), s) }
    v[n + 1] = nil -- unpack's last value is the position after the numbers
    return v
  end
  local v, pos = {}, 1
  for first = 1, n, ARG_CHUNK do
    local m = m_min(ARG_CHUNK, n - first + 1)
    local part = { s_unpack(doubles_format(m), s, pos) }
    for j = 1, m do v[first + j - 1] = part[j] end
    pos = part[m + 1]
  end
  return v
end

-- out[1..n] as one string of little-endian doubles: the apply reply (reply.lua). Redis turns a Lua table
-- into a reply for about 2,000 instructions and more per value; one string costs a third of that.
local function pack_doubles(out, n)
  if n <= ARG_CHUNK then return s_pack(doubles_format(n), t_unpack(out, 1, n)) end
  local parts = {}
  for first = 1, n, ARG_CHUNK do
    local last = m_min(first + ARG_CHUNK - 1, n)
    parts[#parts + 1] = s_pack(doubles_format(last - first + 1), t_unpack(out, first, last))
  end
  return t_concat(parts)
end

-- An integer as a command's argument. A Lua number there is printed with %.17g (glibc's exact float
-- printing: about 3,500 instructions for a time in ms); %d prints it for about 2,000, and 1, the usual
-- cost, is a constant. The integers sent are few and repeat (a window's end is the same for every call in
-- that window, TTLs and costs come from the rules), so each is printed once and kept, a bounded number.
local INT_ARGS, INT_ARGS_KEPT = {}, 0
local INT_ARGS_MAX = 1024
local function int_arg(x)
  if x == 1 then return '1' end
  local s = INT_ARGS[x]
  if s then return s end
  s = s_format('%d', x)
  if x ~= x then return s end -- NaN cannot index a table
  if INT_ARGS_KEPT >= INT_ARGS_MAX then INT_ARGS, INT_ARGS_KEPT = {}, 0 end
  INT_ARGS[x], INT_ARGS_KEPT = s, INT_ARGS_KEPT + 1
  return s
end
