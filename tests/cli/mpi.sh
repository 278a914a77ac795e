#!/bin/sh
# CLI tests for the collective opcodes under Open MPI (spec/scale-out.md):
# examples/sharded_mlp.basm, sharded_attention.basm, sharded_encoder_layer.basm
# and sharded_cnn.basm on 1, 2 and 3 ranks write the bytes of examples/mlp.basm,
# attention.basm, bench/encoder_layer.basm and cnn.basm run alone; ALLREDUCE adds in rank order
# (checked against numpy's float32 left fold, on values where another order
# gives other bits); the other collectives against numpy; a trap, a shape
# mismatch, an unreadable input and outputs that differ stop every rank with
# one line naming the rank; a rank that never arrives ends the run after
# --comm-timeout. Prints SKIP with the reason where mpirun is absent.
# Prints one line per check and "N passed, N failed" at the end.
#
# BIB_TEST_MPI=mpich runs the same checks under MPICH's launcher
# (mpiexec.mpich, Hydra), where bib loads libmpich.so.12: the MPICH ABI of
# backends/comm.c. The default is Open MPI's mpirun.
. "$(dirname "$0")/lib/common.sh"
FLAVOR=${BIB_TEST_MPI:-openmpi}
case $FLAVOR in
openmpi)
    if ! command -v mpirun.openmpi >/dev/null 2>&1 && ! command -v mpirun >/dev/null 2>&1; then
        echo "SKIP: mpi: mpirun is not installed (make deps installs openmpi-bin)"
        echo "0 passed, 0 failed"
        exit 0
    fi
    LAUNCHER=$(command -v mpirun.openmpi || command -v mpirun)
    # Open MPI refuses root without these; two cores need --oversubscribe
    # for 3 ranks. Every run is bounded.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    MPIRUN="timeout 120 $LAUNCHER --oversubscribe --allow-run-as-root"
    LAUNCH_ENV=OMPI_COMM_WORLD_SIZE
    ;;
mpich)
    if ! command -v mpiexec.mpich >/dev/null 2>&1; then
        echo "SKIP: mpi (MPICH): mpiexec.mpich is not installed (make deps installs mpich)"
        echo "0 passed, 0 failed"
        exit 0
    fi
    MPIRUN="timeout 120 mpiexec.mpich"
    LAUNCH_ENV=PMI_SIZE
    ;;
*)
    echo "mpi.sh: BIB_TEST_MPI is openmpi or mpich, not $FLAVOR" >&2
    exit 2
    ;;
esac

# sharded EXAMPLE REF OUT RANKS ARGS...: examples/EXAMPLE.basm on each rank
# count in RANKS (ARGS its inputs, OUT its output's name) writes the bytes of
# REF, the .npy the single-process program wrote.
sharded() {
    example=$1 ref=$2 out=$3 ranks=$4
    shift 4
    for n in $ranks; do
        if $MPIRUN -np "$n" $BIB run "examples/$example.basm" "$@" --output "$out=$T/$example.$n.npy" \
            >"$T/out" 2>&1 && cmp -s "$ref" "$T/$example.$n.npy"; then
            ok "$example on $n rank(s) writes the single-process bytes ($(basename "$ref"))"
        else
            bad "$example on $n rank(s): $(cat "$T/out")"
        fi
    done
}

# ---- sharded_mlp: the bytes of mlp.basm alone, on 1, 2 and 3 ranks ----
$PY tools/make-npy.py "$T/in" --n 7 --d 33 --h 20 --o 5 >/dev/null || bad "make-npy.py"
IN="--input x=$T/in/x.npy --input W1=$T/in/W1.npy --input b1=$T/in/b1.npy --input W2=$T/in/W2.npy --input b2=$T/in/b2.npy"
# shellcheck disable=SC2086
$BIB run examples/mlp.basm --backend=cpu $IN --output "y=$T/y.ref.npy" || bad "mlp alone"
# shellcheck disable=SC2086
sharded sharded_mlp "$T/y.ref.npy" y "1 2 3" $IN
# sharded_attention: head-sharded ATTENTION_CAUSAL, the bytes of attention.basm.
$PY -c "
import numpy as np
r = np.random.default_rng(3)
for n, s in (('q', (9, 32)), ('k', (11, 32)), ('v', (11, 32))):
    np.save('$T/' + n + '.npy', r.standard_normal(s).astype(np.float32))
