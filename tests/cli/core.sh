#!/bin/sh
# CLI tests for the core: examples, exit codes, malformed modules, asm/dis round trip.
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"

# expect_out NAME WANT CMD...: stdout equals WANT and the exit status is 0
expect_out() {
    name=$1 want=$2
    shift 2
    got=$("$@" 2>"$T/err")
    rc=$?
    if [ $rc -eq 0 ] && [ "$got" = "$want" ]; then ok "$name"; else
        bad "$name: exit $rc, stdout '$got', stderr '$(cat "$T/err")'"
    fi
}
# expect_fail NAME CODE PATTERN CMD...: exits with CODE and stderr matches PATTERN (one line)
expect_fail() {
    name=$1 code=$2 pattern=$3
    shift 3
    "$@" >/dev/null 2>"$T/err"
    rc=$?
    lines=$(wc -l <"$T/err")
    if [ $rc -eq "$code" ] && grep -q -- "$pattern" "$T/err" && [ "$lines" -ge 1 ]; then ok "$name"; else
        bad "$name: exit $rc (want $code), stderr: $(cat "$T/err")"
    fi
}

expect_out "hello prints" "Hello, world!" $BIB run examples/hello.basm
expect_out "loop prints the sum" 4999999950000000 $BIB run examples/loop.basm
expect_out "fib(32)" 2178309 $BIB run examples/fib.basm
expect_out "sieve counts primes" 664579 $BIB run examples/sieve.basm

# asm -> .bib -> run, and dis -> asm gives the same bytes
for ex in hello fib sieve loop; do
    if $BIB asm examples/$ex.basm -o "$T/$ex.bib" && $BIB dis "$T/$ex.bib" >"$T/$ex.dis.basm" &&
        $BIB asm "$T/$ex.dis.basm" -o "$T/$ex.again.bib" && cmp -s "$T/$ex.bib" "$T/$ex.again.bib"; then
        ok "asm/dis/asm round trip of $ex"
    else
        bad "asm/dis/asm round trip of $ex"
    fi
done
expect_out "run a .bib file" 2178309 $BIB run "$T/fib.bib"

# A '.bss' reservation costs no bytes on disk: 1 MiB reserved and written,
# a module of a few hundred bytes, whose disassembly reassembles to it.
cat >"$T/bss.basm" <<'EOF'
.equ MB, 1048576
.equ LAST, MB-8
buf: .bss MB
.func main regs=3
    LDI      r0, buf
    LOAD     r1, r0, LAST           ; reads as zero
    ADDI     r1, r1, 7
    STORE    r1, r0, LAST
    LOAD     r1, r0, LAST           ; and keeps what is written
    HOSTCALL r2, print_i64, r1, 1
    HALT     r2
.end
EOF
if $BIB asm "$T/bss.basm" -o "$T/bss.bib" && [ "$(wc -c <"$T/bss.bib")" -lt 1024 ] &&
    [ "$($BIB run "$T/bss.bib")" = 7 ] && $BIB dis "$T/bss.bib" >"$T/bss.dis.basm" &&
    grep -q "^.memory 1048576$" "$T/bss.dis.basm" &&
    $BIB asm "$T/bss.dis.basm" -o "$T/bss.again.bib" && cmp -s "$T/bss.bib" "$T/bss.again.bib"; then
    ok "a 1 MiB .bss module is $(wc -c <"$T/bss.bib") bytes, runs, and round-trips through dis"
else
    bad "1 MiB .bss module: $(ls -l "$T"/bss* 2>&1)"
fi
cp examples/fib.basm "$T/plain.basm"
if $BIB asm "$T/plain.basm" && [ "$($BIB run "$T/plain.bib")" = 2178309 ]; then
    ok "asm without -o writes the module beside the source, .basm replaced by .bib"
else bad "asm without -o: $(ls "$T")"; fi
expect_fail "asm of a module is refused, not parsed as text" 65 "fib.bib is a .bib module already" \
    $BIB asm "$T/fib.bib" -o "$T/twice.bib"
expect_out "embedding: a host program emits bytecode through the builder and runs it" \
    "sum of squares 1..10 = 385
host saw 385, exit value 385" ${EMBED:-build/embed}

