#!/bin/sh
# CLI tests for tensors: --input/--output .npy files, --backend, and the
# error messages for wrong, missing or malformed inputs. examples/mlp.basm
# must write byte-identical outputs on the CPU and Vulkan executors (a SKIP
# line with the reason when there is no Vulkan device).
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"

# expect_fail NAME CODE PATTERN CMD...: exits with CODE and stderr matches PATTERN
expect_fail() {
    name=$1 code=$2 pattern=$3
    shift 3
    "$@" >/dev/null 2>"$T/err"
    rc=$?
    if [ $rc -eq "$code" ] && grep -q -- "$pattern" "$T/err"; then ok "$name"; else
        bad "$name: exit $rc (want $code), stderr: $(cat "$T/err")"
    fi
}

$PY tools/make-npy.py "$T/in" --n 7 --d 33 --h 20 --o 5 >/dev/null || bad "make-npy.py"
MLP_IN="--input x=$T/in/x.npy --input W1=$T/in/W1.npy --input b1=$T/in/b1.npy --input W2=$T/in/W2.npy --input=b2=$T/in/b2.npy"

# shellcheck disable=SC2086
if $BIB run examples/mlp.basm --backend=cpu $MLP_IN --output "y=$T/y.cpu.npy" 2>"$T/err"; then
    ok "mlp runs on the cpu executor"
else
    bad "mlp on cpu: $(cat "$T/err")"
fi
if $PY -c "
import numpy as np, sys
y = np.load('$T/y.cpu.npy')
assert y.dtype == np.float32 and y.shape == (7, 5), (y.dtype, y.shape)
assert abs(y.sum(axis=1) - 1).max() < 1e-5
" 2>"$T/err"; then ok "mlp output is f32[7,5] with rows summing to 1"; else bad "mlp output: $(cat "$T/err")"; fi

# shellcheck disable=SC2086
$BIB run examples/mlp.basm --backend=vulkan $MLP_IN --output "y=$T/y.vk.npy" 2>"$T/err"
rc=$?
if [ $rc -eq 69 ]; then
    echo "SKIP: mlp on vulkan: $(cat "$T/err")"
elif [ $rc -ne 0 ]; then
    bad "mlp on vulkan: exit $rc: $(cat "$T/err")"
elif cmp -s "$T/y.cpu.npy" "$T/y.vk.npy"; then
    ok "mlp --output is byte-identical with --backend=cpu and --backend=vulkan"
else
    bad "mlp outputs differ between cpu and vulkan"
fi

# Inputs that do not fit the declarations.
$PY -c "
import numpy as np
np.save('$T/x_wide.npy', np.zeros((7, 34), '<f4'))
np.save('$T/x_i32.npy', np.zeros((7, 33), '<i4'))
np.save('$T/x_f64.npy', np.zeros((7, 33), '<f8'))
np.save('$T/x_fortran.npy', np.asfortranarray(np.zeros((7, 33), '<f4')))
np.save('$T/x_rank3.npy', np.zeros((7, 33, 1), '<f4'))
"
printf 'not a numpy file' >"$T/garbage.npy"
head -c 200 "$T/in/x.npy" >"$T/truncated.npy"
IN_NO_X="--input W1=$T/in/W1.npy --input b1=$T/in/b1.npy --input W2=$T/in/W2.npy --input b2=$T/in/b2.npy"
# shellcheck disable=SC2086
expect_fail "a wrong shape names the tensor and both shapes" 64 \
    "input 'x': expected f32\[n,d\] where d = 33, given f32\[7,34\]" \
    $BIB run examples/mlp.basm $IN_NO_X --input "x=$T/x_wide.npy"
# shellcheck disable=SC2086
expect_fail "a wrong dtype names the tensor and both types" 64 "input 'x': expected f32\[n,d\].*given i32\[7,33\]" \
    $BIB run examples/mlp.basm $IN_NO_X --input "x=$T/x_i32.npy"
