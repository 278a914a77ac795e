#!/bin/sh
# CLI tests for files: every reader capped (--max-file-size, exit 71), every
# output written whole or not at all (a temporary file renamed into place),
# outputs checked before the run, assembler data capped, NUL bytes refused.
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"

# expect_fail NAME CODE PATTERN CMD...: exits with CODE and stderr matches PATTERN
expect_fail() {
    name=$1 code=$2 pattern=$3
    shift 3
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -eq "$code" ] && grep -q -- "$pattern" "$T/err"; then ok "$name"; else
        bad "$name: exit $rc (want $code), stderr: $(head -c 600 "$T/err")"
    fi
}
# no_temporaries NAME DIR: no temporary file (.NAME.XXXXXX) is left in DIR
no_temporaries() {
    left=$(find "$2" -maxdepth 1 -name '.*.??????' | head -3)
    if [ -z "$left" ]; then ok "$1"; else bad "$1: left $left"; fi
}

TOO_LARGE="larger than the file size cap of 1048576 bytes (--max-file-size raises it)"

# ---- every reader is capped ---------------------------------------------------
# /dev/zero has no end and st_size 0: each reader stops at the cap, with one
# message and exit 71 whatever the command.
expect_fail "run of /dev/zero stops at the cap" 71 "cannot read '/dev/zero': $TOO_LARGE" \
    timeout 20 $BIB run /dev/zero --max-file-size 1M
expect_fail "dis of /dev/zero stops at the cap" 71 "cannot read '/dev/zero': $TOO_LARGE" \
    timeout 20 $BIB dis /dev/zero --max-file-size 1M
expect_fail "asm of /dev/zero stops at the cap" 71 "cannot read '/dev/zero': $TOO_LARGE" \
    timeout 20 $BIB asm /dev/zero -o "$T/zero.bib" --max-file-size 1M
expect_fail "test of /dev/zero stops at the cap" 71 "cannot read '/dev/zero': $TOO_LARGE" \
    timeout 20 $BIB test /dev/zero --max-file-size 1M
printf ':load /dev/zero\n' >"$T/load.repl"
expect_fail "repl :load of /dev/zero stops at the cap" 0 "cannot read '/dev/zero': $TOO_LARGE" \
    timeout 20 $BIB repl --max-file-size 1M <"$T/load.repl"
# The default cap, 1 GiB, under a 3 GB address-space limit (the old reader
# grew until the limit, then failed with another message). AddressSanitizer
# reserves terabytes of shadow memory, so an address-space limit stops it
# before main: those checks are skipped under it.
ASAN=${BIB_TEST_SANITIZED:-}
if [ -n "$ASAN" ]; then
    echo "SKIP the default cap under ulimit -v: AddressSanitizer cannot start under it"
else
    (
        ulimit -v 3000000
        timeout 60 $BIB run /dev/zero >/dev/null 2>"$T/err"
        echo $? >"$T/rc"
    )
    if [ "$(cat "$T/rc")" = 71 ] &&
        grep -q "larger than the file size cap of 1073741824 bytes" "$T/err"; then
        ok "the default cap is 1 GiB"
    else bad "default cap: exit $(cat "$T/rc"), $(cat "$T/err")"; fi
fi
# A pipe: its writer is cut off at the cap.
# The writer is killed afterwards, in case bib never opened the pipe.
mkfifo "$T/fifo"
sh -c 'head -c 3000000 /dev/zero >"$1"' _ "$T/fifo" >/dev/null 2>&1 &
writer=$!
expect_fail "a module read from a pipe stops at the cap" 71 "$TOO_LARGE" \
    timeout 20 $BIB run "$T/fifo" --max-file-size 1M
kill $writer 2>/dev/null
expect_fail "--max-file-size takes a size" 64 "--max-file-size takes a size such as 2G, not 'lots'" \
    $BIB run examples/hello.basm --max-file-size lots

