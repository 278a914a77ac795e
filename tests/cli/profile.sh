#!/bin/sh
# CLI tests for --profile, --profile=json and trace completeness: the table
# has one row per opcode and executor with the documented columns (counts are
# exact, times are not compared), the JSON parses and agrees with the table,
# GPU rows carry the device clock's time (Vulkan timestamp queries: present,
# non-negative, at most the row's host time, the rates computed from it; a
# device without timestamps is host-timed and the footer says why; the
# validation layer stays silent; CUDA events through the mock driver, whose
# clock makes a launch exactly 1 ms), and the traces of examples/mlp.basm on
# --backend=cpu and --backend=vulkan differ only in the executor names (a
# SKIP line with the reason when there is no Vulkan device or mock driver).
# The trace names each tensor register's shape once (the JSON has no key
# twice), VK_* lines say they ran on vulkan, and the trace and the profile
# show the same instructions: a trapping one in both (marked trap in the
# trace), one that fuel stopped in neither.
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"

# row FILE OP EXECUTOR COUNT: the table in FILE has that row with that count
row() {
    awk -v op="$2" -v ex="$3" -v n="$4" '$1 == op && $2 == ex && $3 == n { found = 1 } END { exit !found }' "$1"
}

# ---- fib: scalar opcodes only ----
if "$BIB" run examples/fib.basm --profile >"$T/fib.out" 2>"$T/fib.prof" && [ "$(cat "$T/fib.out")" = 2178309 ]; then
    ok "fib runs with --profile and prints its result on stdout"
else
    bad "fib --profile: $(cat "$T/fib.prof")"
fi
if grep -q '^profile: 31721199 instructions, [0-9.]* s (host monotonic clock)$' "$T/fib.prof"; then
    ok "the profile's first line counts every instruction"
else
    bad "profile summary line: $(head -1 "$T/fib.prof")"
fi
if sed -n 2p "$T/fib.prof" | grep -q '^op  *executor  *count  *total_ms  *mean_us  *device_ms  *GFLOP/s  *GB/s$'; then
    ok "the table has the columns op executor count total_ms mean_us device_ms GFLOP/s GB/s"
else
    bad "table header: $(sed -n 2p "$T/fib.prof")"
fi
rows_ok=1
for r in "CALL vm 7049155" "RET vm 7049155" "JLTI vm 7049155" "ADDI vm 7049154" "LDI vm 1" \
    "ADD vm 3524577" "HOSTCALL vm 1" "HALT vm 1"; do
    # shellcheck disable=SC2086
    row "$T/fib.prof" $r || { rows_ok=0; bad "fib row '$r' missing"; }
done
[ "$(wc -l <"$T/fib.prof")" -eq 10 ] || { rows_ok=0; bad "fib table has $(wc -l <"$T/fib.prof") lines, want 10"; }
[ $rows_ok -eq 1 ] && ok "fib: one row per opcode with exact counts, executor vm"
if awk 'NR > 2 && ($6 != "-" || $7 != "-" || $8 != "-") { bad = 1 } NR > 2 && $4 !~ /^[0-9]+\.[0-9]+$/ { bad = 1 } END { exit bad }' "$T/fib.prof"; then
    ok "scalar rows have times and no device_ms, GFLOP/s or GB/s, and no clock footer"
else
    bad "scalar row columns: $(cat "$T/fib.prof")"
fi

# ---- JSON ----
"$BIB" run examples/fib.basm --profile=json >/dev/null 2>"$T/fib.json"
if $PY -c "
import json, sys
p = json.loads(open('$T/fib.json').read())
rows = {(r['op'], r['executor']): r for r in p['rows']}
assert p['instructions'] == 31721199, p['instructions']
assert sum(r['count'] for r in p['rows']) == p['instructions']
assert rows[('CALL', 'vm')]['count'] == 7049155
assert set(p) == {'instructions', 'seconds', 'rows', 'clocks'} and p['clocks'] == [], p.keys()
for r in p['rows']:
    assert set(r) == {'op', 'executor', 'count', 'seconds', 'mean_seconds', 'flops', 'bytes', 'device_seconds', 'gflops', 'gbps'}, r
    assert r['seconds'] >= 0 and r['gflops'] is None and r['gbps'] is None and r['device_seconds'] is None