# shellcheck disable=SC2086
expect_fail "a wrong rank is refused" 64 "given f32\[7,33,1\]" \
    $BIB run examples/mlp.basm $IN_NO_X --input "x=$T/x_rank3.npy"
# shellcheck disable=SC2086
expect_fail "a missing input is named with its type and the option to give it" 64 \
    "mlp.basm: input 'x' (f32\[n,d\]) was not given: add --input x=PATH.npy" \
    $BIB run examples/mlp.basm $IN_NO_X
$BIB run examples/mlp.basm 2>"$T/err" >/dev/null
if [ "$(grep -c "was not given" "$T/err")" -eq 5 ] && grep -q "input 'b1' (f32\[h\])" "$T/err"; then
    ok "every missing input is named at once"
else bad "missing inputs: $(cat "$T/err")"; fi
# shellcheck disable=SC2086
expect_fail "an unknown input name lists the inputs" 64 "no input 'z' (its inputs: x, W1, b1, W2, b2)" \
    $BIB run examples/mlp.basm $MLP_IN --input "z=$T/in/x.npy"
# shellcheck disable=SC2086
expect_fail "an unknown output name lists the outputs" 64 "no output 'q' (its outputs: y)" \
    $BIB run examples/mlp.basm $MLP_IN --output "q=$T/q.npy"
printf '.output y t0 f32[2]\n.func main regs=1\n    LDI r0, 7\n    HOSTCALL r0, print_i64, r0, 1\n    ALLOC y, f32, r0, 0\n    HALT r0\n.end\n' >"$T/prints.basm"
out=$($BIB run "$T/prints.basm" --output "q=$T/q.npy" 2>"$T/err")
rc=$?
if [ $rc -eq 64 ] && [ -z "$out" ] && grep -q "has no output 'q' (its outputs: y)" "$T/err"; then
    ok "an unknown output name is refused before the program runs"
else bad "unknown output: exit $rc, stdout '$out', stderr $(cat "$T/err")"; fi
# shellcheck disable=SC2086
expect_fail "a float64 .npy names the file and the dtype" 65 "x_f64.npy: not a usable .npy file: dtype '<f8' is not supported" \
    $BIB run examples/mlp.basm $IN_NO_X --input "x=$T/x_f64.npy"
# shellcheck disable=SC2086
expect_fail "a Fortran-order .npy is refused" 65 "x_fortran.npy: not a usable .npy file: fortran_order True" \
    $BIB run examples/mlp.basm $IN_NO_X --input "x=$T/x_fortran.npy"
# shellcheck disable=SC2086
expect_fail "a file that is not .npy is refused" 65 "garbage.npy: not a usable .npy file" \
    $BIB run examples/mlp.basm $IN_NO_X --input "x=$T/garbage.npy"
# shellcheck disable=SC2086
expect_fail "a truncated .npy is refused" 65 "truncated.npy: not a usable .npy file: the data is truncated" \
    $BIB run examples/mlp.basm $IN_NO_X --input "x=$T/truncated.npy"
# shellcheck disable=SC2086
expect_fail "a missing .npy file is unreadable input" 66 "cannot open '$T/nope.npy'" \
    $BIB run examples/mlp.basm $IN_NO_X --input "x=$T/nope.npy"
expect_fail "--input needs NAME=PATH" 64 "takes NAME=PATH.npy" $BIB run examples/mlp.basm --input x
expect_fail "an unknown backend is a usage error" 64 "unknown executor 'tpu'" \
    $BIB run examples/matmul.basm --backend=tpu
if $BIB run examples/matmul.basm --backend=cuda --input "A=$T/in/x.npy" --input "B=$T/in/W1.npy" >/dev/null 2>&1; then
    echo "SKIP: the CUDA executor runs here, so its absence cannot be tested"
