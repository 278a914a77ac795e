#!/bin/sh
# Interpreter benchmark: the programs of examples/ named below under bib,
# beside the same algorithms in bench/lua/ run by Lua 5.4 and by LuaJIT 2.1's
# interpreter (`luajit -joff`), in one run. Every program's output must be the
# same bytes under all three. The runs are interleaved (bib, LuaJIT, Lua, then
# again) RUNS times, and the table gives the median of each, the ratios
# LuaJIT time / bib time and Lua time / bib time (above 1 means bib is
# faster), and the instructions each executed: bib's from `bib run --profile`
# (its first line, "profile: N instructions"), Lua 5.4's bytecodes from a
# count hook (bench/lua/count.lua, to 1000). Counting under --profile takes
# about 35 ns an instruction; COUNT=0 leaves the counts out.
#
#   BIB, LUA, LUAJIT   the programs (build/bib, lua5.4, luajit)
#   RUNS               timed runs of each (5)
#   PROGRAMS           which programs (all six)
set -eu
BIB=${BIB:-build/bib}
BUILD=${BUILD:-build}
RUNS=${RUNS:-5}
LUA=${LUA:-lua5.4}
LUAJIT=${LUAJIT:-luajit}
COUNT=${COUNT:-1}
PROGRAMS=${PROGRAMS:-loop fib sieve nbody fannkuch spectralnorm}

have_luajit=1
command -v "$LUAJIT" >/dev/null 2>&1 || have_luajit=0

now() { date +%s.%N; }
# seconds FILE CMD...: runs CMD (output discarded) and appends its wall time to FILE
seconds() {
    file=$1
    shift
    t0=$(now)
    "$@" >/dev/null
    t1=$(now)
    awk "BEGIN{print $t1 - $t0}" >>"$file"
}
median() { sort -g "$1" | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}'; }
# one line: the output with its newlines shown as " / "
flat() { printf '%s\n' "$1" | awk 'NR > 1 { printf " / " } { printf "%s", $0 }'; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
jit_name="no LuaJIT"
[ $have_luajit -eq 0 ] || jit_name="$($LUAJIT -v | cut -d' ' -f1-2) -joff"
echo "Interpreter: bib vs $jit_name and $($LUA -v 2>&1 | cut -d' ' -f1-2), median of $RUNS interleaved runs, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
[ $have_luajit -eq 1 ] || echo "SKIP: luajit: $LUAJIT is not installed (make bench installs Debian's luajit); its columns are -"
printf "%-13s %8s %8s %8s %7s %7s %14s %14s %8s  %s\n" program "bib (s)" "LJ (s)" "lua (s)" LJ/bib lua/bib "bib instr" "lua instr" bib/lua check
status=0
for prog in $PROGRAMS; do
    "$BIB" asm "examples/$prog.basm" -o "$BUILD/$prog.bib"
    want=$($LUA "bench/lua/$prog.lua")
    got=$("$BIB" run "$BUILD/$prog.bib")
    check="ok ($(flat "$got"))"
    [ "$got" = "$want" ] || { check="MISMATCH: bib '$(flat "$got")', lua '$(flat "$want")'"; status=1; }
    if [ $have_luajit -eq 1 ]; then
        jit=$($LUAJIT -joff "bench/lua/$prog.lua")
        [ "$jit" = "$want" ] || { check="MISMATCH: luajit '$(flat "$jit")', lua '$(flat "$want")'"; status=1; }
    fi
    : >"$tmp/bib"
    : >"$tmp/jit"
    : >"$tmp/lua"
    i=0
    while [ $i -lt "$RUNS" ]; do
        seconds "$tmp/bib" "$BIB" run "$BUILD/$prog.bib"
        [ $have_luajit -eq 0 ] || seconds "$tmp/jit" "$LUAJIT" -joff "bench/lua/$prog.lua"
        seconds "$tmp/lua" "$LUA" "bench/lua/$prog.lua"
        i=$((i + 1))
    done
    tb=$(median "$tmp/bib")
    tl=$(median "$tmp/lua")
    ratio_lua=$(awk "BEGIN{printf \"%.2fx\", $tl / $tb}")
    tj=- ratio_jit=-
    if [ $have_luajit -eq 1 ]; then
        tj=$(median "$tmp/jit")
        ratio_jit=$(awk "BEGIN{printf \"%.2fx\", $tj / $tb}")
    fi
    nb=- nl=- ratio_n=-
    if [ "$COUNT" != 0 ]; then
        nb=$("$BIB" run "$BUILD/$prog.bib" --profile 2>&1 >/dev/null | sed -n 's/^profile: \([0-9]*\) instructions.*/\1/p')
        nl=$($LUA bench/lua/count.lua "bench/lua/$prog.lua" 2>&1 >/dev/null | sed -n 's/^lua-instructions: //p')
        ratio_n=$(awk "BEGIN{printf \"%.2f\", $nb / $nl}")
    fi
    printf "%-13s %8s %8s %8s %7s %7s %14s %14s %8s  %s\n" "$prog" "$tb" "$tj" "$tl" "$ratio_jit" "$ratio_lua" \
        "$nb" "$nl" "$ratio_n" "$check"
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
