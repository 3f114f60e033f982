-- The apply reply (layout in apply.lua, parsed by src/store/lua-library.ts parseApplyReply): its numbers
-- as one string of little-endian doubles (args.lua: pack_doubles). Composed before the algorithm files,
-- whose apply1 (a request of one check) answers with reply1.
-- One check's part of the apply reply (see apply.lua), appended to out from n + 1; returns the new n.
local function reply_check(out, n, reports_end, allowed, remaining, reset, retry, p_end)
  if allowed == 1 then
    out[n + 1], out[n + 2] = remaining, reset
    n = n + 2
  else
    out[n + 1], out[n + 2], out[n + 3] = -remaining - 1, reset, retry
    n = n + 3
  end
  if reports_end then
    n = n + 1
    out[n] = p_end
  end
  return n
end

-- The apply reply of a request of one check.
local function reply1(allowed, remaining, reset, retry, p_end, reports_end)
  if allowed == 1 then
    if reports_end then return s_pack('<ddd', remaining, reset, p_end) end
    return s_pack('<dd', remaining, reset)
  end
  if reports_end then return s_pack('<dddd', -remaining - 1, reset, retry, p_end) end
  return s_pack('<ddd', -remaining - 1, reset, retry)
end
