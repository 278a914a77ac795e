#!/bin/sh
# Elementwise math on the CPU executor, one thread, against numpy's float32
# ufuncs measured in the same run: f32[4M] in [-100, 100] (for LOG, SQRT,
# RSQRT and RECIP, in (0, 100]; EXP also on a masked row, every other value
# -Inf as a causal mask gives softmax, the rest in [-10, 0]). bib: a module
# that runs the op R times into the same output, its mean time per op from
# `bib bench`'s profile (the first allocates the output), the least of
# three runs; numpy: the best of R calls. numpy has no
# rsqrt: 1 / np.sqrt, two passes. Its float32 sin and cos differ from
# machine to machine; BIB's give the same bits on every executor.
# Usage: BIB=build/bib sh bench/unary.bench.sh [N] [repeats]
set -eu
BIB=${BIB:-${BUILD:-build}/bib}
N=${1:-4194304}
R=${2:-10}
PY=/usr/bin/python3
T=$(mktemp -d "${TMPDIR:-/tmp}/bib-unary.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
timeout 120 $PY -c "
import numpy as np
g = np.random.default_rng(1)
np.save('$T/s.npy', g.uniform(-100, 100, $N).astype(np.float32))
np.save('$T/p.npy', g.uniform(0, 100, $N).astype(np.float32) + np.float32(1e-3))
m = g.uniform(-10, 0, $N).astype(np.float32); m[1::2] = -np.inf
np.save('$T/m.npy', m)"
echo "Elementwise math, f32[$N], 1 thread, ms per op (bib: mean of $R, best of 3 runs; numpy: best of $R):"
printf '  %-6s %9s %9s %9s\n' op bib numpy bib/numpy
for spec in SIN:sin:s COS:cos:s EXP:exp:s EXP:exp:m LOG:log:p SQRT:sqrt:p RSQRT:rsqrt:p RECIP:reciprocal:p \
    TABS:abs:s TNEG:negative:s FLOOR:floor:s CEIL:ceil:s ROUND:rint:s; do
    op=${spec%%:*}
    rest=${spec#*:}
    fn=${rest%%:*}
    in=${rest#*:}
    {
        printf '.input x t0 f32[?]\n.output y t1\n.func main regs=1\n'
        for _ in $(seq "$R"); do printf '    %s t1, t0\n' "$op"; done
        printf '    HALT r0\n.end\n'
    } >"$T/$op.basm"
    b=$(for _ in 1 2 3; do
        timeout 300 "$BIB" bench "$T/$op.basm" --input "x=$T/$in.npy" --threads 1 \
            --repetitions 1 --format json
        echo
    done | $PY -c "
import json, sys
runs = [json.loads(l) for l in sys.stdin if l.strip()]
print(min(p['total_ms'] / p['count'] for r in runs for p in r['profile'] if p['op'] == '$op'))")
    n=$(timeout 300 $PY -c "
import time, numpy as np
x = np.load('$T/$in.npy')
f = (lambda v: np.reciprocal(np.sqrt(v))) if '$fn' == 'rsqrt' else getattr(np, '$fn')
best = 1e9
for _ in range($R):
    t = time.perf_counter(); f(x); best = min(best, time.perf_counter() - t)
print(best * 1e3)")
    [ "$in" = m ] && op="$op-m"
    awk -v o="$op" -v b="$b" -v n="$n" 'BEGIN { printf "  %-6s %9.2f %9.2f %8.2fx\n", o, b, n, b / n }'
done