# ---- .npy inputs: capped, and counted against --max-memory from the header ----
printf '.input a t0 f32[?]\n.output b t1\n.func main regs=1\n    LDI r0, 7\n    HOSTCALL r0, print_i64, r0, 1\n    COPY t1, t0\n    HALT r0\n.end\n' >"$T/copy.basm"
$PY -c "
import numpy as np
np.save('$T/a.npy', np.arange(200000, dtype='<f4'))
np.save('$T/a2.npy', np.arange(200000, dtype='<f4') * 2)
np.save('$T/big.npy', np.zeros(16 << 20, dtype='<f4'))
" || bad "numpy"
expect_fail "an .npy over the file cap is refused" 71 "a.npy': larger than the file size cap of 102400 bytes" \
    $BIB run "$T/copy.basm" --input "a=$T/a.npy" --max-file-size 100K
# A file shorter than its header's shape says is truncated, not over the cap,
# and is refused before memory is taken for the shape.
$PY -c "
import numpy as np
with open('$T/short_data.npy', 'wb') as f:
    np.lib.format.write_array_header_1_0(f, {'descr': '<f4', 'fortran_order': False, 'shape': (1000000000,)})
    f.write(bytes(100))
" || bad "numpy"
expect_fail "an .npy shorter than its shape is truncated, not over the cap" 65 \
    "short_data.npy: not a usable .npy file: the data is truncated: 4000000000 bytes for the shape, 100 present" \
    $BIB run "$T/copy.basm" --input "a=$T/short_data.npy"
# A header length shorter than the prefix read: refused, nothing overrun.
printf '\223NUMPY\001\000\000\000ab' >"$T/short.npy"
expect_fail "an .npy whose header is shorter than its prefix is refused" 65 "lacks 'descr'" \
    $BIB run "$T/copy.basm" --input "a=$T/short.npy"
mkfifo "$T/npyfifo"
sh -c 'cat "$2" >"$1"' _ "$T/npyfifo" "$T/big.npy" >/dev/null 2>&1 &
writer=$!
expect_fail "an .npy from a pipe is refused at the cap from its header" 71 "$TOO_LARGE" \
    timeout 20 $BIB run "$T/copy.basm" --input "a=$T/npyfifo" --max-file-size 1M
kill $writer 2>/dev/null
# 64 MB of data, a 16 MB cap: refused from the header, before the data is read.
if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%M' -o "$T/rss" $BIB run "$T/copy.basm" --input "a=$T/big.npy" \
        --max-memory 16M >"$T/out" 2>"$T/err"
    rc=$?
    rss=$(tail -1 "$T/rss")
    if [ $rc -eq 71 ] && grep -q "input 'a': memory cap reached" "$T/err" && [ "$rss" -lt 40000 ] &&
        [ ! -s "$T/out" ]; then
        ok "a 64 MB .npy over a 16 MB cap is refused before its data is read (peak ${rss} KB)"
    else bad "npy over --max-memory: exit $rc, peak ${rss} KB, $(cat "$T/err")"; fi
else
    echo "SKIP peak memory of an .npy over the cap: /usr/bin/time is not installed"
fi
# The run's tensor shares the input the VM keeps: a 64 MB input that the
# program only reads runs under a cap just over one copy and is held once
# (two copies, 128 MB and more, before the run shared it). AddressSanitizer's
# shadow and runtime add about 25 MB.
limit=100000
[ -n "$ASAN" ] && limit=130000
printf '.input a t0 f32[?]\n.func main regs=1\n    THASH r0, t0\n    LDI r0, 0\n    HALT r0\n.end\n' >"$T/hash.basm"
if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%M' -o "$T/rss" $BIB run "$T/hash.basm" --input "a=$T/big.npy" \
        --max-memory 65M >"$T/out" 2>"$T/err"
    rc=$?
    rss=$(tail -1 "$T/rss")
    if [ $rc -eq 0 ] && [ "$rss" -lt $limit ]; then
        ok "a 64 MB input is held once during the run (peak ${rss} KB, --max-memory 65M)"
    else bad "a 64 MB input held during the run: exit $rc, peak ${rss} KB, $(cat "$T/err")"; fi
else
    echo "SKIP peak memory of a run's input: /usr/bin/time is not installed"
fi

# ---- outputs: all or nothing --------------------------------------------------
$BIB run "$T/copy.basm" --input "a=$T/a.npy" --output "b=$T/b.npy" >/dev/null 2>&1 ||
    bad "a first output"