else
    expect_fail "an absent CUDA executor is exit 69 with the reason" 69 "executor 'cuda' is not available: ." \
        $BIB run examples/matmul.basm --backend=cuda --input "A=$T/in/x.npy" --input "B=$T/in/W1.npy"
fi
expect_fail "a shape mismatch between inputs names both" 64 "input 'B': expected f32\[K,N\] where K = 33, given f32\[20,5\]" \
    $BIB run examples/matmul.basm --input "A=$T/in/x.npy" --input "B=$T/in/W2.npy"

# matmul with --threads and i32-free round trip: C = A . B matches numpy.
if $BIB run examples/matmul.basm --threads=2 --input "A=$T/in/x.npy" --input "B=$T/in/W1.npy" \
    --output "C=$T/c.npy" 2>"$T/err" && $PY -c "
import numpy as np
a, b, c = (np.load('$T/' + p) for p in ('in/x.npy', 'in/W1.npy', 'c.npy'))
ref = a.astype(np.float64) @ b.astype(np.float64)
assert c.shape == (7, 20)
assert (abs(c - ref) <= 33 * 2.0**-24 * (abs(a).astype(np.float64) @ abs(b))).all()
"; then ok "matmul --threads=2 writes C = A.B"; else bad "matmul: $(cat "$T/err")"; fi

# A trace of a tensor program names shapes, the executor and the hash.
$BIB run examples/matmul.basm --trace --input "A=$T/in/x.npy" --input "B=$T/in/W1.npy" 2>"$T/trace" >/dev/null
if grep -q "MATMUL t2, t0, t1 *t2=f32\[7,20\] t0=f32\[7,33\] t1=f32\[33,20\] on cpu hash=" "$T/trace"; then
    ok "trace lines show shapes, executor and hash"
else
    bad "trace: $(cat "$T/trace")"
fi

# Reductions over an empty last axis (a (3,0) input through '?' dims) give
# defined bytes: SUM +0, MAX -Inf, MEAN the canonical NaN; the same on every
# run and executor. ARGMAX over it traps naming the opcode and the shape.
cat >"$T/empty.basm" <<'EOF2'
.input a t0 f32[?, ?]
.output s t1
.output m t2
.output e t3
.func main regs=1
    SUM t1, t0
    MAX t2, t0
    MEAN t3, t0
    LDI r0, 0
    HALT r0
.end
EOF2
$PY -c "import numpy as np; np.save('$T/a30.npy', np.zeros((3, 0), '<f4'))"
empty_ok=1
for be in cpu vulkan; do
    for i in 1 2 3; do
        $BIB run "$T/empty.basm" --backend=$be --input "a=$T/a30.npy" --output "s=$T/s.$be.$i.npy" \
            --output "m=$T/m.$be.$i.npy" --output "e=$T/e.$be.$i.npy" >/dev/null 2>"$T/err"
        rc=$?
        if [ $rc -eq 69 ] && [ $be = vulkan ]; then
            echo "SKIP: empty reductions on vulkan: $(cat "$T/err")"
            break
        elif [ $rc -ne 0 ]; then
            bad "empty reductions on $be, run $i: exit $rc: $(cat "$T/err")"
            empty_ok=0
            break
        fi
        for o in s m e; do
            cmp -s "$T/$o.cpu.1.npy" "$T/$o.$be.$i.npy" || { empty_ok=0; bad "empty reduction $o on $be run $i differs from cpu run 1"; }
        done
    done
done
if [ $empty_ok -eq 1 ] && $PY -c "
import numpy as np
for o, want in (('s', 0x00000000), ('m', 0xFF800000), ('e', 0x7FC00000)):
    y = np.load('$T/' + o + '.cpu.1.npy')
    assert y.shape == (3,) and y.dtype == np.float32, (o, y.shape, y.dtype)
    assert (y.view('<u4') == want).all(), (o, [hex(v) for v in y.view('<u4')])
