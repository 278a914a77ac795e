-- Count the primes below 10,000,000 with a sieve (the algorithm of examples/sieve.basm),
-- written in Lua's fastest idiom: a pre-filled array part and numeric for loops.
local n = 10000000
local composite = {}
for i = 0, n - 1 do composite[i] = false end
local count = 0
for i = 2, n - 1 do
  if not composite[i] then
    count = count + 1
    for j = i * i, n - 1, i do composite[j] = true end
  end
end
print(count)