" || bad "writing q, k, v"
QKV="--input q=$T/q.npy --input k=$T/k.npy --input v=$T/v.npy"
# shellcheck disable=SC2086
$BIB run examples/attention.basm $QKV --output "o=$T/o.ref.npy" || bad "attention alone"
# shellcheck disable=SC2086
sharded sharded_attention "$T/o.ref.npy" o "1 2 3" $QKV
# sharded_encoder_layer: a whole pre-norm transformer block (projections by
# heads, attention by heads, the feed-forward width in blocks), the bytes of
# bench/encoder_layer.basm.
$PY - "$T/enc" <<'PY' || bad "writing the encoder layer's inputs"
import os, sys, numpy as np
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
r = np.random.default_rng(7)
b, s, e, f = 2, 5, 16, 24
def w(*shape, scale=0.3): return (r.standard_normal(shape) * scale).astype(np.float32)
for k, v in dict(x=w(b, s, e, scale=1.0), g1=1 + w(e), be1=w(e), wq=w(e, e), bq=w(e),
                 wk=w(e, e), bk=w(e), wv=w(e, e), bv=w(e), wo=w(e, e), bo=w(e), g2=1 + w(e),
                 be2=w(e), w1=w(e, f), b1=w(f), w2=w(f, e), b2=w(e)).items():
    np.save(d + "/" + k + ".npy", v)
PY
ENC=$(for k in x g1 be1 wq bq wk bk wv bv wo bo g2 be2 w1 b1 w2 b2; do printf -- "--input %s=%s/enc/%s.npy " $k "$T" $k; done)
# shellcheck disable=SC2086
$BIB run bench/encoder_layer.basm --backend=cpu $ENC --output "y=$T/enc.ref.npy" || bad "encoder layer alone"
# shellcheck disable=SC2086
sharded sharded_encoder_layer "$T/enc.ref.npy" y "1 2 3" $ENC
# sharded_cnn: batch-sharded inference (each rank its block of images), the
# bytes of cnn.basm; with 2 images on 3 ranks one rank has none.
$PY - "$T/cnn" <<'PY' || bad "writing the CNN's inputs"
import os, sys, numpy as np
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
r = np.random.default_rng(5)
np.save(d + "/x.npy", r.standard_normal((7, 1, 12, 12)).astype(np.float32))
np.save(d + "/w.npy", (r.standard_normal((4, 1, 3, 3)) * 0.5).astype(np.float32))
bn = np.stack([np.ones(4), r.standard_normal(4) * 0.1, np.zeros(4), np.ones(4)])
np.save(d + "/bn.npy", bn.astype(np.float32))
np.save(d + "/W.npy", (r.standard_normal((144, 10)) * 0.1).astype(np.float32))
np.save(d + "/b.npy", (r.standard_normal(10) * 0.1).astype(np.float32))
np.save(d + "/x2.npy", r.standard_normal((2, 1, 12, 12)).astype(np.float32))
PY
CNN="--input w=$T/cnn/w.npy --input bn=$T/cnn/bn.npy --input W=$T/cnn/W.npy --input b=$T/cnn/b.npy"
# shellcheck disable=SC2086
$BIB run examples/cnn.basm --backend=cpu --input "x=$T/cnn/x.npy" $CNN --output "y=$T/cnn.ref.npy" &&
    $BIB run examples/cnn.basm --backend=cpu --input "x=$T/cnn/x2.npy" $CNN --output "y=$T/cnn2.ref.npy" ||
    bad "cnn alone"