cp "$T/b.npy" "$T/b.saved"
# Past `ulimit -f` (SIGXFSZ ignored, so the write fails with EFBIG) the output
# that was there survives whole, and the reason is given.
(
    trap '' XFSZ
    ulimit -f 100
    $BIB run "$T/copy.basm" --input "a=$T/a2.npy" --output "b=$T/b.npy" >/dev/null 2>"$T/err"
    echo $? >"$T/rc"
)
if [ "$(cat "$T/rc")" = 73 ] && grep -q "cannot write '$T/b.npy': File too large" "$T/err" &&
    cmp -s "$T/b.npy" "$T/b.saved"; then
    ok "a full disk leaves the previous --output intact and says why"
else bad "full disk: exit $(cat "$T/rc"), $(cat "$T/err"), $(cmp "$T/b.npy" "$T/b.saved")"; fi
no_temporaries "a failed output leaves no temporary file" "$T"
# Without the trap, SIGXFSZ is ignored by bib itself: the same outcome.
(
    ulimit -f 100
    $BIB run "$T/copy.basm" --input "a=$T/a2.npy" --output "b=$T/b.npy" >/dev/null 2>"$T/err"
    echo $? >"$T/rc"
)
if [ "$(cat "$T/rc")" = 73 ] && cmp -s "$T/b.npy" "$T/b.saved"; then
    ok "past ulimit -f bib is not killed half-way: exit 73, the output intact"
else bad "ulimit -f: exit $(cat "$T/rc"), $(cat "$T/err")"; fi
# Two outputs: the small one fits under the limit, the large one does not;
# neither target changes.
printf '.input a t0 f32[?]\n.input s t3 f32[?]\n.output small t1\n.output large t2\n.func main regs=1\n    COPY t1, t3\n    COPY t2, t0\n    HALT r0\n.end\n' >"$T/two.basm"
$PY -c "import numpy as np; np.save('$T/s.npy', np.ones(4, dtype='<f4'))"
echo old-small >"$T/small.npy"
echo old-large >"$T/large.npy"
(
    trap '' XFSZ
    ulimit -f 100
    $BIB run "$T/two.basm" --input "a=$T/a.npy" --input "s=$T/s.npy" --output "small=$T/small.npy" \
        --output "large=$T/large.npy" >/dev/null 2>"$T/err"
    echo $? >"$T/rc"
)
if [ "$(cat "$T/rc")" = 73 ] && [ "$(cat "$T/small.npy")" = old-small ] &&
    [ "$(cat "$T/large.npy")" = old-large ]; then
    ok "outputs are renamed into place only once every one is written"
else bad "output set: exit $(cat "$T/rc"), small $(head -c 20 "$T/small.npy"), $(cat "$T/err")"; fi
no_temporaries "a failed output set leaves no temporary file" "$T"
# The second output's folder does not exist: refused before the run.
cp "$T/b.saved" "$T/b.npy"
out=$($BIB run "$T/copy.basm" --input "a=$T/a2.npy" --output "b=$T/b.npy" \
    --output "b=$T/nodir/c.npy" 2>"$T/err")
rc=$?
if [ $rc -eq 64 ] && [ -z "$out" ]; then ok "the same --output name twice is refused"; else
    bad "output name twice: exit $rc, $(cat "$T/err")"
fi
printf '.input a t0 f32[?]\n.output b t1\n.output c t2\n.func main regs=1\n    LDI r0, 7\n    HOSTCALL r0, print_i64, r0, 1\n    COPY t1, t0\n    COPY t2, t0\n    HALT r0\n.end\n' >"$T/copy2.basm"
out=$($BIB run "$T/copy2.basm" --input "a=$T/a2.npy" --output "b=$T/b.npy" \
    --output "c=$T/nodir/c.npy" 2>"$T/err")
rc=$?
if [ $rc -eq 73 ] && [ -z "$out" ] && cmp -s "$T/b.npy" "$T/b.saved" &&
    grep -q "cannot write '$T/nodir/c.npy': folder '$T/nodir': No such file or directory" "$T/err"; then
    ok "a missing folder for the 2nd output: nothing runs, the 1st output is untouched"
