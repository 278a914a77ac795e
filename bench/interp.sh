#!/bin/sh
# Interpreter benchmark: examples/{loop,fib,sieve}.basm under bib beside the
# same algorithms in Lua 5.4, in one run. Prints the median of RUNS runs and
# the ratio Lua time / bib time (above 1 means bib is faster).
set -eu
BIB=${BIB:-build/bib}
RUNS=${RUNS:-5}
LUA=${LUA:-lua5.4}

now() { date +%s.%N; }
# median wall time of "$@" over RUNS runs, output discarded
median() {
    i=0
    times=""
    while [ $i -lt "$RUNS" ]; do
        t0=$(now)
        "$@" >/dev/null
        t1=$(now)
        times="$times $(awk "BEGIN{print $t1 - $t0}")"
        i=$((i + 1))
    done
    echo $times | tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}'
}

echo "Interpreter: bib vs Lua 5.4 ($($LUA -v 2>&1 | head -1)), median of $RUNS runs, $(nproc) cores"
printf "%-8s %10s %10s %8s  %s\n" program "bib (s)" "lua (s)" ratio "check"
status=0
for prog in loop fib sieve; do
    "$BIB" asm "examples/$prog.basm" -o "build/$prog.bib"
    want=$($LUA "bench/lua/$prog.lua")
    got=$("$BIB" run "build/$prog.bib")
    check="ok ($got)"
    [ "$got" = "$want" ] || { check="MISMATCH: bib $got, lua $want"; status=1; }
    tb=$(median "$BIB" run "build/$prog.bib")
    tl=$(median "$LUA" "bench/lua/$prog.lua")
    ratio=$(awk "BEGIN{print $tl / $tb}")
    printf "%-8s %10s %10s %7.2fx  %s\n" "$prog" "$tb" "$tl" "$ratio" "$check"
done
exit $status