# shellcheck disable=SC2086
sharded sharded_cnn "$T/cnn.ref.npy" y "1 2 3" --input "x=$T/cnn/x.npy" $CNN
# shellcheck disable=SC2086
sharded sharded_cnn "$T/cnn2.ref.npy" y 3 --input "x=$T/cnn/x2.npy" $CNN
# Fewer columns than ranks: some ranks hold an empty block.
$PY tools/make-npy.py "$T/small" --n 3 --d 4 --h 2 --o 2 >/dev/null || bad "make-npy.py small"
SMALL="--input x=$T/small/x.npy --input W1=$T/small/W1.npy --input b1=$T/small/b1.npy --input W2=$T/small/W2.npy --input b2=$T/small/b2.npy"
# shellcheck disable=SC2086
$BIB run examples/mlp.basm $SMALL --output "y=$T/ys.ref.npy" || bad "small mlp alone"
# shellcheck disable=SC2086
sharded sharded_mlp "$T/ys.ref.npy" y 3 $SMALL
# The batch on another executor: the same bytes with the layers on Vulkan,
# where there is a Vulkan device.
# shellcheck disable=SC2086
if $BIB run examples/mlp.basm --backend=vulkan $IN --output "y=$T/y.vk.npy" >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    if $MPIRUN -np 2 $BIB run examples/sharded_mlp.basm --backend=vulkan $IN \
        --output "y=$T/y.vk2.npy" >"$T/out" 2>&1 && cmp -s "$T/y.ref.npy" "$T/y.vk2.npy"; then
        ok "sharded_mlp on 2 ranks with --backend=vulkan writes the cpu's bytes"
    else
        bad "sharded_mlp on vulkan: $(cat "$T/out")"
    fi
else
    echo "SKIP: sharded_mlp on vulkan: no Vulkan device here"
fi

# ---- each collective against numpy, 3 ranks; rank r contributes row r of P ----
cat >"$T/coll.basm" <<'BASM'
.input  P  t0 f32[w, n]
.output S  t1 f32[n]
.output M  t2 f32[n]
.output G  t3 f32[w, n]
.output B  t4 f32[n]
.output RS t5 f32[w, n]
.func main regs=8
    RANK r0
    LDI r1, 1
    ALLOC t8, i32, r1, 1
    LDI r2, 0
    TSET t8, r2, r0
    GATHER t9, P, t8            ; [1, n]: this rank's row
    DIM r3, P, 1
    RESHAPE t10, t9, r3, 1      ; [n]
    ALLREDUCE S, t10
    ALLREDUCE_MAX M, t10
    ALLGATHER G, t9, 0
    COPY B, t10
    LDI r4, 2
    BROADCAST B, r4
    REDUCE_SCATTER t14, P
    ALLGATHER t15, t14, 0
    COPY RS, t15
    LDI r0, 0
    HALT r0
.end
BASM
$PY - "$T" <<'PY' || bad "writing P.npy"
import sys, numpy as np
# Row 0 is big and rows 1 and 2 cancel in another order: ((a + b) + c) and
# (a + (b + c)) differ in float32 here.
a = np.array([1e8, 1.0, -3.5, 0.1, 16777216.0, 0.0, -0.0, 7.0], np.float32)
b = np.array([-1e8, 1e-8, 2.25, 0.2, 1.0, -0.0, -0.0, -7.0], np.float32)
c = np.array([1.0, -1.0, 1.25, 0.3, 1.0, 0.0, -0.0, 1e-30], np.float32)
P = np.stack([a, b, c])
left = (P[0] + P[1]) + P[2]
right = P[0] + (P[1] + P[2])
assert left.tobytes() != right.tobytes(), "the data must tell the orders apart"
np.save(sys.argv[1] + "/P.npy", P)
PY
if $MPIRUN -np 3 $BIB run "$T/coll.basm" --input "P=$T/P.npy" --output "S=$T/S.npy" \
    --output "M=$T/M.npy" --output "G=$T/G.npy" --output "B=$T/B.npy" --output "RS=$T/RS.npy" \
    >"$T/out" 2>&1; then
    if $PY - "$T" <<'PY'; then ok "ALLREDUCE is the left fold in rank order; the others match numpy"; else bad "collectives against numpy"; fi
import sys, numpy as np
d = sys.argv[1]
P = np.load(d + "/P.npy")
left = (P[0] + P[1]) + P[2]
S = np.load(d + "/S.npy")
assert S.tobytes() == left.tobytes(), (S, left)
assert np.load(d + "/M.npy").tobytes() == P.max(axis=0).tobytes()
assert np.load(d + "/G.npy").tobytes() == P.tobytes()
assert np.load(d + "/B.npy").tobytes() == P[2].tobytes()
# REDUCE_SCATTER of the [3, n] stack: every rank the same stack, so the
# fold is ((P + P) + P), rank r keeps row r; gathered back: the whole.
three = (P + P) + P
assert np.load(d + "/RS.npy").tobytes() == three.tobytes()
PY
else
    bad "collectives on 3 ranks: $(cat "$T/out")"
