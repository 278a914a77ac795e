#!/bin/sh
# CLI tests for the `bib` command line as a user meets it (spec/cli.md):
# - run prints every output without --output (numpy-style values for small
#   tensors, shape and hash for large ones), nothing with --output=;
# - "-" is stdin for a module or source and stdout for --output NAME=-,
#   asm -o - and dis -o -;
# - help for one command (bib help CMD, bib CMD --help) lists its options
#   only; a misspelt command or option gets the nearest suggested; an option
#   a command does not take is a usage error; dis -o writes there;
# - exit status: a program's exit value in 64..79, negative or above 255 is
#   exit 79, and the exit status table is the same in --help, README.md and
#   spec/cli.md.
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"
# Some checks run in other folders.
case $BIB in /*) ;; */*) BIB=$(pwd)/$BIB ;; esac

# expect NAME RC PATTERN command...: the command exits RC and its stderr
# matches the grep pattern.
expect() {
    name=$1 want=$2 pattern=$3
    shift 3
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    # An empty pattern: stderr is empty.
    if [ $rc -eq "$want" ] && { if [ -z "$pattern" ]; then [ ! -s "$T/err" ]; else grep -q -- "$pattern" "$T/err"; fi; }; then
        ok "$name"
    else
        bad "$name: exit $rc (want $want): $(cat "$T/err")"
    fi
}

# same NAME FILE: stdout ($T/out) is exactly FILE
same() {
    if cmp -s "$T/out" "$2"; then ok "$1"; else bad "$1: got $(head -c 300 "$T/out")"; fi
}

cat >"$T/out.basm" <<'EOF'
.tensor w t0 f32[2, 3] = 1, 2.5, -3, 0.1, 1e-8, 100
.tensor k t1 i32[4] = 1, -2, 30, 4
.output y t2 f32[2, 3]
.output ids t3 i32[4]
.output big t4
.func main regs=4
    COPY t2, w
    COPY t3, k
    LDI r1, 32
    LDI r2, 32
    ALLOC t4, f32, r1, 2
    LDI r0, 7
    HALT r0
.end
EOF

# ---- outputs ----------------------------------------------------------------

cat >"$T/printed" <<'EOF'
y: f32[2,3]
[[   1.   2.5   -3.]
 [  0.1 1e-08  100.]]
ids: i32[4]
[ 1 -2 30  4]
big: f32[32,32] hash=38da53105b7913c6 (1024 elements; --output big=PATH.npy saves them)
EOF
expect "run without --output exits with the program's value" 7 "" $BIB run "$T/out.basm"
same "run without --output prints every output, small ones whole, large ones as shape and hash" "$T/printed"
printf '.tensor c t0 f32[2, 2, 2] = 1, 2, 3, 4, 5, 6, 7, 8\n.output a t1\n.func main regs=1\n    COPY t1, t0\n    HALT r0\n.end\n' >"$T/r3.basm"
printf 'a: f32[2,2,2]\n[[[1. 2.]\n  [3. 4.]]\n\n [[5. 6.]\n  [7. 8.]]]\n' >"$T/r3.want"
expect "a rank-3 output prints" 0 "" $BIB run "$T/r3.basm"
same "a rank-3 output prints nested as numpy does" "$T/r3.want"
# The hash printed is THASH's: the same module's THASH of the tensor agrees.
printf '.output big t4\n.func main regs=4\n    LDI r1, 32\n    LDI r2, 32\n    ALLOC t4, f32, r1, 2\n    THASH r0, t4\n    HALT r3\n.end\n' >"$T/hash.basm"
if $BIB run --trace "$T/hash.basm" >"$T/out" 2>"$T/err" &&
    grep -q "hash=38da53105b7913c6" "$T/out" && grep -q "0x38da53105b7913c6" "$T/err"; then
    ok "the printed hash is what THASH gives"
else
    bad "the printed hash is what THASH gives: $(cat "$T/out" "$T/err" | head -5)"