else bad "missing folder: exit $rc, stdout '$out', $(cat "$T/err")"; fi
expect_fail "an output whose folder is a file is refused" 73 "Not a directory" \
    $BIB run "$T/copy.basm" --input "a=$T/a.npy" --output "b=$T/a.npy/b.npy"
if [ ! -s "$T/out" ]; then ok "... before the run"; else bad "the program ran: $(cat "$T/out")"; fi
out=$($BIB run "$T/copy2.basm" --input "a=$T/a.npy" --output "b=$T/same.npy" \
    --output "c=$T/../$(basename "$T")/same.npy" 2>"$T/err")
rc=$?
if [ $rc -eq 64 ] && [ -z "$out" ] && grep -q "name the same file" "$T/err"; then
    ok "two outputs onto one file are refused before the run"
else bad "same output file: exit $rc, $(cat "$T/err")"; fi
out=$($BIB run "$T/copy.basm" --input "a=$T/a.npy" --input "a=$T/a2.npy" 2>"$T/err")
rc=$?
if [ $rc -eq 64 ] && [ -z "$out" ] && grep -q "input a is given twice" "$T/err"; then
    ok "the same --input twice is refused, not the last taken"
else bad "input twice: exit $rc, $(cat "$T/err")"; fi

# Targets that are not plain files: a device is written directly (there is
# nothing to replace), a link is followed and stays a link.
if $BIB run "$T/copy.basm" --input "a=$T/a.npy" --output "b=/dev/null" >/dev/null 2>"$T/err" &&
    [ -c /dev/null ]; then
    ok "an output to /dev/null is written to the device, not renamed over it"
else bad "output to /dev/null: $(cat "$T/err"); $(ls -la /dev/null)"; fi
if [ "$($BIB asm examples/hello.basm -o /dev/stdout | head -c 4 | tail -c 3)" = BIB ]; then
    ok "asm -o /dev/stdout writes the module to stdout"
else bad "asm -o /dev/stdout"; fi
ln -s b.npy "$T/link.npy"
if $BIB run "$T/copy.basm" --input "a=$T/a2.npy" --output "b=$T/link.npy" >/dev/null 2>"$T/err" &&
    [ -L "$T/link.npy" ] && ! cmp -s "$T/b.npy" "$T/b.saved"; then
    ok "an output through a link replaces the file it names and keeps the link"
else bad "output through a link: $(cat "$T/err"); $(ls -la "$T")"; fi

# ---- bib asm -o ----------------------------------------------------------------
cp examples/fib.basm "$T/fib.basm"
expect_fail "asm onto its own source is refused" 64 "is the source" \
    $BIB asm "$T/fib.basm" -o "$T/fib.basm"
expect_fail "asm onto its own source by another name is refused" 64 "is the source" \
    $BIB asm "$T/fib.basm" -o "$T/../$(basename "$T")/fib.basm"
ln -s fib.basm "$T/link.basm"
expect_fail "asm onto a link to its source is refused" 64 "is the source" \
    $BIB asm "$T/fib.basm" -o "$T/link.basm"
if cmp -s "$T/fib.basm" examples/fib.basm; then ok "the source survives"; else
    bad "asm overwrote its source"
fi
expect_fail "asm into a missing folder fails before assembling" 73 "folder '$T/nope'" \
    $BIB asm "$T/fib.basm" -o "$T/nope/fib.bib"
printf '.func main regs=1\n    HALT r0\n.end\nd: .zero 100000\n' >"$T/data.basm"
$BIB asm "$T/data.basm" -o "$T/data.bib" || bad "asm data.basm"
cp "$T/data.bib" "$T/data.saved"
printf '.func main regs=1\n    HALT r0\n.end\nd: .zero 100001\n' >"$T/data.basm"
(
    trap '' XFSZ
    ulimit -f 100
    $BIB asm "$T/data.basm" -o "$T/data.bib" 2>"$T/err"
    echo $? >"$T/rc"
)
if [ "$(cat "$T/rc")" = 73 ] && grep -q "File too large" "$T/err" &&
    cmp -s "$T/data.bib" "$T/data.saved"; then
    ok "a full disk leaves the previous asm -o module intact"
else bad "asm full disk: exit $(cat "$T/rc"), $(cat "$T/err")"; fi
no_temporaries "a failed asm -o leaves no temporary file" "$T"