fi
# Bit-identical run to run.
$MPIRUN -np 3 $BIB run "$T/coll.basm" --input "P=$T/P.npy" --output "S=$T/S2.npy" \
    --output "M=$T/M2.npy" --output "G=$T/G2.npy" --output "B=$T/B2.npy" --output "RS=$T/RS2.npy" \
    >/dev/null 2>&1
if cmp -s "$T/S.npy" "$T/S2.npy" && cmp -s "$T/RS.npy" "$T/RS2.npy"; then
    ok "the same bytes run to run"
else
    bad "ALLREDUCE differs run to run"
fi
# The module from stdin (bib run -): launchers give stdin to rank 0 alone,
# which shares it as it shares the inputs.
if $MPIRUN -np 3 $BIB run --comm-timeout 10s - --input "P=$T/P.npy" --output "S=$T/S3.npy" \
    --output "M=$T/M3.npy" --output "G=$T/G3.npy" --output "B=$T/B3.npy" --output "RS=$T/RS3.npy" \
    <"$T/coll.basm" >"$T/out" 2>&1 && cmp -s "$T/S.npy" "$T/S3.npy" && cmp -s "$T/G.npy" "$T/G3.npy"; then
    ok "a module from stdin (bib run -) is rank 0's, run by every rank"
else
    bad "bib run - on 3 ranks: $(cat "$T/out")"
fi

# ---- ALLREDUCE and REDUCE_SCATTER in steps, against numpy, on 1, 2 and 3 ranks ----
# The reduction moves each block in steps of about 1 MiB received per rank
# (vm/collective.c); these sizes take 2 and 3 steps with a short last one,
# split unevenly over 2 and 3 ranks, beside tiny and empty tensors (fewer
# elements than ranks: empty blocks). Rank r contributes row r of each input.
# S sum, M max, I in place, V into a view of the input, RS and RM
# REDUCE_SCATTER(_MAX) of [rows, cols] gathered back, s and m a 2-element
# tensor, e an empty one.
cat >"$T/steps.basm" <<'BASM'
.input  P  t0 f32[w, n]
.input  Q  t1 f32[w, q]
.input  Y  t2 f32[w, 2]
.input  E  t3 f32[w, 0]
.output S  t4 f32[n]
.output M  t5 f32[n]
.output I  t6 f32[n]
.output V  t7 f32[n]
.output RS t8 f32[rows, cols]
.output RM t9 f32[rows, cols]
.output s  t10 f32[2]
.output m  t11 f32[2]
.output e  t12 f32[0]
.func main regs=8
    RANK r0
    LDI r1, 1
    ALLOC t20, i32, r1, 1
    LDI r2, 0
    TSET t20, r2, r0
    GATHER t21, P, t20
    DIM r3, P, 1
    RESHAPE t22, t21, r3, 1
    ALLREDUCE S, t22
    ALLREDUCE_MAX M, t22
    COPY I, t22
    ALLREDUCE I, I
    GATHER t23, Q, t20
    LDI r4, 1001
    LDI r5, 1000
    RESHAPE t24, t23, r4, 2
    REDUCE_SCATTER t25, t24
    ALLGATHER RS, t25, 0
    REDUCE_SCATTER_MAX t26, t24
    ALLGATHER RM, t26, 0
    GATHER t27, Y, t20
    LDI r6, 2
    RESHAPE t28, t27, r6, 1
    ALLREDUCE s, t28
    ALLREDUCE_MAX m, t28
    GATHER t29, E, t20
    LDI r6, 0
    RESHAPE t30, t29, r6, 1
    ALLREDUCE e, t30
    RESHAPE V, t22, r3, 1       ; a view of the input: ALLREDUCE over its own storage
    ALLREDUCE V, t22
    LDI r0, 0
    HALT r0
