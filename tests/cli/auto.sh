#!/bin/sh
# CLI tests for --backend=auto: examples/mlp.basm and examples/attention.basm
# write byte-identical --output files with --backend=auto, cpu and every GPU
# executor present (an executor that cannot start here is a SKIP line with
# its reason); auto's measurements are cached under $XDG_CACHE_HOME/bib and a
# corrupt cache entry is ignored and measured again.
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"
export XDG_CACHE_HOME="$T/cache"

$PY tools/make-npy.py "$T/in" --n 9 --d 40 --h 24 --o 6 >/dev/null || bad "make-npy.py"
MLP_IN="--input x=$T/in/x.npy --input W1=$T/in/W1.npy --input b1=$T/in/b1.npy --input W2=$T/in/W2.npy --input b2=$T/in/b2.npy"
$PY -c "
import numpy as np
r = np.random.default_rng(7)
for n, s in (('q', 5), ('k', 7), ('v', 7)):
    np.save('$T/in/%s.npy' % n, (r.standard_normal((s, 16))).astype('<f4'))
" || bad "attention inputs"
ATT_IN="--input q=$T/in/q.npy --input k=$T/in/k.npy --input v=$T/in/v.npy"

# run_on EXAMPLE BACKEND OUTNAME INPUTS: writes $T/EXAMPLE.BACKEND.npy; 0 ran, 2 skipped, 1 failed
run_on() {
    ex=$1 be=$2 out=$3
    shift 3
    # shellcheck disable=SC2068
    $BIB run "examples/$ex.basm" --backend="$be" $@ --output "$out=$T/$ex.$be.npy" 2>"$T/err"
    rc=$?
    if [ $rc -eq 69 ]; then
        echo "SKIP: $ex on $be: $(cat "$T/err")"
        return 2
    elif [ $rc -ne 0 ]; then
        bad "$ex on $be: exit $rc: $(cat "$T/err")"
        return 1
    fi
    return 0
}

for ex in mlp attention; do
    if [ $ex = mlp ]; then inputs=$MLP_IN out=y; else inputs=$ATT_IN out=o; fi
    # shellcheck disable=SC2086
    run_on $ex cpu $out $inputs || continue
    for be in auto vulkan cuda; do
        # shellcheck disable=SC2086
        run_on $ex $be $out $inputs
        case $? in
        0) if cmp -s "$T/$ex.cpu.npy" "$T/$ex.$be.npy"; then
               ok "$ex --output is byte-identical with --backend=cpu and --backend=$be"
           else
               bad "$ex outputs differ between cpu and $be"
           fi ;;
        esac
    done
done

# auto with no GPU executor that is faster than the CPU runs on the CPU and
# says so in traces; with one, the trace names it. Either way: a named executor.
$BIB run examples/mlp.basm --backend=auto $MLP_IN --trace 2>"$T/trace" >/dev/null
if grep -q "LINEAR_RELU.* on \(cpu\|cuda\|vulkan\)" "$T/trace"; then
    ok "auto's trace names the executor of each tensor opcode"
else
    bad "auto trace: $(grep LINEAR_RELU "$T/trace" | head -2)"
fi

# The cache: bib info measures and writes it; the next call reads it.
rm -rf "$T/cache"
$BIB info >"$T/info1" 2>&1 || bad "bib info (first): $(cat "$T/info1")"
n=$(ls "$T/cache/bib" 2>/dev/null | grep -c '^placement-.*\.txt$')
if [ "$n" -ge 1 ] && grep -q "measured now" "$T/info1"; then
    ok "auto's measurements are cached under \$XDG_CACHE_HOME/bib ($n entries)"
else
    bad "no cache entries after bib info (found $n): $(cat "$T/info1")"
fi
$BIB info >"$T/info2" 2>&1
if grep -q "cpu: .*\[cached\]" "$T/info2" && ! grep -q "measured now" "$T/info2"; then
    ok "a second bib info reads every measurement from the cache"
else
    bad "second bib info did not use the cache: $(grep -i 'cached\|measured' "$T/info2")"
fi
# Corrupt every entry: garbage, a truncated file, a changed number (the check fails).
i=0
for f in "$T"/cache/bib/placement-*.txt; do
    case $i in
    0) sed -i 's/^flops_per_s .*/flops_per_s 1e30/' "$f" ;;
    1) head -c 20 "$f" >"$f.t" && mv "$f.t" "$f" ;;
    *) printf 'not a cache file\n' >"$f" ;;
    esac
    i=$((i + 1))
done
$BIB info >"$T/info3" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "cpu: .*measured now" "$T/info3" && ! grep -q "1e+21 GFLOP/s\|1000000000000000000000" "$T/info3"; then
    ok "a corrupt cache entry is ignored and measured again"
else
    bad "corrupt cache: exit $rc: $(grep -i 'cpu:' "$T/info3")"
fi
if $BIB info >"$T/info4" 2>&1 && grep -q "cpu: .*\[cached\]" "$T/info4"; then
    ok "the re-measured entry is written back"
else
    bad "re-measured entry not cached: $(grep 'cpu:' "$T/info4")"
fi

finish