# ---- the assembler's data against the cap ---------------------------------------
printf '.func main regs=1\n    HALT r0\n.end\nd: .zero 4000000000\n' >"$T/zero4g.basm"
expect_fail ".zero past the cap: exit 71 at its line, at once" 71 \
    "zero4g.basm:4:10: error: 4000000000 more bytes of data would make the module larger than the size cap of 1073741824 bytes" \
    timeout 20 $BIB asm "$T/zero4g.basm" -o "$T/zero4g.bib"
printf '.func main regs=1\n    HALT r0\n.end\nd: .byte 1\n.align 1073741824\n' >"$T/align.basm"
expect_fail ".align past the cap: exit 71 at its line, at once" 71 "align.basm:5:8: error: 1073741823 more bytes" \
    timeout 20 $BIB asm "$T/align.basm" -o "$T/align.bib"
expect_fail "--max-file-size lowers the assembler's cap" 71 "larger than the size cap of 1024 bytes" \
    $BIB asm "$T/data.basm" -o "$T/small.bib" --max-file-size 1K
expect_fail "run assembles under the same cap" 71 "data.basm:4:10: error: 100001 more bytes" \
    $BIB run "$T/data.basm" --max-file-size 1K
# 400 MB declared, one value given: the values are counted before the
# shape's memory is taken (a 200 MB address-space limit proves it).
expect_fail "the cap holds under --deny=device-code too" 71 "data.basm:4:10: error: 100001 more bytes" \
    $BIB run "$T/data.basm" --max-file-size 1K --deny=device-code
printf '.tensor w t0 f32[100000000] = 1.0\n.func main regs=1\n    HALT r0\n.end\n' >"$T/shape.basm"
if [ -n "$ASAN" ]; then
    echo "SKIP a .tensor shape under ulimit -v: AddressSanitizer cannot start under it"
else
    (
        ulimit -v 200000
        $BIB asm "$T/shape.basm" -o "$T/shape.bib" 2>"$T/err"
        echo $? >"$T/rc"
    )
    if [ "$(cat "$T/rc")" = 65 ] && grep -q "has 100000000 elements but 1 value is given" "$T/err"; then
        ok "a .tensor shape is not allocated before its values are counted"
    else bad ".tensor shape: exit $(cat "$T/rc"), $(cat "$T/err")"; fi
fi

# ---- NUL bytes ---------------------------------------------------------------------
printf '.func main regs=1\n  LDI r0, 1\000garbage\n  BOGUS r1\n  HALT r0\n.end\n' >"$T/nul.basm"
$BIB asm "$T/nul.basm" -o "$T/nul.bib" 2>"$T/err"
rc=$?
if [ $rc -eq 65 ] && grep -q "^$T/nul.basm:2:12: error: a NUL byte in the line$" "$T/err" &&
    grep -q "^$T/nul.basm:3:3: error: unknown mnemonic 'BOGUS'$" "$T/err"; then
    ok "a NUL byte in a source line is an error at its line:col, the next diagnostic intact"
else bad "NUL in source: exit $rc, $(cat -A "$T/err")"; fi
printf 'LDI r0, 5\000junk\nLDI r1, 2\n' | $BIB repl >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -eq 0 ] && grep -q "repl:1:10: a NUL byte in the line; it is dropped" "$T/err" &&
    ! grep -q "r0 = 5" "$T/out" && grep -q "r1 = 2" "$T/out"; then
    ok "the REPL refuses a line holding a NUL byte, and goes on"
else bad "NUL in repl: exit $rc, stdout $(cat "$T/out"), stderr $(cat "$T/err")"; fi

# ---- what a run prints, reads and writes is never lost --------------------------
# Standard output that cannot be written (a full disk, a closed descriptor) is
# an error: exit 73, not 0 with the output gone.
expect_fail "output to a full disk is exit 73, not lost" 73 "cannot write standard output (what was printed is lost)" \
    sh -c "$BIB run examples/fib.basm >/dev/full"
expect_fail "output to a closed stdout is exit 73: Bad file descriptor" 73 "Bad file descriptor" \
    sh -c "$BIB run examples/hello.basm >&-"