.end
BASM
$PY - "$T" <<'PY' || bad "writing the stepped inputs"
import sys, numpy as np
np.seterr(all="ignore")   # inf - inf and NaN operands are meant
d = sys.argv[1]
r = np.random.default_rng(19)
def values(shape):
    # Magnitudes over 16 decades, so that the order of the adds shows in the bits.
    x = r.standard_normal(shape) * 10.0 ** r.integers(-8, 9, shape)
    return x.astype(np.float32)
n = 1000003
P = values((3, n))
# Specials at the start, across the step boundaries and at the end: NaNs
# with payloads and signalling, infinities that cancel, signed zeros.
bits = P.view(np.uint32)
special = [0x7FC00001, 0xFFC00000, 0x7F800001, 0x7F800000, 0xFF800000, 0x80000000, 0x00000000]
for at in (0, 1, 262143, 262144, 500001, 500002, 655359, n - 1):
    for row in range(3):
        bits[row, at] = special[(at + 3 * row) % len(special)]
bits[:, 7] = [0x80000000, 0x80000000, 0x80000000]    # -0 + -0 + -0 = -0
bits[:, 8] = [0x80000000, 0x00000000, 0x80000000]    # max: +0 over -0
bits[:, 9] = [0x7F800000, 0xFF800000, 0x3F800000]    # inf + -inf: NaN
np.save(d + "/P.npy", P)
np.save(d + "/Q.npy", values((3, 1001 * 1000)))
np.save(d + "/Y.npy", values((3, 2)))
np.save(d + "/E.npy", np.zeros((3, 0), np.float32))
left = (P[0] + P[1]) + P[2]
right = P[0] + (P[1] + P[2])
ok = ~np.isnan(left) & ~np.isnan(right)
assert (left[ok] != right[ok]).sum() > 1000, "the data must tell the orders apart"
PY
for n in 1 2 3; do
    $PY - "$T" "$n" <<'PY' || bad "slicing the inputs for $n ranks"
import sys, numpy as np
d, w = sys.argv[1], int(sys.argv[2])
for name in "PQYE":
    np.save("%s/%s%d.npy" % (d, name, w), np.load("%s/%s.npy" % (d, name))[:w])
PY
    outs=""
    for o in S M I V RS RM s m e; do outs="$outs --output $o=$T/$o.$n.npy"; done
    # shellcheck disable=SC2086
    if $MPIRUN -np $n $BIB run "$T/steps.basm" --input "P=$T/P$n.npy" --input "Q=$T/Q$n.npy" \
        --input "Y=$T/Y$n.npy" --input "E=$T/E$n.npy" $outs >"$T/out" 2>&1; then
        if $PY - "$T" "$n" <<'PY'; then
import sys, numpy as np
np.seterr(all="ignore")
d, w = sys.argv[1], int(sys.argv[2])
CANON = np.uint32(0x7FC00000)
def fold_sum(x):
    acc = x[0].copy()
    for row in x[1:]:
        acc = acc + row              # float32 + float32: one rounding, in rank order
    bits = acc.view(np.uint32).copy()
    bits[np.isnan(acc)] = CANON
    return bits
def fold_max(x):
    b = x.view(np.int32)
    keys = b ^ ((b >> 31) & 0x7FFFFFFF)   # -0 < +0, as MAX orders them
    best = keys.max(axis=0)
    bits = (best ^ ((best >> 31) & 0x7FFFFFFF)).view(np.uint32).copy()
    bits[np.isnan(x).any(axis=0)] = CANON
    return bits
def got(name):
    return np.load("%s/%s.%d.npy" % (d, name, w)).view(np.uint32)
P, Q, Y = (np.load("%s/%s%d.npy" % (d, k, w)) for k in "PQY")
Q3 = Q.reshape(w, 1001, 1000)
checks = [("S", fold_sum(P)), ("M", fold_max(P)), ("I", fold_sum(P)), ("V", fold_sum(P)),
          ("RS", fold_sum(Q3)), ("RM", fold_max(Q3)), ("s", fold_sum(Y)), ("m", fold_max(Y))]
for name, want in checks:
    g = got(name)
    assert g.shape == want.shape, (name, g.shape, want.shape)
    wrong = np.flatnonzero(g.ravel() != want.ravel())
    assert wrong.size == 0, "%s: %d elements differ, first at %d: %08x, want %08x" % (
        name, wrong.size, wrong[0], g.ravel()[wrong[0]], want.ravel()[wrong[0]])