fi
expect "--output= prints no output" 7 "" $BIB run --output= "$T/out.basm"
if [ ! -s "$T/out" ]; then ok "--output= leaves stdout empty"; else bad "--output= printed: $(cat "$T/out")"; fi
expect "--output= with another --output is a usage error" 64 "contradict" \
    $BIB run --output= --output y="$T/y.npy" "$T/out.basm"
expect "--output NAME=PATH writes that output and prints none" 7 "" \
    $BIB run --output y="$T/y.npy" "$T/out.basm"
if [ ! -s "$T/out" ] && [ -s "$T/y.npy" ]; then ok "--output NAME=PATH prints nothing"; else bad "--output NAME=PATH printed $(cat "$T/out")"; fi

# ---- "-": stdin and stdout --------------------------------------------------

rm -f ./-
expect "run - reads the source from stdin" 7 "" sh -c "$BIB run - <'$T/out.basm'"
same "run - prints the outputs of the source read from stdin" "$T/printed"
$BIB asm "$T/out.basm" -o "$T/out.bib" 2>"$T/err" || bad "asm: $(cat "$T/err")"
expect "run - reads a module from stdin" 7 "" sh -c "$BIB run - <'$T/out.bib'"
same "run - of a module prints the same outputs" "$T/printed"
expect "run - is capped like every reader" 71 "larger than the file size cap of 1024 bytes" \
    sh -c "head -c 5000 /dev/zero | $BIB run --max-file-size 1K -"
expect "--output NAME=- writes the .npy to stdout" 7 "" \
    sh -c "$BIB run --output y=- '$T/out.basm'"
if [ -e ./- ]; then bad "--output y=- created a file named -"; rm -f ./-; fi
$PY -c "
import io, sys, numpy as np
a = np.load(io.BytesIO(open('$T/out', 'rb').read()))
want = np.array([[1, 2.5, -3], [0.1, 1e-8, 100]], dtype=np.float32)
sys.exit(0 if a.dtype == np.float32 and (a == want).all() else 1)
" && ok "--output y=- is the .npy numpy reads" || bad "--output y=- is not y's .npy: $(od -c "$T/out" | head -3)"
expect "two outputs to stdout are refused" 64 "same file" \
    $BIB run --output y=- --output ids=- "$T/out.basm"
expect "asm -o - writes the module to stdout" 0 "" $BIB asm "$T/out.basm" -o -
same "asm -o - gives the bytes asm -o FILE gives" "$T/out.bib"
expect "asm - -o FILE assembles stdin" 0 "" sh -c "$BIB asm - -o '$T/stdin.bib' <'$T/out.basm'"
expect "asm - without -o is a usage error naming -o" 64 "give -o OUT.bib" sh -c "$BIB asm - <'$T/out.basm'"
expect "dis - reads the module from stdin" 0 "" sh -c "$BIB dis - <'$T/out.bib'"
grep -q "COPY" "$T/out" && ok "dis - prints the text" || bad "dis - printed: $(cat "$T/out")"

# ---- help and option checking -----------------------------------------------

for cmd in run asm dis test repl info bench; do
    $BIB help $cmd >"$T/help1" 2>"$T/err"
    rc=$?
    $BIB $cmd --help >"$T/help2" 2>>"$T/err"
    if [ $rc -eq 0 ] && grep -q "^usage: bib $cmd" "$T/help1" && cmp -s "$T/help1" "$T/help2"; then
        ok "bib help $cmd and bib $cmd --help print $cmd's usage"
    else
        bad "bib help $cmd: exit $rc: $(head -3 "$T/help1") $(cat "$T/err")"
    fi
done
$BIB help dis >"$T/help"
if grep -q -- "--output OUT" "$T/help" && ! grep -q -- "--fuel\|--input\|--json" "$T/help"; then
    ok "dis's help lists its options only"
else
    bad "dis's help: $(cat "$T/help")"
fi
$BIB help info >"$T/help"
grep -q -- "--json" "$T/help" && ! grep -q -- "--coverage" "$T/help" &&
    ok "info's help lists --json and not test's --coverage" || bad "info's help: $(cat "$T/help")"