" 2>"$T/err"; then ok "--profile=json parses and agrees with the counts"; else bad "--profile=json: $(cat "$T/err")"; fi
expect_usage() {
    "$BIB" run examples/fib.basm --profile=xml >/dev/null 2>"$T/err"
    rc=$?
    if [ $rc -eq 64 ] && grep -q "profile takes 'text' or 'json'" "$T/err"; then ok "--profile=xml is a usage error"; else
        bad "--profile=xml: exit $rc: $(cat "$T/err")"
    fi
}
expect_usage

# ---- mlp: tensor opcodes, flops and bytes ----
$PY tools/make-npy.py "$T/in" --n 64 --d 128 --h 256 --o 10 >/dev/null || bad "make-npy.py"
MLP_IN="--input x=$T/in/x.npy --input W1=$T/in/W1.npy --input b1=$T/in/b1.npy --input W2=$T/in/W2.npy --input b2=$T/in/b2.npy"
# shellcheck disable=SC2086
"$BIB" run examples/mlp.basm --backend=cpu $MLP_IN --profile >/dev/null 2>"$T/mlp.prof"
rows_ok=1
for r in "LINEAR_RELU cpu 1" "LINEAR cpu 1" "SOFTMAX cpu 1" "FREE host 2" "LDI vm 1" "HALT vm 1"; do
    # shellcheck disable=SC2086
    row "$T/mlp.prof" $r || { rows_ok=0; bad "mlp row '$r' missing: $(cat "$T/mlp.prof")"; }
done
[ $rows_ok -eq 1 ] && ok "mlp on cpu: rows per opcode and executor"
if awk '$1 ~ /^LINEAR/ && !($7 ~ /^[0-9.]+$/ && $8 ~ /^[0-9.]+$/) { bad = 1 }
        $1 == "SOFTMAX" && !($7 == "-" && $8 ~ /^[0-9.]+$/) { bad = 1 }
        $1 == "FREE" && !($7 == "-" && $8 == "-") { bad = 1 }
        NR > 2 && $6 != "-" { bad = 1 } END { exit bad }' "$T/mlp.prof"; then
    ok "LINEAR* rows show GFLOP/s, SOFTMAX GB/s only, FREE neither; cpu rows have no device_ms"
else
    bad "mlp rate columns: $(cat "$T/mlp.prof")"
fi
# shellcheck disable=SC2086
"$BIB" run examples/mlp.basm --backend=cpu $MLP_IN --profile=json >/dev/null 2>"$T/mlp.json"
if $PY -c "
import json
p = json.loads(open('$T/mlp.json').read())
rows = {(r['op'], r['executor']): r for r in p['rows']}
lr = rows[('LINEAR_RELU', 'cpu')]
assert lr['flops'] == 2 * 64 * 256 * 128, lr          # 2*M*N*K
assert lr['bytes'] == 4 * (64*256 + 64*128 + 128*256 + 256), lr
assert rows[('LINEAR', 'cpu')]['flops'] == 2 * 64 * 10 * 256
assert rows[('SOFTMAX', 'cpu')]['flops'] == 0 and rows[('SOFTMAX', 'cpu')]['bytes'] == 4 * 2 * 64 * 10
" 2>"$T/err"; then ok "mlp JSON: flops 2*M*N*K and bytes read+written"; else bad "mlp JSON: $(cat "$T/err")"; fi

# shellcheck disable=SC2086
"$BIB" run examples/mlp.basm --backend=vulkan $MLP_IN --profile --validation >/dev/null 2>"$T/mlp.vk.prof"
rc=$?
if [ $rc -eq 69 ]; then
    echo "SKIP: mlp --profile on vulkan: $(cat "$T/mlp.vk.prof")"