" 2>"$T/err"; then
    ok "SUM, MAX, MEAN over a (3,0) input are +0, -Inf, NaN on every run and executor"
else
    bad "empty reductions: $(cat "$T/err")"
fi
printf '.input a t0 f32[?, ?]\n.output i t1\n.func main regs=1\n    ARGMAX t1, t0\n    LDI r0, 0\n    HALT r0\n.end\n' >"$T/argmax.basm"
expect_fail "ARGMAX over an empty last axis traps naming the opcode and shape" 70 \
    "ARGMAX over an empty last axis: t0 (a) is \[3,0\]" \
    $BIB run "$T/argmax.basm" --input "a=$T/a30.npy" --output "i=$T/i.npy"

# REDUCE over leading or middle axes runs down the columns on the cpu (no
# copy with the axes moved last); vulkan moves them last and reduces rows.
# Both give the same bytes, and MAX, MIN are numpy's exactly.
cat >"$T/axes.basm" <<'EOF2'
.input a t0 f32[?, ?, ?]
.output s0 t1
.output m1 t2
.output e01 t3
.output n0 t4
.output p1 t5
.func main regs=1
    REDUCE_SUM t1, t0, 1, 0
    REDUCE_MAX t2, t0, 2, 1
    REDUCE_MEAN t3, t0, 3, 0
    REDUCE_MIN t4, t0, 1, 0
    REDUCE_PROD t5, t0, 2, 0
    LDI r0, 0
    HALT r0
.end
EOF2
$PY -c "
import numpy as np
g = np.random.default_rng(5)
a = g.standard_normal((70, 37, 45)).astype('<f4')
a[3, 5, 7] = np.nan; a[:, 2, 3] = -0.0; a[9, :, 4] = np.inf
np.save('$T/axes.npy', a)"
axes_ok=1
for be in cpu vulkan; do
    $BIB run "$T/axes.basm" --backend=$be --input "a=$T/axes.npy" --output "s0=$T/s0.$be.npy" \
        --output "m1=$T/m1.$be.npy" --output "e01=$T/e01.$be.npy" --output "n0=$T/n0.$be.npy" \
        --output "p1=$T/p1.$be.npy" >/dev/null 2>"$T/err"
    rc=$?
    if [ $rc -eq 69 ] && [ $be = vulkan ]; then
        echo "SKIP: reductions over leading axes on vulkan: $(cat "$T/err")"
    elif [ $rc -ne 0 ]; then
        bad "reductions over leading axes on $be: exit $rc: $(cat "$T/err")"
        axes_ok=0
    elif [ $be = vulkan ]; then
        for o in s0 m1 e01 n0 p1; do
            cmp -s "$T/$o.cpu.npy" "$T/$o.vulkan.npy" || { axes_ok=0; bad "REDUCE $o over leading axes differs between cpu and vulkan"; }
        done
    fi
done
if [ $axes_ok -eq 1 ] && $PY -c "
import numpy as np
a = np.load('$T/axes.npy')
def same(o, want):
    y = np.load('$T/' + o + '.cpu.npy')
    w = np.where(np.isnan(want), np.float32(np.nan), want).astype('<f4')
    assert y.shape == w.shape and (y.view('<u4') == w.view('<u4')).all(), o
with np.errstate(invalid='ignore'):
    same('m1', np.max(a, axis=1, keepdims=True))
    same('n0', np.min(a, axis=0))
" 2>"$T/err"; then
    ok "REDUCE_SUM, MAX, MEAN, MIN, PROD over leading and middle axes: the same bytes on cpu and vulkan; MAX and MIN are numpy's"
else
    bad "reductions over leading axes: $(cat "$T/err")"
fi

