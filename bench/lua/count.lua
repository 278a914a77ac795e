-- count.lua PROGRAM.lua: runs PROGRAM.lua and writes to stderr the number of
-- Lua VM instructions it executed, "lua-instructions: N", counted by a count
-- hook called every 1000 instructions (so N is a multiple of 1000, at most
-- 999 short). The program's own output is unchanged.
local every = 1000
local calls = 0
local program = assert(loadfile(assert(arg[1], "usage: count.lua PROGRAM.lua")))
debug.sethook(function() calls = calls + 1 end, "", every)
program()
debug.sethook()
io.stderr:write(string.format("lua-instructions: %d\n", calls * every))
