#!/bin/sh
# CLI tests for the GPU_* opcodes without a CUDA device: they run on the CPU
# executor with the same bits as the plain tensor opcodes, bib warns exactly
# once on stderr, --strict-device makes that an error (exit 69), and
# --backend=cuda says clearly why it cannot run. On a machine with a CUDA
# device the fallback checks print SKIP (the opcodes run on the device; the
# bit-identity check still runs).
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"

$PY -c "
import numpy as np
r = np.random.default_rng(3)
np.save('$T/x.npy', r.standard_normal((7, 12)).astype('<f4'))
np.save('$T/W.npy', r.standard_normal((12, 10)).astype('<f4'))
" || bad "inputs"
IN="--input x=$T/x.npy --input W=$T/W.npy"

# The same program with the plain tensor opcodes, for the reference bits.
sed -e 's/GPU_MATMUL/MATMUL/' -e 's/GPU_ATTENTION_CAUSAL/ATTENTION_CAUSAL/' \
    -e '/GPU_INIT\|GPU_UPLOAD\|GPU_SYNC\|GPU_DOWNLOAD/d' examples/gpu_fallback.basm >"$T/plain.basm"
if sed "s/;.*//" "$T/plain.basm" | grep -q GPU_; then bad "plain.basm still has GPU_ opcodes"; fi

have_cuda=0
$BIB run examples/gpu_fallback.basm --backend=cuda $IN --output "o=$T/o.cuda.npy" 2>"$T/cuda_err" && have_cuda=1

# shellcheck disable=SC2086
$BIB run examples/gpu_fallback.basm $IN --output "o=$T/o.gpu.npy" 2>"$T/err"
rc=$?
# shellcheck disable=SC2086
$BIB run "$T/plain.basm" $IN --output "o=$T/o.plain.npy" 2>/dev/null || bad "plain program failed"
if [ $rc -eq 0 ] && cmp -s "$T/o.gpu.npy" "$T/o.plain.npy"; then
    ok "GPU_MATMUL and GPU_ATTENTION_CAUSAL give the bits of MATMUL and ATTENTION_CAUSAL"
else
    bad "GPU_* output (exit $rc) differs from the plain program's: $(cat "$T/err")"
fi

if [ $have_cuda -eq 1 ]; then
    echo "SKIP: the no-CUDA fallback checks: this machine has a CUDA device"
else
    n=$(grep -c "GPU_\* opcodes run on the CPU" "$T/err")
    if [ "$n" -eq 1 ] && grep -q "^bib: no CUDA device (.*); GPU_\* opcodes run on the CPU$" "$T/err"; then
        ok "without a CUDA device bib warns exactly once, with the reason"
    else
        bad "warning printed $n times: $(cat "$T/err")"
    fi
    # Every GPU_* opcode runs in a loop: still one warning per run.
    cat >"$T/loop.basm" <<'BASM'
.tensor A t0 f32[2,2] = 1.0, 2.0, 3.0, 4.0
.func main regs=4
    LDI r1, 5
again:
    GPU_INIT
    GPU_MATMUL t1, A, A
    GPU_SYNC
    FREE t1
    ADDI r1, r1, -1
    JNZ r1, again
    LDI r0, 0
    HALT r0
.end
BASM
    $BIB run "$T/loop.basm" 2>"$T/err2"
    n=$(grep -c "GPU_\* opcodes run on the CPU" "$T/err2")
    if [ "$n" -eq 1 ]; then ok "fifteen GPU_* opcodes in a loop warn once"; else
        bad "loop warned $n times: $(cat "$T/err2")"; fi
    # bib test runs every case in a VM of its own: still one warning.
    $BIB test tests/hex/gpu >/dev/null 2>"$T/err4"
    n=$(grep -c "GPU_\* opcodes run on the CPU" "$T/err4")
    if [ "$n" -eq 1 ]; then ok "bib test over $(ls tests/hex/gpu | wc -l) GPU cases warns once"; else
        bad "bib test warned $n times: $(head -3 "$T/err4")"; fi

    # shellcheck disable=SC2086
    $BIB run examples/gpu_fallback.basm --strict-device $IN --output "o=$T/o.strict.npy" 2>"$T/err3"
    rc=$?
    if [ $rc -eq 69 ] && grep -q "no CUDA device (.*); --strict-device forbids running GPU_\* opcodes on the CPU" "$T/err3" &&
        grep -q "pc 0 (GPU_INIT)" "$T/err3"; then
        ok "--strict-device makes a missing CUDA device an error (exit 69) at the first GPU_* opcode"
    else
        bad "--strict-device: exit $rc: $(cat "$T/err3")"
    fi
    if [ ! -e "$T/o.strict.npy" ]; then ok "--strict-device writes no output"; else bad "--strict-device wrote an output"; fi

    if grep -q "^bib: executor 'cuda' is not available: .\+" "$T/cuda_err"; then
        ok "--backend=cuda says why CUDA is not available: $(cat "$T/cuda_err")"
    else
        bad "--backend=cuda: $(cat "$T/cuda_err")"
    fi
    $BIB run examples/gpu_fallback.basm --backend=cuda $IN >/dev/null 2>&1
    rc=$?
    if [ $rc -eq 69 ]; then ok "--backend=cuda exits 69 (unavailable)"; else bad "--backend=cuda exit $rc"; fi
fi

# A program without GPU_* opcodes never warns.
$BIB run "$T/plain.basm" $IN 2>"$T/err4" >/dev/null
if ! grep -q "CUDA" "$T/err4"; then ok "no warning without GPU_* opcodes"; else bad "warned: $(cat "$T/err4")"; fi

finish
