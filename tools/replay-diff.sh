#!/bin/sh
# tools/replay-diff.sh [DIR|FILE]...: runs .bib files (a fuzz corpus, by
# default build/fuzz/corpus/diff and build/fuzz/corpus/run) on the CPU
# executor and on each GPU executor this machine has, and reports every file
# whose outcome differs: exit status, standard output or the error message.
# The fuzz build behind fuzz_diff has the CPU executor only; this carries its
# promise (one program, the same bits on every executor) to Vulkan and CUDA.
#
# Each run has the fuzzers' caps (--fuel 100000 --max-memory 64M). A GPU run
# that fails for want of device memory is counted apart, not as a
# difference. Ends with "N passed, N failed" (files compared) and exits 1 on
# any difference. BIB names the bib binary (default build/bib); REPLAY_MAX=N
# compares only the first N files in name order (fuzz corpus names are
# hashes, so that is a sample).
set -u
BIB=${BIB:-build/bib}
[ $# -gt 0 ] || set -- build/fuzz/corpus/diff build/fuzz/corpus/run
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# A tensor opcode, so that the executor starts (executors start at first use).
printf '.func main regs=2\n    LDI r0, 4\n    ALLOC t0, f32, r0, 1\n    THASH r1, t0\n    LDI r1, 0\n    HALT r1\n.end\n' \
    >"$T/probe.basm"
backends=""
for b in vulkan cuda; do
    if why=$("$BIB" run --backend=$b "$T/probe.basm" 2>&1 >/dev/null); then
        backends="$backends $b"
    else
        echo "SKIP $b: $why"
    fi
done
if [ -z "$backends" ]; then
    echo "SKIP: no GPU executor here; nothing to compare with the CPU"
    echo "0 passed, 0 failed"
    exit 0
fi

# run BACKEND FILE OUT: status, stdout and stderr of one run, in OUT.*
run() {
    "$BIB" run --backend="$1" --fuel 100000 --max-memory 64M "$2" >"$3.out" 2>"$3.err"
    echo $? >"$3.rc"
}

files=$(find "$@" -type f 2>/dev/null | sort | head -n "${REPLAY_MAX:-1000000}")
if [ -z "$files" ]; then
    echo "SKIP: no .bib files in $* (make fuzz grows the corpora)"
    echo "0 passed, 0 failed"
    exit 0
fi
pass=0
fail=0
device_oom=0
for f in $files; do
    run cpu "$f" "$T/cpu"
    ok=1
    for b in $backends; do
        run "$b" "$f" "$T/$b"
        if grep -q "out of device memory\|device memory" "$T/$b.err"; then
            device_oom=$((device_oom + 1))
            continue
        fi
        if ! cmp -s "$T/cpu.rc" "$T/$b.rc" || ! cmp -s "$T/cpu.out" "$T/$b.out" ||
            ! cmp -s "$T/cpu.err" "$T/$b.err"; then
            ok=0
            echo "FAIL $f: cpu and $b differ"
            echo "  cpu: exit $(cat "$T/cpu.rc"), $(wc -c <"$T/cpu.out") output bytes, $(head -c 300 "$T/cpu.err")"
            echo "  $b: exit $(cat "$T/$b.rc"), $(wc -c <"$T/$b.out") output bytes, $(head -c 300 "$T/$b.err")"
        fi
    done
    if [ $ok = 1 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done
[ $device_oom -gt 0 ] && echo "note: $device_oom GPU runs ran out of device memory and were not compared"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