else
    if row "$T/mlp.vk.prof" LINEAR_RELU vulkan 1 && row "$T/mlp.vk.prof" upload vulkan 5 &&
        awk '$1 == "upload" && $6 == "-" && $8 ~ /^[0-9.]+$/ { f = 1 } END { exit !f }' "$T/mlp.vk.prof"; then
        ok "mlp on vulkan: kernel rows on vulkan, uploads as their own row with GB/s and no device_ms"
    else
        bad "mlp --profile on vulkan (exit $rc): $(cat "$T/mlp.vk.prof")"
    fi
    # Each kernel row: a device time, 0 <= device_ms <= total_ms (host).
    if [ $rc -eq 0 ] && awk '$2 == "vulkan" && $1 != "upload" && $1 != "download" {
            n++; if ($6 !~ /^[0-9]+\.[0-9]+$/ || $6 + 0 < 0 || $6 + 0 > $4 + 0) bad = 1 }
            END { exit bad || n != 3 }' "$T/mlp.vk.prof"; then
        ok "vulkan kernel rows have device_ms from timestamps, between 0 and the row's host time"
    else
        bad "vulkan device_ms column (exit $rc): $(cat "$T/mlp.vk.prof")"
    fi
    if [ "$(tail -1 "$T/mlp.vk.prof")" = "vulkan: device clock (timestamp queries): device_ms is the time its kernels took on the device; GFLOP/s and GB/s of vulkan rows use it" ]; then
        ok "the footer names the vulkan device clock"
    else
        bad "vulkan clock footer: $(tail -1 "$T/mlp.vk.prof")"
    fi
    if grep -q "validation" "$T/mlp.vk.prof"; then
        bad "the validation layer spoke while profiling: $(grep validation "$T/mlp.vk.prof")"
    else
        ok "the validation layer stays silent with timestamps on"
    fi
    # shellcheck disable=SC2086
    "$BIB" run examples/mlp.basm --backend=vulkan $MLP_IN --profile=json >/dev/null 2>"$T/mlp.vk.json"
    if $PY -c "
import json
p = json.loads(open('$T/mlp.vk.json').read())
assert p['clocks'] == [{'executor': 'vulkan', 'clock': 'device'}], p['clocks']
rows = {(r['op'], r['executor']): r for r in p['rows']}
for op in ('LINEAR_RELU', 'LINEAR', 'SOFTMAX'):
    r = rows[(op, 'vulkan')]
    d = r['device_seconds']
    assert d is not None and 0 <= d <= r['seconds'], r
    if r['flops']:   # the rates use the device time
        assert abs(r['gflops'] - r['flops'] / d * 1e-9) <= 1e-5 * r['gflops'], r
    assert abs(r['gbps'] - r['bytes'] / d * 1e-9) <= 1e-5 * r['gbps'], r
assert rows[('upload', 'vulkan')]['device_seconds'] is None
" 2>"$T/err"; then ok "vulkan JSON: device_seconds within the host time, rates from it, clocks names it"; else bad "vulkan JSON: $(cat "$T/err")"; fi
    # shellcheck disable=SC2086
    BIB_VK_NO_TIMESTAMPS=1 "$BIB" run examples/mlp.basm --backend=vulkan $MLP_IN --profile >/dev/null 2>"$T/nots.prof"
    if awk '$2 == "vulkan" && $6 != "-" { bad = 1 } END { exit bad }' "$T/nots.prof" &&
        tail -1 "$T/nots.prof" | grep -q "^vulkan: no device clock (vulkan: queue family [0-9]* of '.*' has no timestamps (timestampValidBits 0)): vulkan rows are host-timed$"; then
        ok "without timestamps vulkan rows are host-timed and the footer says why"
    else
        bad "no-timestamp fallback: $(cat "$T/nots.prof")"
    fi
    # shellcheck disable=SC2086
    BIB_VK_NO_TIMESTAMPS=1 "$BIB" run examples/mlp.basm --backend=vulkan $MLP_IN --profile=json >/dev/null 2>"$T/nots.json"
    if $PY -c "
import json
p = json.loads(open('$T/nots.json').read())
(c,) = p['clocks']
assert c['executor'] == 'vulkan' and c['clock'] == 'host' and 'timestampValidBits 0' in c['why'], c
assert all(r['device_seconds'] is None for r in p['rows'])
" 2>"$T/err"; then ok "without timestamps the JSON says clock host and why"; else bad "no-timestamp JSON: $(cat "$T/err")"; fi
fi