expect "a misspelt command gets the nearest suggested" 64 "unknown command 'rnu'; did you mean run?" $BIB rnu x.bib
expect "bib help of a misspelt command suggests too" 64 "did you mean asm?" $BIB help ams
expect "a misspelt option gets the nearest suggested" 64 "unknown option '--fule' for run; did you mean --fuel?" \
    $BIB run --fule 3 "$T/out.basm"
expect "an option of another command is a usage error naming both" 64 "info does not take --coverage (an option of test" \
    $BIB info --coverage --fuel 5
expect "run does not take --json" 64 "run does not take --json" $BIB run --json "$T/out.basm"
expect "test does not take -o" 64 "test does not take the option '-o'" $BIB test -o x tests/hex
# A value given to a flag (--NAME=VALUE) is refused naming the flag.
expect "--json=VALUE: --json takes no value" 64 "^bib: --json takes no value$" $BIB info --json=foo
expect "--help=VALUE: --help takes no value" 64 "^bib: --help takes no value$" $BIB info --help=x
expect "--validation=VALUE: --validation takes no value" 64 "^bib: --validation takes no value$" \
    $BIB run --validation=yes "$T/out.basm"
expect "--strip=VALUE: --strip takes no value" 64 "^bib: --strip takes no value$" \
    $BIB asm --strip=1 "$T/out.basm" -o "$T/s.bib"
expect "--quick=VALUE, abbreviated: --quick takes no value" 64 "^bib: --quick takes no value$" \
    $BIB bench --qui=2
expect "a flag of another command with a value still names the owner" 64 "run does not take --json" \
    $BIB run --json=1 "$T/out.basm"
expect "dis -o writes the text there" 0 "" $BIB dis "$T/out.bib" -o "$T/dis.basm"
if [ ! -s "$T/out" ] && grep -q "COPY" "$T/dis.basm"; then ok "dis -o leaves stdout empty"; else bad "dis -o: $(head -3 "$T/out")"; fi
expect "dis -o onto the module itself is refused" 64 "is the module" $BIB dis "$T/out.bib" -o "$T/out.bib"
expect "--threads above the executor's limit is refused at once, naming the limit" 64 "from 1 to 256" \
    $BIB run --threads 257 "$T/out.basm"
expect "--threads at the limit is accepted" 7 "" $BIB run --threads 256 "$T/out.basm"
$BIB help run | grep -q -- "--threads N .*1 to 256" && ok "--threads' help gives the limit the run enforces" ||
    bad "--threads help: $($BIB help run | grep threads)"

# ---- exit status ------------------------------------------------------------

halt() { printf '.func main regs=1\n    LDI64 r0, %s\n    HALT r0\n.end\n' "$1" >"$T/halt.basm"; }
for v in 0 63 80 255; do
    halt $v
    expect "HALT $v exits $v" $v "" $BIB run "$T/halt.basm"
done
for v in 64 70 73 79 256 -1 4294967296; do
    halt $v
    expect "HALT $v exits 79 and says why" 79 "exit value $v is not one bib passes on (0-63, 80-255): exit status 79" \
        $BIB run "$T/halt.basm"
done
# The table: each code of --help's table is a row of README.md's and
# spec/cli.md's, with none more.
$BIB --help | sed -n '/^exit status/,$p' | grep -o '^  [0-9][0-9-]*\(, [0-9-]*\)\?' | tr -d ' ' >"$T/codes.help"
for doc in README.md spec/cli.md; do
    sed -n '/^| exit status |/,/^$/p' "$doc" | grep -o '^| [0-9][0-9, -]* |' | tr -d '| ' >"$T/codes.doc"
    if [ -s "$T/codes.help" ] && cmp -s "$T/codes.help" "$T/codes.doc"; then
        ok "$doc's exit status table has the codes of --help's: $(tr '\n' ' ' <"$T/codes.help")"
    else
        bad "$doc's exit status table: $(tr '\n' ' ' <"$T/codes.doc") vs --help's $(tr '\n' ' ' <"$T/codes.help")"
    fi
