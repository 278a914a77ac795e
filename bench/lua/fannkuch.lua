-- fannkuch-redux (the Computer Language Benchmarks Game), the same algorithm
-- as examples/fannkuch.basm: every permutation of 0..N-1 in the standard
-- order (count[] rotations), the flips of each (reverse the first k+1
-- elements while the first, k, is not 0), the checksum (flips added for even
-- permutation indices, subtracted for odd) and the maximum. Values are 0..N-1,
-- indices 1..N. The size is N below (the tests run a smaller one).
local N = 10

local function fannkuch(n)
  local perm, perm1, count = {}, {}, {}
  local maxflips, checksum, permcount, r = 0, 0, 0, n
  for i = 1, n do perm1[i] = i - 1; perm[i] = 0; count[i] = 0 end
  while true do
    while r ~= 1 do
      count[r] = r
      r = r - 1
    end
    for i = 1, n do perm[i] = perm1[i] end
    local flips = 0
    local k = perm[1]
    while k ~= 0 do
      local i, j = 1, k + 1
      while i < j do
        perm[i], perm[j] = perm[j], perm[i]
        i = i + 1
        j = j - 1
      end
      flips = flips + 1
      k = perm[1]
    end
    if flips > maxflips then maxflips = flips end
    if permcount % 2 == 0 then
      checksum = checksum + flips
    else
      checksum = checksum - flips
    end
    -- the next permutation: rotate the first r+1 elements until a count is left
    while true do
      if r == n then return checksum, maxflips end
      local perm0 = perm1[1]
      for i = 1, r do perm1[i] = perm1[i + 1] end
      perm1[r + 1] = perm0
      count[r + 1] = count[r + 1] - 1
      if count[r + 1] > 0 then break end
      r = r + 1
    end
    permcount = permcount + 1
  end
end

local checksum, maxflips = fannkuch(N)
io.write(string.format("%d\nPfannkuchen(%d) = %d\n", checksum, N, maxflips))