# --output never replaces the module being run.
cp "$T/copy.basm" "$T/self.basm"
expect_fail "--output naming the module itself is refused" 64 "is the module '$T/self.basm' itself" \
    $BIB run "$T/self.basm" --input "a=$T/a.npy" --output "b=$T/self.basm"
if cmp -s "$T/copy.basm" "$T/self.basm"; then ok "the module is left as it was"; else bad "the module was overwritten"; fi
# --input NAME=- reads stdin (a file named - in the folder is not read), once.
bib_abs=$(cd "$(dirname "$BIB")" && pwd)/$(basename "$BIB")
(cd "$T" && printf 'not an npy' >./- && "$bib_abs" run copy.basm --input a=- --output b=b-stdin.npy <a.npy) \
    >"$T/out" 2>"$T/err"
if [ $? -eq 0 ] && cmp -s "$T/a.npy" "$T/b-stdin.npy"; then ok "--input a=- reads standard input"
else bad "--input a=-: $(cat "$T/err")"; fi
expect_fail "the module and an --input cannot both read stdin" 64 "both read standard input" \
    sh -c "$BIB run - --input a=- <'$T/copy.basm'"
expect_fail "a folder as an .npy input says so" 66 "cannot open '$T': Is a directory" \
    $BIB run "$T/copy.basm" --input "a=$T"
# int64 ids and bool masks (numpy's and torch's defaults) feed an i32 input;
# an int64 outside int32 is refused naming its index.
printf '.input a t0 i32[?]\n.output b t1\n.func main regs=1\n    COPY t1, t0\n    HALT r0\n.end\n' >"$T/ids.basm"
$PY -c "
import numpy as np
np.save('$T/ids.npy', np.array([3, -1, 2**31 - 1, -2**31], np.int64))
np.save('$T/mask.npy', np.array([True, False, True]))
np.save('$T/wide.npy', np.array([0, 2**31], np.int64))
" || bad "numpy"
$BIB run "$T/ids.basm" --input "a=$T/ids.npy" --output "b=$T/ids32.npy" >"$T/out" 2>"$T/err" &&
    $PY -c "
import numpy as np, sys
b = np.load('$T/ids32.npy')
sys.exit(0 if b.dtype == np.int32 and b.tolist() == [3, -1, 2**31 - 1, -2**31] else 1)
" && ok "an int64 .npy feeds an i32 input" || bad "int64 .npy: $(cat "$T/err")"
$BIB run "$T/ids.basm" --input "a=$T/mask.npy" >"$T/out" 2>"$T/err"
if grep -q "^\[1 0 1\]$" "$T/out"; then ok "a bool .npy feeds an i32 input as 0 and 1"
else bad "bool .npy: $(cat "$T/out" "$T/err")"; fi
expect_fail "an int64 outside int32 is refused naming its index" 65 "element 1 is 2147483648, outside int32" \
    $BIB run "$T/ids.basm" --input "a=$T/wide.npy"
# A header key given twice is ambiguous (numpy takes the last): refused.
$PY -c "
h = b\"{'descr': '<i4', 'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\"
h += b' ' * (63 - (10 + len(h)) % 64) + b'\\n'
open('$T/dup.npy', 'wb').write(b'\\x93NUMPY\\x01\\x00' + len(h).to_bytes(2, 'little') + h + bytes(8))
" || bad "numpy"
expect_fail "an .npy header with a key given twice is refused" 65 "the header gives 'descr' twice" \
    $BIB run "$T/ids.basm" --input "a=$T/dup.npy"
# A diagnostic shows a window of a long line around its column, not the line:
# a 1 MB line gives a few hundred bytes, the caret under the word.
$PY -c "open('$T/wide.basm', 'w').write('.func main regs=1\\n    LDI r0,' + ' ' * 1000000 + 'zz\\n    HALT r0\\n.end\\n')"
$BIB asm "$T/wide.basm" -o "$T/wide.bib" 2>"$T/err"
rc=$?
if [ $rc -eq 65 ] && [ "$(wc -c <"$T/err")" -lt 1000 ] && grep -q "^\.\.\. *zz$" "$T/err" &&
    [ "$(sed -n 2p "$T/err" | awk '{print index($0, "zz")}')" = "$(sed -n 3p "$T/err" | awk '{print index($0, "^")}')" ]; then
    ok "a diagnostic on a 1 MB line shows a window of it, the caret under the word ($(wc -c <"$T/err") bytes)"