done
$BIB --help | grep -q "^  73 " && ok "--help's table has 73" || bad "--help has no 73"

# ---- running a function with arguments -------------------------------------

cat >"$T/fn.basm" <<'EOF2'
.func main regs=1
    LDI r0, 3
    HALT r0
.end
.func fib args=1 regs=4
    LDI      r1, 2
    JLT      r0, r1, small
    ADDI     r1, r0, -1
    CALL     r2, fib, r1, 1
    ADDI     r1, r0, -2
    CALL     r3, fib, r1, 1
    ADD      r0, r2, r3
small:
    RET      r0
.end
.func axpy args=3 regs=4
    FMUL r3, r0, r1
    FADD r3, r3, r2
    HOSTCALL r0, print_f64, r3, 1
    FTOI r3, r3
    RET r3
.end
EOF2
expect "--function NAME -- ARG runs that function" 0 "" $BIB run "$T/fn.basm" --function fib -- 20
printf '6765\n' >"$T/want"
same "--function prints what the function returns" "$T/want"
expect "integer and float ARGs go to the registers as i64 and f64" 0 "" \
    $BIB run "$T/fn.basm" --function axpy -- 2.5 4.0 -0.5
printf '9.5\n9\n' >"$T/want"
same "axpy(2.5, 4.0, -0.5) prints 9.5 and returns 9" "$T/want"
expect "a negative and a hex ARG are integers" 0 "" $BIB run "$T/fn.basm" --function fib -- 0x0a
printf '55\n' >"$T/want"
same "fib(0x0a) is 55" "$T/want"
expect "a wrong ARG count is a usage error naming the signature" 64 \
    "function fib takes 1 argument (.func fib args=1), not 2" $BIB run "$T/fn.basm" --function fib -- 1 2
expect "an ARG that is not a number is a usage error naming the signature" 64 \
    "ARG 1 'ten' is not an integer (42, -7, 0x2a) or a number (2.5, 1e-3); fib takes 1 argument (.func fib args=1)" \
    $BIB run "$T/fn.basm" --function fib -- ten
expect "an ARG past 64 bits is named as out of range, not read as another number" 64 \
    "ARG 1 '99999999999999999999' is outside the range of a 64-bit integer and of an f64" \
    $BIB run "$T/fn.basm" --function fib -- 99999999999999999999
expect "an ARG past the f64 range is refused, not taken as inf" 64 \
    "ARG 1 '1e999' is outside the range of a 64-bit integer and of an f64" \
    $BIB run "$T/fn.basm" --function fib -- 1e999
expect "--max-depth names its range" 64 "--max-depth takes a frame count from 1 to 4294967295, not '4294967296'" \
    $BIB run "$T/fn.basm" --max-depth 4294967296
expect "an unknown function is a usage error listing the module's" 64 \
    "no function 'fob' in the module (its functions: main, fib, axpy)" $BIB run "$T/fn.basm" --function fob
expect "ARGs without --function: the entry takes none" 64 "the entry function takes no arguments" \
    $BIB run "$T/fn.basm" -- 1
expect "without ARGs the entry function runs as before" 3 "" $BIB run "$T/fn.basm"
expect "ARGs go only to run" 64 "dis takes no ARGs" $BIB dis "$T/out.bib" -- 1
printf '.func sq args=1 regs=2\n    MUL r1, r0, r0\n    RET r1\n.end\nLDI r5, 9\n:call sq 7\n:call sq\n:regs\n' >"$T/call.repl"
$BIB repl <"$T/call.repl" >"$T/out" 2>&1
if grep -q "^sq = 49 (0x31)$" "$T/out" && grep -q "function sq takes 1 argument (.func sq args=1), not 0" "$T/out" &&
    grep -q "^r5 = 9 " "$T/out"; then
    ok "repl :call runs a function by name and keeps the session's registers"