# lavapipe stops every loop of a shader invocation once 65535 iterations of
# them have run, with no error (a SUM of 2^22 ones gave 131070 there). The
# Vulkan executor's start-up probe finds the limit, and a call whose loops
# could run longer runs on the CPU executor: the same bits, traced "on cpu".
$PY -c "
import numpy as np
np.save('$T/ones22.npy', np.ones((1, (1 << 22) + 1), '<f4'))
np.save('$T/ones70k.npy', np.ones((1, 70000, 1, 1), '<f4'))
"
# CONV's parameters: groups 1, strides and dilations 1 (r0..r4), no pads.
printf '.input x t0 f32[1, ?]\n.input c t2 f32[1, ?, 1, 1]\n.output y t1\n.output z t3\n.func main regs=12\n    SUM t1, x\n    LDI r0, 1\n    LDI r1, 1\n    LDI r2, 1\n    LDI r3, 1\n    LDI r4, 1\n    CONV t3, c, c, r0\n    LDI r0, 0\n    HALT r0\n.end\n' >"$T/long.basm"
for be in cpu vulkan; do
    $BIB run "$T/long.basm" --backend=$be --trace --input "x=$T/ones22.npy" \
        --input "c=$T/ones70k.npy" --output "y=$T/long_y.$be.npy" --output "z=$T/long_z.$be.npy" \
        >/dev/null 2>"$T/long.$be.err"
    echo $? >"$T/long.$be.rc"
done
if [ "$(cat "$T/long.vulkan.rc")" -eq 69 ]; then
    echo "SKIP: long loops on vulkan: $(cat "$T/long.vulkan.err")"
elif [ "$(cat "$T/long.cpu.rc")" -ne 0 ] || [ "$(cat "$T/long.vulkan.rc")" -ne 0 ]; then
    bad "long loops: exit $(cat "$T/long.cpu.rc") on cpu, $(cat "$T/long.vulkan.rc") on vulkan: $(cat "$T/long.vulkan.err")"
elif ! cmp -s "$T/long_y.cpu.npy" "$T/long_y.vulkan.npy" || ! cmp -s "$T/long_z.cpu.npy" "$T/long_z.vulkan.npy" ||
    ! $PY -c "
import numpy as np
assert np.load('$T/long_y.cpu.npy').tolist() == [4194305.0]
assert np.load('$T/long_z.cpu.npy').ravel().tolist() == [70000.0]
" 2>"$T/err"; then
    bad "SUM of 2^22 + 1 ones and a 1x1 CONV over 70000 channels differ between cpu and vulkan, or are wrong"
elif $BIB info | grep -q "loops: [0-9]* iterations an invocation" &&
    [ "$(grep -c "on cpu" "$T/long.vulkan.err")" -ne 2 ]; then
    bad "past the device's loop limit the SUM and the CONV did not run on cpu: $(cat "$T/long.vulkan.err")"
else
    ok "SUM of 2^22 + 1 ones and a 1x1 CONV over 70000 channels give the cpu bits on vulkan (past a loop limit, on cpu)"
fi

# ATTENTION's CPU scratch lies outside --max-memory, so it stays within the
# operands' bytes (or 64 MiB): 84 queries against 4M keys of width 1 took 43
# floats a key for each of the threads (1.4 GB on 2 threads) and failed under
# a 1 GB address-space limit that its 64 MB of tensors fit. AddressSanitizer
# cannot start under such a limit, so it is skipped there.
if [ -n "${BIB_TEST_SANITIZED:-}" ]; then
    echo "SKIP ATTENTION's scratch under ulimit -v: AddressSanitizer cannot start under it"
else
    printf '.input q t0 f32[s, 1, d]\n.input k t1 f32[t, 1, d]\n.input v t2 f32[t, 1, d]\n.output o t3\n.func main regs=1\n    ATTENTION o, q, k, v\n    LDI r0, 0\n    HALT r0\n.end\n' >"$T/keys.basm"
    $PY -c "