else bad "long-line diagnostic: exit $rc, $(wc -c <"$T/err") bytes"; fi
# SIGTERM while outputs are being written: their temporary files go, and the
# targets keep what they held. The second output is a fifo nobody reads, so
# the run waits there with the first one's temporary file written.
mkdir -p "$T/sig"
printf '.input a t0 f32[?]\n.output b t1\n.output c t2\n.func main regs=1\n    COPY t1, t0\n    COPY t2, t0\n    HALT r0\n.end\n' >"$T/two.basm"
printf 'old' >"$T/sig/b.npy"
mkfifo "$T/sig/c.fifo"
$BIB run "$T/two.basm" --input "a=$T/a.npy" --output "b=$T/sig/b.npy" --output "c=$T/sig/c.fifo" \
    >/dev/null 2>&1 &
run_pid=$!
n=0
while [ -z "$(find "$T/sig" -name '.b.npy.*')" ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
kill -TERM $run_pid
wait $run_pid
rc=$?
if [ $rc -eq 143 ] && [ "$(cat "$T/sig/b.npy")" = old ]; then
    no_temporaries "SIGTERM while writing outputs: no temporary file is left, the target keeps what it held" "$T/sig"
else bad "SIGTERM while writing: exit $rc, b.npy $(head -c 20 "$T/sig/b.npy")"; fi
# ---- long paths: the message keeps its reason --------------------------------
# A path too long for the system is quoted by its start and its end around
# "...", so that the line keeps the closing quote and why (it was cut off
# mid-path at about 500 bytes, the reason lost).
# expect_long NAME CODE CMD...: exits with CODE, and stderr is one line ending
# in "<end of the path>': File name too long", under 400 bytes.
expect_long() {
    name=$1 code=$2
    shift 2
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -eq "$code" ] && [ "$(wc -l <"$T/err")" -eq 1 ] && [ "$(wc -c <"$T/err")" -lt 400 ] &&
        grep -q "^bib: .*'[a-z]*\.\.\.[a-z]*\.[a-z]*': File name too long$" "$T/err"; then
        ok "$name"
    else bad "$name: exit $rc (want $code), stderr ($(wc -c <"$T/err") bytes): $(head -c 300 "$T/err")...$(tail -c 100 "$T/err")"; fi
}
A600=$(printf 'a%.0s' $(seq 600))
B4500=$(printf 'b%.0s' $(seq 4500))
$BIB asm "$T/copy.basm" -o "$T/copy.bib" 2>/dev/null || bad "asm copy.basm"
expect_long "run of a 600-byte file name says why it cannot open it" 66 $BIB run "$A600.bib"
expect_long "dis of a 4500-byte path says why" 66 $BIB dis "$B4500.bib"
expect_long "dis -o a 4500-byte path says why" 73 $BIB dis "$T/copy.bib" -o "$B4500.basm"
expect_long "asm -o a 4500-byte path says why" 73 $BIB asm "$T/copy.basm" -o "$B4500.bib"
expect_long "--input from a 4500-byte path says why" 66 $BIB run "$T/copy.basm" --input "a=$B4500.npy"
expect_long "--output to a 4500-byte path says why" 73 \
    $BIB run "$T/copy.basm" --input "a=$T/a.npy" --output "b=$B4500.npy"
expect_long "bench -o a 4500-byte path says why" 73 \
    $BIB bench "$T/copy.basm" --input "a=$T/a.npy" -o "$B4500.md"

# bib test walks a folder once, however many links lead back to it.
mkdir -p "$T/loop/sub"
cp "$(find tests/hex/arith -name '*.hex' | sort | head -1)" "$T/loop/one.hex"
ln -s .. "$T/loop/sub/up" && ln -s . "$T/loop/self" && ln -s . "$T/loop/self2"
timeout 20 $BIB test "$T/loop" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -eq 0 ] && grep -q "^1 passed, 0 failed$" "$T/out"; then ok "bib test walks a folder with links back to itself once"
else bad "bib test with link loops: exit $rc, $(tail -2 "$T/out")"; fi

finish
