#!/bin/sh
# `make test`: every test suite, one after another. Each suite prints its own
# results; this script ends with one line "N passed, N failed" counting suites
# and exits non-zero when any failed. A suite that cannot run here (no GPU)
# prints SKIP with its reason inside its own output and still counts as run.
set -u
BUILD=${BUILD:-build}
passed=0
failed=0
failures=""

suite() {
    name=$1
    shift
    echo "==== $name"
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failures="$failures $name"
        echo "==== $name: FAILED"
    fi
}

suite spec-check make -s spec-check
if command -v clang-format >/dev/null 2>&1; then
    suite format-check make -s format-check
else
    echo "==== format-check"
    echo "SKIP: format-check: clang-format is not installed (make deps installs it)"
fi
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    suite "unit:$(basename "$t")" "$t" --jobs 2
done
suite hex "$BUILD/bib" test --coverage tests/hex
for t in tests/cli/*.sh; do
    [ -f "$t" ] || continue
    suite "cli:$(basename "$t" .sh)" sh "$t"
done
for t in tests/oracle/*.py; do
    [ -f "$t" ] || continue
    suite "oracle:$(basename "$t" .py)" "${PYTHON:-/usr/bin/python3}" "$t"
done

echo
[ -n "$failures" ] && echo "failed suites:$failures"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