else
    bad "repl :call: $(cat "$T/out")"
fi

# ---- REPL completion --------------------------------------------------------

printf '.func sq args=1 regs=2\n    MUL r1, r0, r0\n    RET r1\n.end\nLDI r12, 1\nloop:\n.tensor weights t3 f32[2] = 1, 2\n:complete AD\n:complete ADD r1, r1\n:complete JMP lo\n:complete CALL r0, s\n:complete :b\n:complete :tensor we\n:complete .fu\n' >"$T/complete.repl"
$BIB repl <"$T/complete.repl" >"$T/out" 2>&1
printf 'r12 = 1 (0x1)\nADD\nADDI\nr1\nr10\nr11\nr12\nr13\nr14\nr15\nloop\nsq\n:backend\n:break\n:bt\nweights\n.func\n' >"$T/want"
same "Tab completes opcodes, registers, labels, functions, commands, tensor names and directives" "$T/want"
$PY tests/cli/repl_tab.py "$BIB" "$T/cache" >"$T/out" 2>&1
grep -q "halted: exit value 41" "$T/out" && ok "Tab on a terminal completes HAL to HALT (libedit)" ||
    bad "Tab on a terminal: $(cat -A "$T/out" | head -5)"

# ---- REPL: a line is spliced, not the session assembled again --------------

# An instruction typed into main is spliced into the module instead of the
# whole session being assembled again. BIB_REPL_CHECK=1 assembles the whole
# session too and says if the bytes differ; the transcript is the one whole
# reassembly gave (constants, imports, labels, loops, calls, tensors, traps).
BIB_REPL_CHECK=1 $BIB repl <tests/cli/repl_splice.in >"$T/out" 2>&1
same "spliced lines give the module and transcript whole reassembly gives" tests/cli/repl_splice.want
# Random sessions (tests/cli/repl_random.py: arithmetic, constants, labels,
# loops, calls, imports, tensors, traps, refused lines, new functions) give
# the same transcript spliced as with every line taking the whole-session
# path (BIB_REPL_CHECK=whole), and each spliced module is the session's.
for seed in 1 2 3 4 5 6 7 8; do
    $PY tests/cli/repl_random.py $seed 1000 >"$T/random.repl"
    BIB_REPL_CHECK=1 $BIB repl <"$T/random.repl" >"$T/random.splice" 2>&1
    BIB_REPL_CHECK=whole $BIB repl <"$T/random.repl" >"$T/random.whole" 2>&1
    if grep -q "differs" "$T/random.splice" || ! cmp -s "$T/random.splice" "$T/random.whole"; then
        bad "random REPL session $seed: spliced and whole differ: $(diff "$T/random.splice" "$T/random.whole" | head -3) $(grep differs "$T/random.splice" | head -1)"
        break
    fi
    [ $seed = 8 ] && ok "8 random REPL sessions of 1000 lines: spliced lines give the transcripts and modules of whole reassembly"
done
# A line costs the same however long the session: the VM takes a spliced
# line with bib_vm_extend, which verifies and decodes only what the line
# adds, so piped lines cost time linear in their number. Three sessions:
# one of instructions, labels, loops and constants; one of tensor
# instructions with scalar ones between; one of a new constant on every
# line (found in the pool through its index, not by a search); one of calls
# of 100 functions (each line's probe holds a stand-in for the function it
# names, not every function's body). 4 times the lines take about 4 times
# the CPU (a reload per line made it 16). BIB_REPL_CHECK=1 on 1500 lines of each
# compares each line's module with the whole session assembled. (A line
# that branches in a session naming tensor registers checks their liveness
# over main again, in time linear in main: not timed here.)
for n in 1500 12000 48000; do
    $PY -c "
n = $n
print('LDI r1, 0')
print('LDI r2, 3')
for i in range(n):
    if i % 10 == 0: print('l%d:' % i)
    print('LDK r3, =%d.5' % i if i % 7 == 0 else 'ADDI r1, r1, %d' % (i % 5))
    if i % 10 == 9: print('JLT r1, r2, l%d' % (i - 9))