# Malformed modules: one error line, exit 65 (below 128, never a signal)
size=$(wc -c <"$T/fib.bib")
n=0
worst=0
for cut in 0 1 4 8 16 31 32 40 47 48 63 64 100 $((size / 2)) $((size - 5)) $((size - 1)); do
    [ "$cut" -lt "$size" ] || continue
    head -c "$cut" "$T/fib.bib" >"$T/cut.bib"
    $BIB run "$T/cut.bib" >/dev/null 2>"$T/err"
    rc=$?
    if [ $rc -ne 65 ] || [ "$(wc -l <"$T/err")" -ne 1 ]; then
        worst=$rc
        echo "  truncated to $cut bytes: exit $rc: $(cat "$T/err")"
    fi
    n=$((n + 1))
done
[ $worst -eq 0 ] && ok "truncated modules ($n lengths) give one error line and exit 65" || bad "truncated modules"

# every bit of the header and of some code bytes flipped
"${PYTHON:-/usr/bin/python3}" - "$T/fib.bib" "$T" <<'PY' || true
import sys
src = open(sys.argv[1], "rb").read()
for i, pos in enumerate(list(range(0, min(64, len(src)))) + list(range(64, len(src), max(1, len(src) // 40)))):
    for bit in (0, 3, 7):
        b = bytearray(src); b[pos] ^= 1 << bit
        open("%s/flip_%d_%d.bib" % (sys.argv[2], pos, bit), "wb").write(b)
PY
bad_flip=0
count=0
for f in "$T"/flip_*.bib; do
    timeout 10 $BIB run "$f" >/dev/null 2>"$T/err"
    rc=$?
    count=$((count + 1))
    # A flip in the checksum-covered file must be caught at load time.
    if [ $rc -ne 65 ]; then bad_flip=$((bad_flip + 1)); echo "  $(basename "$f"): exit $rc: $(head -c 200 "$T/err")"; fi
done
[ $bad_flip -eq 0 ] && ok "bit-flipped modules ($count) are rejected at load with exit 65" || bad "bit-flipped modules: $bad_flip of $count not rejected cleanly"

expect_fail "unknown command" 64 "unknown command" $BIB frobnicate
expect_fail "an unknown option is named in one line" 64 "^bib: unknown or ambiguous option '--bogus' for run (bib help run lists its options)$" \
    $BIB run --bogus examples/fib.basm
expect_fail "an option without its value is named" 64 "^bib: option '--fuel' needs a value" $BIB run examples/fib.basm --fuel
if [ "$($BIB run --bogus examples/fib.basm 2>&1 | wc -l)" -eq 1 ]; then ok "a usage error is one line, not the help"; else bad "a usage error prints more than one line"; fi
printf 'not a module' >"$T/text.bin"
$BIB dis "$T/text.bin" 2>"$T/err" >/dev/null
if [ $? -eq 65 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "not a .bib file" "$T/err"; then ok "dis of a non-module: one error line"; else bad "dis of a non-module: $(cat "$T/err")"; fi
expect_fail "missing file" 66 "cannot open" $BIB run "$T/does-not-exist.bib"
expect_fail "bad --fuel" 64 "fuel" $BIB run --fuel=abc examples/fib.basm
expect_fail "fuel exhausted traps" 70 "fuel" $BIB run --fuel 1000 examples/loop.basm
expect_fail "memory cap" 71 "memory" $BIB run --max-memory 1M examples/sieve.basm
expect_fail "the memory cap says how to raise it" 71 "bib's --max-memory raises it" $BIB run --max-memory 1M examples/sieve.basm
expect_fail "bench FILE takes the memory cap" 71 "memory cap reached" $BIB bench --max-memory 1M examples/sieve.basm
if $BIB bench --max-memory 64M --repetitions 1 examples/sieve.basm >/dev/null; then ok "bench FILE runs under a cap it fits"; else bad "bench --max-memory 64M of sieve failed"; fi
expect_fail "bench without FILE refuses --max-memory" 64 "are for bench FILE" $BIB bench --quick --max-memory 1M
printf '.func main regs=1\n    ADDD r0, r0\n    FOO\n.end\n' >"$T/bad.basm"
expect_fail "assembly errors name file:line:col" 65 "bad.basm:2:5: error" $BIB run "$T/bad.basm"
if $BIB run "$T/bad.basm" 2>&1 | grep -q "bad.basm:3:5: error"; then ok "every assembly error is reported in one pass"; else bad "second assembly error not reported"; fi

# bib test on malformed and failing case files: one FAIL line each, naming
# the file and what is wrong; the summary counts them; exit 1.
mkdir -p "$T/hx"
printf 'too few words\n-- raw\n00010003 00000001 00000001 00000000\n-- result\n1\n' >"$T/hx/a.hex"
printf 'no program\n' >"$T/hx/b.hex"
printf 'bad token\n-- raw\n0001000G 00000001 00000001 00000000 00000000\n-- result\n1\n' >"$T/hx/c.hex"
printf 'wrong answer\n-- raw\n00010003 00000000 00000005 00000000 00000000\n000000ff 00000000 00000000 00000000 00000000\n-- result\n6\n' >"$T/hx/d.hex"
printf 'right answer\n-- raw\n00010003 00000000 00000005 00000000 00000000\n000000ff 00000000 00000000 00000000 00000000\n-- result\n5\n' >"$T/hx/e.hex"
$BIB test "$T/hx" >"$T/hx.out" 2>&1
rc=$?
if [ $rc -eq 1 ] && [ "$(tail -1 "$T/hx.out")" = "1 passed, 4 failed" ] &&
    grep -q "^FAIL .*a.hex: -- raw: 4 words is not a whole number of 5-word instructions" "$T/hx.out" &&
    grep -q "^FAIL .*b.hex: a case needs '-- asm' or '-- raw'" "$T/hx.out" &&
    grep -q "^FAIL .*c.hex: -- raw: line 3: '0001000G' is not a hex value" "$T/hx.out" &&
    grep -q "^FAIL .*d.hex: result 5, expected 6" "$T/hx.out"; then
    ok "bib test names each bad or failing case file and why"
else bad "bib test on bad cases (exit $rc): $(cat "$T/hx.out")"; fi

# Case files are parsed strictly: each mistake is one FAIL line naming the
# file, the line and the field; none is ignored or wrapped.
mkdir -p "$T/hs"
HALT5='-- raw\n00010003 00000000 00000005 00000000 00000000\n000000ff 00000000 00000000 00000000 00000000\n'
printf "unknown option\n${HALT5}-- options\nfuel=100 bogus=1\n-- result\n5\n" >"$T/hs/a.hex"
printf "bad number\n${HALT5}-- options\nfuel=12abc\n-- result\n5\n" >"$T/hs/b.hex"
printf "negative memory\n${HALT5}-- options\nmax-memory=-1\n-- result\n5\n" >"$T/hs/c.hex"
printf "wrapping depth\n${HALT5}-- options\nmax-depth=4294967297\n-- result\n5\n" >"$T/hs/d.hex"
printf "negative truncate\n${HALT5}-- truncate -1\n-- error\nload: x\n" >"$T/hs/e.hex"
printf "negative flip\n${HALT5}-- flip 3 -1\n-- error\nload: x\n" >"$T/hs/f.hex"
printf "overflowing result\n${HALT5}-- result\n99999999999999999999\n" >"$T/hs/g.hex"
printf "empty result\n${HALT5}-- result\n\n" >"$T/hs/h.hex"
printf "self jump\n-- raw\n00000001 0 0 0 0\n-- result\n0\n" >"$T/hs/i.hex"
printf "self jump, fuel expected\n-- raw\n00000001 0 0 0 0\n-- options\nfuel=1000\n-- error\ntrap: fuel exhausted\n" >"$T/hs/j.hex"
printf "flip bit 8\n${HALT5}-- flip 3 8\n-- error\nload: x\n" >"$T/hs/k.hex"
printf "fuel 0\n${HALT5}-- options\nfuel=0\n-- result\n5\n" >"$T/hs/l.hex"
printf "error and result\n${HALT5}-- error\ntrap: x\n-- result\n5\n" >"$T/hs/m.hex"
printf "unknown error kind\n${HALT5}-- error\nbogus: x\n" >"$T/hs/n.hex"
start=$(date +%s)
timeout 60 $BIB test "$T/hs" >"$T/hs.out" 2>&1
rc=$?
took=$(($(date +%s) - start))
hs_ok=1
for want in \
    "a.hex: line 6: -- options: unknown option 'bogus=1' (fuel, max-memory, max-depth, regs)" \
    "b.hex: line 6: -- options: fuel=12abc: '12abc' is not a number" \
    "c.hex: line 6: -- options: max-memory=-1: '-1' is not a number" \
    "d.hex: line 6: -- options: max-depth=4294967297: 4294967297 is outside 1..4294967295" \
    "e.hex: line 5: -- truncate: '-1' is not a byte offset" \
    "f.hex: line 5: -- flip: bit '-1' is not 0..7" \
    "g.hex: line 6: -- result: '99999999999999999999' is outside the 64-bit range" \
    "h.hex: line 5: -- result is empty" \
    "i.hex: unexpected trap error: trap at pc 0 (JMP L0): fuel exhausted (100000000 instructions) (bib test's default fuel" \
    "k.hex: line 5: -- flip: bit '8' is not 0..7" \
    "l.hex: line 6: -- options: fuel=0: 0 is outside 1..18446744073709551615" \
    "m.hex: line 5: -- error: a case that expects an error has no '-- result'" \
    "n.hex: line 5: -- error: 'bogus' must read 'asm|load|trap: text'"; do
    grep -qF "FAIL $T/hs/$want" "$T/hs.out" || { hs_ok=0; echo "  missing: FAIL .../$want"; }
done
if [ $rc -eq 1 ] && [ $hs_ok -eq 1 ] && [ "$(tail -1 "$T/hs.out")" = "1 passed, 13 failed" ] &&
    [ "$(grep -c '^FAIL' "$T/hs.out")" -eq 13 ] && [ $took -lt 30 ]; then
    ok "bib test refuses bad options, numbers, offsets, results and errors, one line each, and a self-jump fails under the default fuel (${took} s)"
else bad "bib test strict parsing (exit $rc, ${took} s): $(cat "$T/hs.out")"; fi

mkdir -p "$T/nocases"
$BIB test "$T/nocases" >"$T/nc.out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "^FAIL: no case files (\*.hex) in $T/nocases$" "$T/nc.out"; then
    ok "bib test of a folder without cases fails instead of passing with 0 cases"
else bad "bib test of an empty folder: exit $rc, $(cat "$T/nc.out")"; fi

v=$($BIB --version)
case "$v" in *simd*executors*) ok "--version shows features: $v" ;; *) bad "--version: $v" ;; esac
$BIB --help | grep -q "usage: bib" && ok "--help" || bad "--help"

# trace is deterministic and names pc, mnemonic and the value written
$BIB run --trace examples/hello.basm >/dev/null 2>"$T/t1"
$BIB run --trace examples/hello.basm >/dev/null 2>"$T/t2"
if [ -s "$T/t1" ] && cmp -s "$T/t1" "$T/t2"; then ok "trace is deterministic ($(wc -l <"$T/t1") lines)"; else bad "trace differs between runs"; fi
$BIB run --trace=json examples/fib.basm --fuel 50 >/dev/null 2>"$T/j" ; head -1 "$T/j" | grep -q '"pc"' && ok "json trace" || bad "json trace: $(head -1 "$T/j")"

# A jump target is printed as bib dis prints it: the label's name, or L<pc>
# when the module was stripped of its labels.
printf '.func main regs=2\n    LDI r0, 1\ntop:\n    ADD r1, r1, r0\n    JMP top\n.end\n' >"$T/loop.basm"
$BIB run --fuel 4 --trace "$T/loop.basm" >/dev/null 2>"$T/lt"
if grep -q '^\[      2\] JMP top$' "$T/lt" && grep -q '^bib: trap at pc 2 (JMP top) line 5: fuel exhausted' "$T/lt" &&
    $BIB asm "$T/loop.basm" -o "$T/loop.bib" && $BIB dis "$T/loop.bib" | grep -q 'JMP  *top$'; then
    ok "trace and trap name a jump's label as bib dis does (JMP top)"
else bad "trace of a jump to a label: $(cat "$T/lt")"; fi
$BIB asm --strip "$T/loop.basm" -o "$T/stripped.bib"
$BIB run --fuel 4 --trace "$T/stripped.bib" >/dev/null 2>"$T/lt"
if grep -q '^\[      2\] JMP L1$' "$T/lt" && grep -q '^bib: trap at pc 2 (JMP L1): fuel exhausted' "$T/lt"; then
    ok "a stripped module's jump target is L<pc> in the trace and the trap"
else bad "trace of a stripped module's jump: $(cat "$T/lt")"; fi
$BIB run --trace=json --fuel 4 "$T/loop.basm" >/dev/null 2>"$T/lj"
grep -q '^{"pc":2,"op":"JMP","args":\["top"\]' "$T/lj" && ok "the JSON trace names the label too" ||
    bad "JSON trace of a jump: $(cat "$T/lj")"

finish
