#!/bin/sh
# The man page and the bash completion against `bib help` (whose commands and
# options are cli/args.c's tables): every command is in the man page's
# SYNOPSIS and offered by the completion, every option of every command is
# described in man/bib.1 and offered by the completion after that command,
# and every exit status of the help's table is in the man page's EXIT STATUS.
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"
MAN=man/bib.1
COMPLETION=cli/completion.bash

# The commands `bib help` lists, one a line.
$BIB help 2>&1 | sed -n '/^commands:/,/^$/p' | sed -n 's/^  \([a-z]\{1,\}\) .*/\1/p' >"$T/commands"
n=$(wc -l <"$T/commands")
[ "$n" -ge 8 ] && ok "bib help lists $n commands" || bad "bib help lists $n commands: $(cat "$T/commands")"

# options CMD: the options `bib help CMD` lists, one a line (-o, --output...).
options() {
    $BIB help "$1" 2>&1 | sed -n '/^options:/,/^$/p' | grep '^  -' | sed 's/^  //; s/  .*//' |
        grep -oE -- '(^|, )--?[A-Za-z][A-Za-z-]*' | sed 's/^, //'
}

# complete WORD...: what the completion offers for the command line "bib
# WORD...", the last word being completed, one a line.
complete_words() {
    bash -c '. "$1"; shift; shopt -s extglob
        COMP_WORDS=(bib "$@"); COMP_CWORD=$#; COMPREPLY=()
        _bib; printf "%s\n" "${COMPREPLY[@]}"' sh "$COMPLETION" "$@"
}

# ---- commands ------------------------------------------------------------
complete_words "" >"$T/offered"
missing=
while read -r cmd; do
    grep -qx -- "$cmd" "$T/offered" || missing="$missing $cmd"
done <"$T/commands"
[ -z "$missing" ] && ok "completion offers every command" ||
    bad "completion does not offer the commands:$missing"
complete_words - >"$T/offered"
missing=
for opt in -h --help -V --version; do
    grep -qx -- "$opt" "$T/offered" || missing="$missing $opt"
done
[ -z "$missing" ] && ok "completion offers bib's own options" ||
    bad "completion does not offer:$missing"
sed -n '/^\.SH SYNOPSIS/,/^\.SH /p' "$MAN" >"$T/synopsis"
missing=
while read -r cmd; do
    grep -qx -- ".B bib $cmd" "$T/synopsis" || missing="$missing $cmd"
done <"$T/commands"
[ -z "$missing" ] && ok "$MAN: SYNOPSIS has every command" ||
    bad "$MAN: SYNOPSIS lacks the commands:$missing"

# ---- options -------------------------------------------------------------
while read -r cmd; do
    options "$cmd" >"$T/options"
    [ -s "$T/options" ] || {
        bad "bib help $cmd lists no options"
        continue
    }
    complete_words "$cmd" x.basm - >"$T/offered"
    missing=
    undescribed=
    while read -r opt; do
        # --trace is offered as --trace and --trace=json, --deny as --deny=device-code.
        grep -qx -e "$opt" -e "$opt=.*" "$T/offered" || missing="$missing $opt"
        # The option as a whole word of the page (\-o, not inside \-\-output).
        grep -qE -- "(^|[^-A-Za-z0-9])$(printf '%s' "$opt" | sed 's/-/\\\\-/g')([^-A-Za-z0-9]|\$)" "$MAN" ||
            undescribed="$undescribed $opt"
    done <"$T/options"
    [ -z "$missing" ] && ok "completion offers every option of $cmd ($(wc -l <"$T/options"))" ||
        bad "completion after '$cmd' does not offer:$missing"
    [ -z "$undescribed" ] && ok "$MAN describes every option of $cmd" ||
        bad "$MAN does not describe these options of $cmd:$undescribed"
done <"$T/commands"

# ---- exit status ---------------------------------------------------------
$BIB help 2>&1 | sed -n '/^exit status/,$p' | sed -n 's/^  \([0-9]\([-0-9, ]*[0-9]\)\{0,1\}\)  .*/\1/p' >"$T/statuses"
n=$(wc -l <"$T/statuses")
[ "$n" -ge 10 ] && ok "bib help lists $n exit statuses" || bad "bib help lists $n exit statuses"
sed -n '/^\.SH EXIT STATUS/,/^\.SH /p' "$MAN" | sed 's/\\-/-/g' >"$T/exit"
missing=
while read -r status; do
    grep -qx -- ".B $status" "$T/exit" || missing="$missing $status"
done <"$T/statuses"
[ -z "$missing" ] && ok "$MAN: EXIT STATUS has every status of bib help" ||
    bad "$MAN: EXIT STATUS lacks:$missing"

# ---- version -------------------------------------------------------------
for page in man/*.[1-9]; do
    if head -1 "$page" | grep -q '"bib @VERSION@"'; then ok "$page: .TH takes the version at install"; else
        bad "$page: $(head -1 "$page") (the version is written by make install: \"bib @VERSION@\")"
    fi
done
finish