" >"$T/long$n.repl"
    $PY -c "
n = $n
print('.tensor w t1 f32[2] = 1, 2')
for i in range(n):
    print(('TADD t2, t1, t1', 'THASH r4, t2', 'ADDI r1, r1, 1')[i % 3])
" >"$T/tensor$n.repl"
    $PY -c "
for i in range($n):
    print('LDK r%d, =%d.25' % (1 + i % 3, i))
" >"$T/const$n.repl"
    $PY -c "
for f in range(100):
    print('.func g%d args=1 regs=2' % f)
    print('    ADDI r1, r0, %d' % f)
    print('    RET r1')
    print('.end')
for i in range($n):
    print('CALLR r4, r3, r1, 1' if i % 4 == 3 else ('CALL r2, g%d, r1, 1', 'ADDI r1, r1, %d', 'FNREF r3, g%d')[i % 4] % (i % 100))
" >"$T/calls$n.repl"
done
for s in long tensor const calls; do
    BIB_REPL_CHECK=1 $BIB repl <"$T/${s}1500.repl" >"$T/out.check" 2>&1
    if grep -q "differs\|error" "$T/out.check"; then
        bad "REPL lines spliced ($s): $(grep "differs\|error" "$T/out.check" | head -1)"
    else
        ok "1500 REPL lines ($s session) each give the module of the whole session"
    fi
done
if [ -x /usr/bin/time ]; then
    for s in long tensor const calls; do
        for n in 12000 48000; do
            /usr/bin/time -f "%U %S" -o "$T/time.$n" $BIB repl <"$T/$s$n.repl" >"$T/out.$n" 2>&1
        done
        if ! grep -q "error" "$T/out.48000" && $PY -c "
t = [sum(map(float, open('$T/time.%d' % n).readlines()[-1].split())) for n in (12000, 48000)]
print('12000 lines: %.2fs of CPU; 48000: %.2fs' % tuple(t))
exit(0 if t[1] < 8 * max(t[0], 0.02) else 1)" >"$T/cost"; then
            ok "REPL lines ($s session) cost the same however long the session: $(cat "$T/cost")"
        else
            bad "REPL lines ($s session) cost more as it grows: $(cat "$T/cost") $(grep error "$T/out.48000" | head -1)"
        fi
    done
else
    echo "SKIP REPL line cost: no /usr/bin/time"
fi

# ---- bib bench FILE ---------------------------------------------------------

$PY tools/make-npy.py "$T/mlp" >/dev/null
MLP="--input x=$T/mlp/x.npy --input W1=$T/mlp/W1.npy --input b1=$T/mlp/b1.npy --input W2=$T/mlp/W2.npy --input b2=$T/mlp/b2.npy"
# shellcheck disable=SC2086
expect "bench FILE times the user's module" 0 "" $BIB bench examples/mlp.basm $MLP --repetitions 7 --warmup 2 --format json
if $PY -c "
import json, sys
r = json.load(open('$T/out'))
assert r['file'] == 'examples/mlp.basm' and r['repetitions'] == 7 and r['warmup'] == 2, r
assert len(r['times_ms']) == 7 and all(t > 0 for t in r['times_ms']), r
assert r['min_ms'] == min(r['times_ms']) and r['max_ms'] == max(r['times_ms']), r
assert r['min_ms'] <= r['median_ms'] <= r['max_ms'], r
ops = {(p['op'], p['executor']): p for p in r['profile']}
assert ops[('LINEAR_RELU', 'cpu')]['count'] == 1 and ops[('LINEAR_RELU', 'cpu')]['flops'] == 2 * 8 * 96 * 64, ops
assert ops[('FREE', 'host')]['count'] == 2, ops
" 2>"$T/err"; then ok "bench --format json: every run, min/median/max and the per-opcode rows"; else bad "bench json: $(cat "$T/err")"; fi
# shellcheck disable=SC2086
$BIB bench examples/mlp.basm $MLP --repetitions 3 >"$T/out" 2>"$T/err"
grep -q "^| 3 | [0-9.]* | [0-9.]* | [0-9.]* |$" "$T/out" && grep -q "^| LINEAR_RELU | cpu | 1 |" "$T/out" &&
    ok "bench FILE's Markdown: the runs' row and the opcode rows" || bad "bench md: $(cat "$T/out" "$T/err")"