assert got("e").shape == (0,)
PY
            ok "ALLREDUCE, _MAX and REDUCE_SCATTER(_MAX) in steps on $n rank(s): numpy's rank-order fold, bit for bit"
        else
            bad "the stepped reductions on $n rank(s) differ from numpy"
        fi
    else
        bad "the stepped reductions on $n rank(s): $(cat "$T/out")"
    fi
done

# ---- faults: every rank exits with one line naming the rank and the cause ----
# expect_all NAME NP CODE PATTERN ARGS...: exit CODE and NP lines matching PATTERN
expect_all() {
    name=$1 np=$2 code=$3 pattern=$4
    shift 4
    $MPIRUN -np "$np" "$@" >"$T/out" 2>&1
    rc=$?
    lines=$(grep -c -- "$pattern" "$T/out")
    if [ $rc -eq "$code" ] && [ "$lines" -eq "$np" ]; then ok "$name"; else
        bad "$name: exit $rc (want $code), $lines lines (want $np): $(cat "$T/out")"
    fi
}
cat >"$T/trap.basm" <<'BASM'
.tensor A t0 f32[2] = 1, 2
.func main regs=4
    RANK r0
    LDI r1, 1
    JNE r0, r1, go
    LDI r2, 0
    DIV r3, r1, r2
go:
    ALLREDUCE t1, A
    LDI r0, 0
    HALT r0
.end
BASM
expect_all "a rank that traps stops every rank (rank and trap named)" 3 70 \
    "bib: rank [012] of 3: rank 1: trap at pc 4 (DIV r3, r1, r2) line 7: division by zero" \
    $BIB run "$T/trap.basm"
cat >"$T/shape.basm" <<'BASM'
.func main regs=4
    RANK r0
    ADDI r0, r0, 2
    ALLOC t0, f32, r0, 1
    ALLREDUCE t1, t0
    LDI r0, 0
    HALT r0
.end
BASM
expect_all "mismatched shapes name both ranks' shapes" 2 70 \
    "rank 0 is at ALLREDUCE (pc 3) with f32\[2\], rank 1 is at ALLREDUCE (pc 3) with f32\[3\]" \
    $BIB run "$T/shape.basm"
expect_all "an input rank 0 cannot read stops every rank" 2 66 \
    "rank [01] of 2: rank 0: --input P: cannot .*nothing.npy" \
    $BIB run "$T/coll.basm" --input "P=$T/nothing.npy"
# In place, REDUCE_SCATTER's live destination keeps the input's shape: a
# trap before any exchange, on every rank, not an exchange that cannot end.
cat >"$T/scatter_in_place.basm" <<'BASM'
.tensor A t0 f32[4] = 1, 2, 3, 4
.func main regs=4
    REDUCE_SCATTER A, A
    LDI r0, 0
    HALT r0
.end
BASM
expect_all "REDUCE_SCATTER in place onto another shape traps on every rank" 2 70 \
    "rank [01] of 2: rank 0: trap at pc 0 (REDUCE_SCATTER t0, t0) line 3: shape mismatch: t0 (A) holds f32\[4\] but the result is f32\[2\]" \
    $BIB run "$T/scatter_in_place.basm"
cat >"$T/own.basm" <<'BASM'
.output R t0 f32[1]
.func main regs=4
    LDI r1, 1
    ALLOC R, f32, r1, 1
    RANK r0
    ITOF r0, r0
    LDI r2, 0
    TSET R, r2, r0
    LDI r0, 0
    HALT r0
.end
BASM
expect_all "outputs that differ between ranks are an error" 2 70 \
    "output R differs between rank 0 and rank 1" $BIB run "$T/own.basm" --output "R=$T/R.npy"
[ -e "$T/R.npy" ] && bad "an output was written although the ranks disagree"
# The line names the collective that waited, not the first of its opcode.
cat >"$T/hang.basm" <<'BASM'
.tensor A t0 f32[2] = 1, 2
.func main regs=4
    ALLREDUCE t2, A
    RANK r0
    LDI r1, 1
    JNE r0, r1, go
spin:
    JMP spin
