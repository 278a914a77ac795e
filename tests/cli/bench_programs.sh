#!/bin/sh
# CLI tests for the Benchmarks Game programs of examples/ (nbody, fannkuch,
# spectralnorm) that bench/interp.sh times: each, at a small size, prints
# exactly the bytes its Lua twin in bench/lua/ prints at that size (Lua 5.4),
# and the Benchmarks Game's reference output for that size; each survives
# the asm/dis/asm round trip. The size is one line at the top of each file
# (`.equ N,` in the .basm, `local N =` in the .lua), which this script
# rewrites. Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"
LUA=${LUA:-lua5.4}
have_lua=1
command -v "$LUA" >/dev/null 2>&1 || have_lua=0

# check PROG SIZE REFERENCE: PROG at SIZE against its twin and the reference
# output (its lines separated by "/")
check() {
    prog=$1 size=$2
    printf '%s\n' "$3" | tr / '\n' >"$T/$prog.want"
    basm=examples/$prog.basm lua=bench/lua/$prog.lua
    if [ "$(grep -c '^\.equ N, [0-9][0-9]*  *;' "$basm")" -eq 1 ] &&
        [ "$(grep -c '^local N = [0-9][0-9]*$' "$lua")" -eq 1 ]; then
        ok "$prog: the size is one line of the .basm and one of the .lua"
    else
        bad "$prog: want one '.equ N, SIZE' line in $basm and one 'local N = SIZE' in $lua"
        return
    fi
    sed "s/^\.equ N, [0-9]*/.equ N, $size/" "$basm" >"$T/$prog.basm"
    sed "s/^local N = [0-9]*\$/local N = $size/" "$lua" >"$T/$prog.lua"
    if "$BIB" run "$T/$prog.basm" >"$T/$prog.bib.out" 2>"$T/err"; then
        if cmp -s "$T/$prog.bib.out" "$T/$prog.want"; then
            ok "$prog N=$size: bib prints the Benchmarks Game's reference output"
        else
            bad "$prog N=$size: bib printed '$(cat "$T/$prog.bib.out")', the reference is '$(cat "$T/$prog.want")'"
        fi
    else
        bad "$prog N=$size: bib run failed: $(cat "$T/err")"
    fi
    if [ $have_lua -eq 0 ]; then
        echo "SKIP $prog N=$size: the Lua twin: $LUA is not installed (make deps installs it)"
    elif ! "$LUA" "$T/$prog.lua" >"$T/$prog.lua.out" 2>"$T/err"; then
        bad "$prog N=$size: the Lua twin failed: $(cat "$T/err")"
    elif cmp -s "$T/$prog.bib.out" "$T/$prog.lua.out"; then
        ok "$prog N=$size: bib prints the same bytes as its Lua twin"
    else
        bad "$prog N=$size: bib printed '$(cat "$T/$prog.bib.out")', the Lua twin '$(cat "$T/$prog.lua.out")'"
    fi
    if "$BIB" asm "$basm" -o "$T/$prog.bib" && "$BIB" dis "$T/$prog.bib" >"$T/$prog.dis.basm" &&
        "$BIB" asm "$T/$prog.dis.basm" -o "$T/$prog.again.bib" && cmp -s "$T/$prog.bib" "$T/$prog.again.bib"; then
        ok "$prog: asm/dis/asm round trip"
    else
        bad "$prog: asm/dis/asm round trip"
    fi
}

check nbody 1000 "-0.169075164/-0.169087605"
check fannkuch 7 "228/Pfannkuchen(7) = 16"
check spectralnorm 100 "1.274219991"

finish