# shellcheck disable=SC2086
$BIB bench examples/mlp.basm $MLP --repetitions 3 --format csv -o "$T/bench.csv" >"$T/out" 2>"$T/err"
if [ ! -s "$T/out" ] && head -1 "$T/bench.csv" | grep -q "^kind,name,executor,count,min_ms,median_ms,max_ms" &&
    grep -q "^run,examples/mlp.basm,cpu,3," "$T/bench.csv" && grep -q "^op,LINEAR,cpu,1," "$T/bench.csv"; then
    ok "bench --format csv -o PATH writes the CSV there"
else
    bad "bench csv: $(cat "$T/bench.csv" "$T/err")"
fi
expect "bench FILE without its inputs names them" 64 "input 'x' (f32\[n,d\]) was not given" $BIB bench examples/mlp.basm
printf '.func main regs=2\n    LDI r0, 1\n    LDI r1, 0\n    DIV r0, r0, r1\n    HALT r0\n.end\n' >"$T/trap.basm"
expect "bench of a module that traps says which run, exit 70" 70 "warmup run 1: trap" $BIB bench "$T/trap.basm"
expect "--format takes md, csv or json" 64 "--format takes md, csv or json, not 'xml'" $BIB bench "$T/trap.basm" --format xml
expect "--repetitions 0 is refused" 64 "--repetitions takes a count from 1" $BIB bench "$T/trap.basm" --repetitions 0
expect "the FILE options without FILE are a usage error" 64 "are for bench FILE" $BIB bench --repetitions 3
expect "--backend without FILE is a usage error (the workloads run every executor)" 64 \
    "^bib: --backend is for bench FILE" $BIB bench --quick --backend cpu
mkdir -p "$T/benchdir"
expect "bench -o DIR whose parent is missing is refused, exit 73" 73 "cannot create" \
    $BIB bench --quick -o "$T/benchdir/missing/dir"
[ ! -e "$T/benchdir/missing" ] && ok "bench -o creates no missing parent" || bad "bench -o created $T/benchdir/missing"

# The workloads' chart: a log axis, values on the bars, a subtitle naming
# each executor's device, the machine and the date, labels kept in the frame.
if command -v gnuplot >/dev/null 2>&1; then
    if timeout 600 $BIB bench --quick -o "$T/bench" >"$T/out" 2>"$T/err" || [ -s "$T/bench/chart.gp" ]; then
        gp="$T/bench/chart.gp"
        grep -q "^set logscale y$" "$gp" && ok "the chart's axis is logarithmic" || bad "no log axis: $(head -20 "$gp")"
        grep -q "with labels" "$gp" && ok "the chart writes each value on its bar" || bad "no values on the bars"
        grep -q "^set title .*\\ncpu: .*machine .*, [0-9-]* [0-9:]* UTC" "$gp" &&
            ok "the subtitle names the cpu, the machine and the date" || bad "subtitle: $(grep title "$gp")"
        if grep -q "^| matmul-128 | [0-9.]* | [0-9.]* ([0-9.]*) | [0-9.]* ([0-9.]*) |" "$T/out" && grep -qi "llvmpipe" "$gp"; then
            grep -q "vulkan: llvmpipe.*(CPU, software Vulkan)" "$gp" && ok "lavapipe is named as CPU, software Vulkan" ||
                bad "lavapipe subtitle: $(grep title "$gp")"
        fi
        grep -q "rotate by 25 right" "$gp" && grep -q "^set rmargin" "$gp" &&
            ok "x labels end at their tick, inside the frame" || bad "x labels: $(grep xtics "$gp")"
        (cd "$T/bench" && cp chart.png first.png && gnuplot chart.gp && cmp -s chart.png first.png) &&
            ok "cd DIR && gnuplot chart.gp redraws the same chart" || bad "chart.gp does not redraw chart.png"
    else
        bad "bench --quick: $(tail -3 "$T/err")"
    fi