go:
    ALLREDUCE t1, A
    LDI r0, 0
    HALT r0
.end
BASM
start=$(date +%s)
$MPIRUN -np 2 $BIB run --comm-timeout 2s "$T/hang.basm" >"$T/out" 2>&1
rc=$?
took=$(($(date +%s) - start))
if [ $rc -ne 0 ] && [ $took -lt 60 ] &&
    grep -q "rank 0 of 2: pc 5 (ALLREDUCE t1, t0) line 10: MPI_Iallgather: no answer from every rank within 2000 ms (--comm-timeout)" "$T/out"; then
    ok "a rank that never arrives ends every rank after --comm-timeout (${took}s), the waiting instruction named"
else
    bad "timeout: exit $rc after ${took}s: $(cat "$T/out")"
fi

# ---- exchanges past MPI's int counts (over 2 GiB), where the memory is ----
# MPI counts bytes in ints: BROADCAST of a tensor over 2 GiB, an ALLGATHER
# part over 2 GiB and the parts of an ALLREDUCE whose blocks start past 2 GiB
# go in pieces (backends/comm.c). About 9 GB at most (the 4 GiB ALLREDUCE on
# 2 ranks, in place), so the check wants 12 GiB free and no sanitizer. Each
# exchange reads back elements where a piece went wrong would show.
cat >"$T/big.basm" <<'BASM'
; Exit status: bit 0 BROADCAST of 2^29 + 1 elements (2 GiB + 4 bytes) from
; rank 1 wrong; bit 1 ALLGATHER of rank 0's 2^29 + 4 elements and rank 1's 4
; wrong; bit 2 ALLREDUCE in place of 2^30 + 2 elements (4 GiB: rank 1's block
; starts past 2 GiB, the last element (rank + 1) / 2) wrong. Each rank's
; tensors hold rank + 1.
.func main regs=12
    RANK r0
    ADDI r2, r0, 1
    ITOF r2, r2
    LDI r10, 0
    LDI r1, 536870913
    ALLOC t0, f32, r1, 1
    FILL t0, r2
    LDI r3, 1
    BROADCAST t0, r3
    LDI r4, 0
    TGET r5, t0, r4
    FTOI r5, r5
    LDI r4, 536870912
    TGET r6, t0, r4
    FTOI r6, r6
    FREE t0
    JNEI r5, 2, bad_broadcast
    JEQI r6, 2, gather
bad_broadcast:
    ORI r10, r10, 1
gather:
    LDI r1, 536870916
    JEQI r0, 0, mine
    LDI r1, 4
mine:
    ALLOC t1, f32, r1, 1
    FILL t1, r2
    ALLGATHER t2, t1, 0
    LDI r4, 0
    TGET r5, t2, r4
    FTOI r5, r5
    LDI r4, 536870915
    TGET r6, t2, r4
    FTOI r6, r6
    LDI r4, 536870919
    TGET r7, t2, r4
    FTOI r7, r7
    FREE t1
    FREE t2
    JNEI r5, 1, bad_gather
    JNEI r6, 1, bad_gather
    JEQI r7, 2, reduce
bad_gather:
    ORI r10, r10, 2
reduce:
    LDI r1, 1073741826
    ALLOC t3, f32, r1, 1
    FILL t3, r2
    LDI r7, 1073741825
    LDI r8, 2
    ITOF r8, r8
    FDIV r8, r2, r8
    TSET t3, r7, r8
    ALLREDUCE t3, t3
    LDI r4, 0
    TGET r5, t3, r4
    FTOI r5, r5
    LDI r4, 600000000
    TGET r6, t3, r4
    FTOI r6, r6
    TGET r9, t3, r7
    FADD r9, r9, r9
    FTOI r9, r9
    JNEI r5, 3, bad_reduce
    JNEI r6, 3, bad_reduce
    JEQI r9, 3, done
bad_reduce:
    ORI r10, r10, 4
done:
    HALT r10
.end
BASM
free_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo 2>/dev/null)
if [ -n "${BIB_TEST_SANITIZED:-}" ]; then
    echo "SKIP: exchanges over 2 GiB: not under the sanitizer (several GB of shadowed memory)"