import numpy as np
rng = np.random.default_rng(1)
np.save('$T/keys_q.npy', rng.standard_normal((84, 1, 1), dtype=np.float32))
np.save('$T/keys_k.npy', rng.standard_normal((4000000, 1, 1), dtype=np.float32))
np.save('$T/keys_v.npy', rng.standard_normal((4000000, 1, 1), dtype=np.float32))
" || bad "numpy"
    (
        ulimit -v 1000000
        $BIB run "$T/keys.basm" --threads 2 --input "q=$T/keys_q.npy" --input "k=$T/keys_k.npy" \
            --input "v=$T/keys_v.npy" --output "o=$T/keys_o.npy" 2>"$T/err"
        echo $? >"$T/rc"
    )
    if [ "$(cat "$T/rc")" -ne 0 ]; then
        bad "ATTENTION over 4M keys under ulimit -v 1000000: exit $(cat "$T/rc"), $(cat "$T/err")"
    elif $PY -c "
import numpy as np
q, k, v = (np.load('$T/keys_%s.npy' % n).astype(np.float64).ravel() for n in 'qkv')
o = np.load('$T/keys_o.npy').ravel()
for i in range(len(q)):
    s = q[i] * k
    p = np.exp(s - s.max())
    want = (p * v).sum() / p.sum()
    assert abs(o[i] - want) <= 1e-4 * max(1, abs(want)), (i, o[i], want)
" 2>"$T/err"; then
        ok "ATTENTION over 4M keys runs under a 1 GB address-space limit, within 1e-4 of float64"
    else bad "ATTENTION over 4M keys: $(cat "$T/err")"; fi
    # An empty result has nothing to compute, however many (empty) keys:
    # 2^31-1 keys of width 0 asked for 42 x 2^31 floats of scores a thread.
    $PY -c "
import numpy as np
np.save('$T/none_q.npy', np.zeros((100, 1, 0), np.float32))
np.save('$T/none_k.npy', np.zeros((2147483647, 1, 0), np.float32))
" || bad "numpy"
    (
        ulimit -v 4000000
        $BIB run "$T/keys.basm" --input "q=$T/none_q.npy" --input "k=$T/none_k.npy" \
            --input "v=$T/none_k.npy" --output "o=$T/none_o.npy" 2>"$T/err"
        echo $? >"$T/rc"
    )
    if [ "$(cat "$T/rc")" -eq 0 ] &&
        $PY -c "import numpy as np; assert np.load('$T/none_o.npy').shape == (100, 1, 0)"; then
        ok "ATTENTION with an empty result over 2^31-1 empty keys takes no scratch"
    else bad "ATTENTION with an empty result: exit $(cat "$T/rc"), $(cat "$T/err")"; fi
    # The CPU executor's workers: 255 of them with the default 8 MiB stacks
    # took 2 GiB of address space, and the pool did not start under 1 GB.
    printf '.input x t0 f32[?]\n.output y t1\n.func main regs=1\n    RELU t1, x\n    LDI r0, 0\n    HALT r0\n.end\n' >"$T/relu.basm"
    $PY -c "import numpy as np; np.save('$T/relu_x.npy', np.linspace(-1, 1, 1 << 20, dtype=np.float32))" ||
        bad "numpy"
    (
        ulimit -s 8192
        ulimit -v 1000000
        $BIB run "$T/relu.basm" --threads 256 --input "x=$T/relu_x.npy" --output "y=$T/relu_y.npy" \
            2>"$T/err"
        echo $? >"$T/rc"
    )
    if [ "$(cat "$T/rc")" -eq 0 ] &&
        $PY -c "import numpy as np; x = np.load('$T/relu_x.npy'); assert (np.load('$T/relu_y.npy') == np.maximum(x, 0)).all()"; then
        ok "256 CPU threads start under a 1 GB address-space limit with 8 MiB stacks"
    else bad "256 threads under ulimit -v 1000000: exit $(cat "$T/rc"), $(cat "$T/err")"; fi
fi

finish
