-- Sum 0..99,999,999 with a while loop (the same algorithm as examples/loop.basm).
-- Printed with %d: LuaJIT's numbers are doubles (the sum is exact in one),
-- and its print would write 4.99999995e+15.
local s, i = 0, 0
while i < 100000000 do
  s = s + i
  i = i + 1
end
print(string.format("%d", s))