else
    echo "SKIP the bench chart: gnuplot is not installed"
fi

# ---- reproducible modules ---------------------------------------------------

mkdir -p "$T/src"
cp examples/fib.basm "$T/src/fib.basm"
(cd "$T" && $BIB asm src/fib.basm -o a.bib && $BIB dis a.bib >a.dis) 2>"$T/err"
grep -q "^.source \"src/fib.basm\"$" "$T/a.dis" && ok ".source records the path as given, relative stays relative" ||
    bad ".source: $(grep source "$T/a.dis") $(cat "$T/err")"
(cd "$T" && $BIB asm src/fib.basm -o b.bib) && cmp -s "$T/a.bib" "$T/b.bib" &&
    ok "the same source by the same path gives the same bytes" || bad "two assemblies of one source differ"
(cd "$T" && $BIB asm --strip src/fib.basm -o s1.bib && cd src && $BIB asm --strip ./fib.basm -o ../s2.bib) 2>"$T/err"
if cmp -s "$T/s1.bib" "$T/s2.bib"; then ok "asm --strip: one source by two paths gives the same bytes"; else bad "--strip by two paths: $(cat "$T/err")"; fi
$BIB dis "$T/s1.bib" >"$T/s.dis"
if ! grep -q "^.source\|\.line\|small" "$T/s.dis" && grep -q "^.nodebug$" "$T/s.dis" && grep -q "JLTI     r0, 2, L10" "$T/s.dis"; then
    ok "asm --strip drops .source, .line and the label names"
else
    bad "asm --strip left: $(grep -n "source\|line\|small" "$T/s.dis" | head -3)"
fi
[ "$(wc -c <"$T/s1.bib")" -lt "$(wc -c <"$T/a.bib")" ] && ok "a stripped module is smaller" || bad "stripped is not smaller"
if grep -q "^small:$" "$T/a.dis" && grep -q "JLTI     r0, 2, small$" "$T/a.dis"; then
    ok "dis keeps the label names"
else
    bad "dis lost the label names: $(grep -n "JLT" "$T/a.dis")"
fi
$BIB asm "$T/a.dis" -o "$T/a2.bib" 2>"$T/err" && cmp -s "$T/a.bib" "$T/a2.bib" &&
    ok "dis output with label names reassembles to the same bytes" || bad "dis/asm round trip: $(cat "$T/err")"
$BIB dis "$T/s1.bib" -o "$T/s.basm" && $BIB asm "$T/s.basm" -o "$T/s3.bib" && cmp -s "$T/s1.bib" "$T/s3.bib" &&
    ok "a stripped module's text reassembles to the same bytes" || bad "stripped round trip"
expect "run of a stripped module gives the same result" 0 "" $BIB run "$T/s1.bib"
printf '2178309\n' >"$T/want"
same "the stripped fib prints fib(32)" "$T/want"
$PY - "$T/a.bib" "$T/bad.bib" <<'EOF2'
# Rename the label 'small' to 'L5000' (a generated name) and fix the checksum.
import sys, struct, zlib
b = bytearray(open(sys.argv[1], 'rb').read())
i = b.index(b'small')
b[i:i + 5] = b'L5000'
b[24:28] = b'\0\0\0\0'
b[24:28] = struct.pack('<I', zlib.crc32(bytes(b)) & 0xffffffff)
open(sys.argv[2], 'wb').write(bytes(b))
EOF2
expect "a module whose labels break the rules is refused at load, naming the label" 65 \
    "label 0 'L5000' at pc 10 has the form L<number>" $BIB run "$T/bad.bib"

finish
