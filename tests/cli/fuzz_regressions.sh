#!/bin/sh
# The fuzzers' minimised crashers (tests/fuzz/regression/<harness>/), kept
# forever and run through bib as a user would meet them: each must give a
# clean outcome, every message on one line. Under `make sanitize` the same
# inputs also run under ASan and UBSan. tests/fuzz/README says where each
# came from.
#   npy/*      `bib run --input a=FILE`: exit 0 or 65, stderr one line at most
#   hexcase/*  `bib test FILE`: one PASS/FAIL line and the summary, exit 0 or 1
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"

printf '.input a t0 f32[?, ?]\n.func main regs=1\n    LDI r0, 0\n    HALT r0\n.end\n' >"$T/any.basm"
for f in tests/fuzz/regression/npy/*; do
    [ -f "$f" ] || continue
    $BIB run "$T/any.basm" --input "a=$f" >/dev/null 2>"$T/err"
    rc=$?
    if { [ $rc -eq 0 ] || [ $rc -eq 65 ]; } && [ "$(wc -l <"$T/err")" -le 1 ]; then
        ok "npy crasher $(basename "$f"): exit $rc, $(wc -l <"$T/err") message line"
    else
        bad "npy crasher $(basename "$f"): exit $rc, stderr: $(cat "$T/err")"
    fi
done
for f in tests/fuzz/regression/hexcase/*; do
    [ -f "$f" ] || continue
    cp "$f" "$T/case.hex"
    timeout 60 $BIB test "$T/case.hex" >"$T/out" 2>"$T/err"
    rc=$?
    if { [ $rc -eq 0 ] || [ $rc -eq 1 ]; } && [ "$(wc -l <"$T/out")" -eq 2 ] &&
        grep -q "^[01] passed, [01] failed$" "$T/out"; then
        ok "case-file crasher $(basename "$f"): $(head -1 "$T/out" | cut -c1-100)"
    else
        bad "case-file crasher $(basename "$f"): exit $rc, output: $(cat "$T/out" "$T/err")"
    fi
done
finish