# ---- CUDA events, through the mock driver ----
MOCK="$BUILD/tests/libcuda_mock.so"
case $MOCK in /*) ;; *) MOCK="$(pwd)/$MOCK" ;; esac
if [ ! -f "$MOCK" ]; then
    echo "SKIP: CUDA device clock on the mock driver: no $MOCK (built with build/tests/test_cuda when nvcc exists)"
else
    BIB_CUDA_LIBRARY="$MOCK" "$BIB" run examples/gpu_custom.basm --profile >/dev/null 2>"$T/cu.prof"
    if row "$T/cu.prof" GPU_LAUNCH cuda 1 &&
        awk '$1 == "GPU_LAUNCH" && $2 == "cuda" && $6 == "1.000" { f = 1 } END { exit !f }' "$T/cu.prof" &&
        [ "$(tail -1 "$T/cu.prof")" = "cuda: device clock (CUDA events): device_ms is the time its kernels took on the device; GFLOP/s and GB/s of cuda rows use it" ]; then
        ok "cuda on the mock driver: GPU_LAUNCH's device_ms is the events' 1 ms, the footer names CUDA events"
    else
        bad "cuda device clock on the mock: $(cat "$T/cu.prof")"
    fi
fi

# ---- traces: cpu and vulkan differ only in executor names ----
# shellcheck disable=SC2086
"$BIB" run examples/mlp.basm --backend=cpu $MLP_IN --trace 2>"$T/trace.cpu" >/dev/null
# shellcheck disable=SC2086
"$BIB" run examples/mlp.basm --backend=vulkan $MLP_IN --trace 2>"$T/trace.vk" >/dev/null
rc=$?
if grep -q "LINEAR_RELU.* on cpu hash=" "$T/trace.cpu"; then ok "the cpu trace names the executor and the hash"; else
    bad "cpu trace: $(cat "$T/trace.cpu")"
fi
if [ $rc -eq 69 ]; then
    echo "SKIP: trace on vulkan: $(cat "$T/trace.vk")"
else
    sed 's/ on cpu / on EXECUTOR /; s/ on vulkan / on EXECUTOR /' "$T/trace.cpu" >"$T/a"
    sed 's/ on cpu / on EXECUTOR /; s/ on vulkan / on EXECUTOR /' "$T/trace.vk" >"$T/b"
    if [ $rc -eq 0 ] && grep -q " on vulkan " "$T/trace.vk" && diff "$T/a" "$T/b" >"$T/d"; then
        ok "mlp traces on cpu and vulkan differ only in the executor names"
    else
        bad "mlp traces differ beyond executor names (exit $rc): $(head -20 "$T/d")"
    fi
    # shellcheck disable=SC2086
    "$BIB" run examples/mlp.basm --backend=cpu $MLP_IN --trace=json 2>"$T/tj.cpu" >/dev/null
    # shellcheck disable=SC2086
    "$BIB" run examples/mlp.basm --backend=vulkan $MLP_IN --trace=json 2>"$T/tj.vk" >/dev/null
    sed 's/"executor":"[a-z]*"/"executor":"E"/' "$T/tj.cpu" >"$T/a"
    sed 's/"executor":"[a-z]*"/"executor":"E"/' "$T/tj.vk" >"$T/b"
    if diff "$T/a" "$T/b" >"$T/d" && $PY -c "
import json
for line in open('$T/tj.vk'): json.loads(line)
" 2>>"$T/d"; then
        ok "JSON traces on cpu and vulkan differ only in executor and parse"
    else
        bad "JSON traces: $(head -20 "$T/d")"
    fi
fi


# ---- a tensor register named twice is one shape ----
cat >"$T/dup.basm" <<'EOF2'
.tensor a t0 f32[2] = 1, 2
.output y t1 f32[2]
.func main regs=1
 TMUL t1, t0, t0
 LDI r0, 0
 HALT r0
.end
EOF2
"$BIB" run --trace=json "$T/dup.basm" 2>"$T/dj" >/dev/null
if $PY -c "
import json, sys
def no_dups(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), 'duplicate keys: %s' % keys
    return dict(pairs)
lines = [json.loads(l, object_pairs_hook=no_dups) for l in open('$T/dj')]
t = [l for l in lines if l['op'] == 'TMUL'][0]
assert t['shapes'] == {'t1': 'f32[2]', 't0': 'f32[2]'}, t['shapes']
" 2>"$T/d"; then
    ok "the JSON trace names each tensor register's shape once (TMUL t1, t0, t0)"
else
    bad "JSON trace of TMUL t1, t0, t0: $(cat "$T/d") $(cat "$T/dj")"
fi
"$BIB" run --trace "$T/dup.basm" 2>"$T/dt" >/dev/null
if grep -q "TMUL t1, t0, t0 *t1=f32\[2\] t0=f32\[2\] on cpu hash=" "$T/dt"; then
    ok "the text trace names each tensor register's shape once"
else
    bad "text trace of TMUL t1, t0, t0: $(cat "$T/dt")"
fi

# ---- a trap: the trace shows the trapping instruction the profile counts ----
printf '.func main regs=3\n LDI r0, 1\n DIV r1, r0, r2\n HALT r0\n.end\n' >"$T/div.basm"
"$BIB" run --trace --profile "$T/div.basm" >/dev/null 2>"$T/dv"
rc=$?
if [ $rc -eq 70 ] && grep -q '^\[      1\] DIV r1, r0, r2 *trap$' "$T/dv" &&
    grep -q "^profile: 2 instructions" "$T/dv" && grep -q "^DIV  *vm  *1 " "$T/dv"; then
    ok "an instruction that traps is in the trace (marked trap) and the profile"
else
    bad "trace and profile of a trap (exit $rc): $(cat "$T/dv")"
fi
"$BIB" run --trace=json --profile=json "$T/div.basm" >/dev/null 2>"$T/dvj"
if $PY -c "
import json
lines = [json.loads(l) for l in open('$T/dvj') if l.startswith('{')]
trace, prof = lines[:-1], lines[-1]
assert [(l['op'], l.get('trap', False)) for l in trace] == [('LDI', False), ('DIV', True)], trace
assert trace[1]['writes'] == {}, trace[1]
assert prof['instructions'] == len(trace), (prof, trace)
" 2>"$T/d"; then
    ok "the JSON trace marks the trap (\"trap\":true) and has the profile's instructions"
else
    bad "JSON trace of a trap: $(cat "$T/d") $(cat "$T/dvj")"
fi
# Fuel stops an instruction before it runs: in neither, as in the stats.
"$BIB" run --fuel 1 --trace --profile "$T/div.basm" >/dev/null 2>"$T/fu"
rc=$?
if [ $rc -eq 70 ] && [ "$(grep -c '^\[' "$T/fu")" = 1 ] && grep -q "^profile: 1 instructions" "$T/fu" &&
    ! grep -q "^DIV " "$T/fu"; then
    ok "fuel exhaustion: the instruction it stopped is in neither the trace nor the profile"
else
    bad "trace and profile under --fuel 1 (exit $rc): $(cat "$T/fu")"
fi
# A tensor opcode whose work does not fit the fuel left gives its unit back.
cat >"$T/big.basm" <<'EOF2'
.func main regs=2
 LDI r0, 256
 LDI r1, 256
 ALLOC t0, f32, r0, 2
 TADD t1, t0, t0
 HALT r0
.end
EOF2
"$BIB" run --fuel 100 --trace --profile "$T/big.basm" >/dev/null 2>"$T/fb"
rc=$?
if [ $rc -eq 70 ] && grep -q "fuel exhausted (TADD" "$T/fb" && [ "$(grep -c '^\[' "$T/fb")" = 3 ] &&
    grep -q "^profile: 3 instructions" "$T/fb" && ! grep -q "^TADD " "$T/fb"; then
    ok "fuel exhaustion at a tensor opcode's work: in neither the trace nor the profile"
else
    bad "trace and profile of a tensor fuel trap (exit $rc): $(cat "$T/fb")"
fi

# ---- device programs say where they ran ----
"$BIB" run examples/vk_custom.basm --backend vulkan --trace >/dev/null 2>"$T/vk"
rc=$?
if [ $rc -eq 69 ] || [ $rc -eq 70 ] && ! grep -q "VK_COMPUTE" "$T/vk"; then
    echo "SKIP: vk_custom on vulkan: $(tail -1 "$T/vk")"
elif grep -q "VK_COMPUTE saxpy.* on vulkan$" "$T/vk" && grep -q "VK_SYNC *on vulkan$" "$T/vk"; then
    "$BIB" run examples/vk_custom.basm --backend vulkan --trace=json >/dev/null 2>"$T/vkj"
    if $PY -c "
import json
ops = [json.loads(l) for l in open('$T/vkj')]
vk = [o for o in ops if o['op'].startswith('VK_')]
assert vk and all(o['executor'] == 'vulkan' for o in vk), vk
" 2>"$T/d"; then
        ok "VK_* trace lines say they ran on vulkan, in text and JSON"
    else
        bad "JSON trace of VK_*: $(cat "$T/d")"
    fi
else
    bad "trace of VK_* (exit $rc): $(grep VK_ "$T/vk")"
fi

finish