elif [ "${free_kb:-0}" -lt $((12 * 1024 * 1024)) ]; then
    echo "SKIP: exchanges over 2 GiB: $((${free_kb:-0} / 1024)) MiB available, 12 GiB wanted"
else
    # About a minute on an idle 2-core machine, over two when it is shared:
    # ten minutes at most, not the other checks' two.
    if timeout 600 ${MPIRUN#timeout 120 } -np 2 $BIB run --max-memory 5G "$T/big.basm" >"$T/out" 2>&1; then
        ok "BROADCAST, ALLGATHER and ALLREDUCE over 2 GiB on 2 ranks (in pieces under MPI's int counts)"
    else
        bad "exchanges over 2 GiB on 2 ranks (exit status bits: 1 BROADCAST, 2 ALLGATHER, 4 ALLREDUCE; 124 the time limit): exit $?: $(cat "$T/out")"
    fi
fi

# ---- traced and profiled like every tensor opcode (alone) ----
cat >"$T/alone.basm" <<'BASM'
.tensor A t0 f32[2] = 1, 2
.func main regs=2
    ALLREDUCE t1, A
    ALLGATHER t2, t1, 0
    LDI r0, 0
    HALT r0
.end
BASM
if $BIB run --trace "$T/alone.basm" 2>&1 | grep -q "ALLREDUCE t1, t0 .*t1=f32\[2\] t0=f32\[2\] on host hash=" &&
    $BIB run --profile "$T/alone.basm" 2>&1 | grep -q "^ALLGATHER  *host  *1 "; then
    ok "collectives are traced (shapes, hash) and profiled"
else
    bad "trace or profile of a collective: $($BIB run --trace --profile "$T/alone.basm" 2>&1)"
fi

# ---- the same binary without MPI ----
if env $LAUNCH_ENV=2 BIB_MPI_LIBRARY=libmpi-absent.so.40 $BIB run "$T/trap.basm" >"$T/out" 2>&1; then
    bad "a missing libmpi under mpirun's environment ran"
elif grep -q "bib: started by mpirun, but libmpi-absent.so.40 could not be loaded" "$T/out"; then
    ok "without libmpi, a run under the launcher's environment ($LAUNCH_ENV) says so (exit 69)"
else
    bad "missing libmpi: $(cat "$T/out")"
fi
# A launcher's variable left over from another job, or an MPI library that
# is not the launcher's: MPI then starts a world of one in each process,
# which must not run as if alone (N runs writing the same outputs).
if env $LAUNCH_ENV=2 $BIB run "$T/trap.basm" >"$T/out" 2>&1; then
    bad "a stale $LAUNCH_ENV=2 ran as a world of one"
elif grep -q "bib: started by mpirun, but $LAUNCH_ENV says 2 ranks while lib.* counts 1: it is not the launcher's MPI library" "$T/out"; then
    ok "a stale $LAUNCH_ENV=2 with a world of one is refused, both counts named"
else
    bad "stale $LAUNCH_ENV: $(cat "$T/out")"
fi
if [ "$FLAVOR" = openmpi ]; then OTHER=libmpich.so.12; else OTHER=libmpi.so.40; fi
if env BIB_MPI_LIBRARY=$OTHER $BIB info | grep -q "^  \$BIB_MPI_LIBRARY: $OTHER: .* ABI"; then
    expect_all "the other launcher's MPI library (each rank a world of one) is refused on every rank" \
        2 69 "bib: started by mpirun, but $LAUNCH_ENV says 2 ranks (this one rank [01]) while $OTHER" \
        env BIB_MPI_LIBRARY=$OTHER $BIB run "$T/trap.basm"
else
    echo "SKIP: the other launcher's library: $OTHER is not installed"
fi
# A library that is not MPI at all, named by $BIB_MPI_LIBRARY.
if env $LAUNCH_ENV=2 BIB_MPI_LIBRARY=libz.so.1 $BIB run "$T/trap.basm" >"$T/out" 2>&1; then
    bad "libz as the MPI library ran"
elif grep -q "bib: started by mpirun, but libz.so.1 has no MPI_Init: not an MPI library" "$T/out"; then
    ok "a library without MPI's entry points is refused by name"
else
    bad "libz as libmpi: $(cat "$T/out")"
fi

finish
