-- Spectral norm of the infinite matrix A (the Computer Language Benchmarks
-- Game's spectral-norm), the same algorithm as examples/spectralnorm.basm:
-- ten rounds of v = AtA u, u = AtA v, then sqrt(u.v / v.v) with 9 decimals.
-- The size is N below (the tests run a smaller one).
local N = 800

-- A(i, j) for 1-based i, j: 1 / ((i+j-2)(i+j-1)/2 + i)
local function A(i, j)
  local ij = i + j - 1
  return 1.0 / (ij * (ij - 1) * 0.5 + i)
end

-- y = A x
local function Av(x, y, n)
  for i = 1, n do
    local a = 0.0
    for j = 1, n do a = a + A(i, j) * x[j] end
    y[i] = a
  end
end

-- y = At x
local function Atv(x, y, n)
  for i = 1, n do
    local a = 0.0
    for j = 1, n do a = a + A(j, i) * x[j] end
    y[i] = a
  end
end

-- y = At A x, through t
local function AtAv(x, y, t, n)
  Av(x, t, n)
  Atv(t, y, n)
end

local u, v, t = {}, {}, {}
for i = 1, N do u[i] = 1.0; v[i] = 0.0; t[i] = 0.0 end
for _ = 1, 10 do
  AtAv(u, v, t, N)
  AtAv(v, u, t, N)
end
local vBv, vv = 0.0, 0.0
for i = 1, N do
  local ui, vi = u[i], v[i]
  vBv = vBv + ui * vi
  vv = vv + vi * vi
end
io.write(string.format("%.9f\n", math.sqrt(vBv / vv)))
