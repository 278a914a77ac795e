#!/bin/sh
# tools/asm-fingerprint.sh: one line per assembly of every source in the
# tree, with the sha256 of what `bib asm` made of it, so that a change to the
# assembler can show that it changes no byte and no diagnostic.
#
# Usage: sh tools/asm-fingerprint.sh [OUT]     (BIB=PATH picks the binary)
#
# The sources are every .basm file under examples/, bench/ and tests/, and the
# `-- asm` section of every tests/**/*.hex case (spec/hex-tests.md). Each is
# assembled twice, plainly and with --strip. A line reads
#   SHA256 module|stripped|error:RC PATH
# where the hash is of the module's bytes, or, when the assembly fails, of
# what `bib asm` wrote on stderr (the diagnostics, with their line:col).
# Paths are relative to the repository root, and a hex case's section is
# assembled as tests/.../NAME.basm, so the source name recorded in each
# module and every message are the same on every machine. The lines are
# sorted; the last one counts them. Compare two runs with diff.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIB=${BIB:-$ROOT/build/bib}
case $BIB in /*) ;; *) BIB=$(pwd)/$BIB ;; esac
[ -x "$BIB" ] || { echo "asm-fingerprint: no $BIB (run make first)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# assemble DIR REL: assembles DIR/REL from DIR, both ways, one line each.
assemble() {
    for how in module stripped; do
        flag=
        [ "$how" = stripped ] && flag=--strip
        rm -f "$tmp/out.bib"
        if (cd "$1" && "$BIB" asm $flag "$2" -o "$tmp/out.bib") >"$tmp/log" 2>&1; then
            sum=$(sha256sum <"$tmp/out.bib")
            echo "${sum%% *} $how $2"
        else
            rc=$?
            sum=$(sha256sum <"$tmp/log")
            echo "${sum%% *} error:$rc $2"
        fi
    done
}

{
    cd "$ROOT"
    find examples bench tests -name '*.basm' | sort | while read -r f; do
        assemble "$ROOT" "$f"
    done
    find tests -name '*.hex' | sort | while read -r f; do
        grep -q '^-- asm' "$f" || continue
        src="$tmp/src/${f%.hex}.basm"
        mkdir -p "$(dirname "$src")"
        awk '/^-- / { on = ($2 == "asm"); next } on' "$f" >"$src"
        assemble "$tmp/src" "${f%.hex}.basm"
    done
} | sort -k3,3 -k2,2 >"$tmp/lines"
{
    cat "$tmp/lines"
    echo "$(wc -l <"$tmp/lines") assemblies, $(grep -c ' error:' "$tmp/lines" || true) failing"
} >"${1:-/dev/stdout}"
