-- Sum 0..99,999,999 with a while loop (the same algorithm as examples/loop.basm).
local s, i = 0, 0
while i < 100000000 do
  s = s + i
  i = i + 1
end
print(s)
