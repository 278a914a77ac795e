#!/bin/sh
# `make test`: every test suite, one after another. Each suite prints its own
# results; this script ends with one line "N passed, N failed" counting suites
# and exits non-zero when any failed. A suite that cannot run here (no GPU)
# prints SKIP with its reason inside its own output and still counts as run.
#
# BIB_TEST_SANITIZED=1 (make sanitize) runs the same suites on the ASan and
# UBSan build in $BUILD, leaving out the checks of the sources (spec, format),
# which do not depend on the build.
set -u
BUILD=${BUILD:-build}
BIB=${BIB:-$BUILD/bib}
SANITIZED=${BIB_TEST_SANITIZED:-}
export BUILD BIB
if [ -n "$SANITIZED" ]; then
    # Any report fails the process; the leak check is turned on per suite.
    # protect_shadow_gap=0: the CUDA driver maps memory where ASan's shadow
    # gap would be, and fails to start without it.
    export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:halt_on_error=1:protect_shadow_gap=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
fi
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

# The leak check on for a suite that runs on the CPU only: with Vulkan in the
# process, LeakSanitizer reports the driver's own allocations.
with_leak_check() {
    if [ -n "$SANITIZED" ]; then
        ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=1" "$@"
    else
        "$@"
    fi
}

if [ -z "$SANITIZED" ]; then
    suite spec-check make -s spec-check
    if command -v clang-format >/dev/null 2>&1; then
        suite format-check make -s format-check
    else
        echo "==== format-check"
        echo "SKIP: format-check: clang-format is not installed (make deps installs it)"
    fi
fi
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    suite "unit:$(basename "$t")" "$t" --jobs 2
done
suite hex with_leak_check "$BIB" test --coverage tests/hex
for t in tests/cli/*.sh; do
    [ -f "$t" ] || continue
    suite "cli:$(basename "$t" .sh)" sh "$t"
done
# The collectives again under MPICH's launcher: bib speaks the MPICH ABI too.
suite cli:mpi-mpich env BIB_TEST_MPI=mpich sh tests/cli/mpi.sh
# The ONNX importer: its unit tests, and the ONNX node tests run through it
# on every executor (spec/onnx.md).
for t in tests/onnx/test_*.py tests/onnx/run-node-tests.py; do
    [ -f "$t" ] || continue
    suite "onnx:$(basename "$t" .py)" sh tests/onnx/run.sh "$t"
done
for t in tests/oracle/*.py; do
    [ -f "$t" ] || continue
    suite "oracle:$(basename "$t" .py)" "${PYTHON:-/usr/bin/python3}" "$t"
done
# Models exported from PyTorch, imported with tools/bib-onnx, against torch.
suite models "${PYTHON:-/usr/bin/python3}" tests/models/check.py
suite digits sh examples/digits/run.sh "$BUILD/digits"
suite generate sh examples/generate/run.sh "$BUILD/generate"

# Everything above again under ASan and UBSan (a build of its own), unless
# BIB_TEST_NO_SANITIZE=1 (make gpu-check runs it as a step of its own).
if [ -z "$SANITIZED" ] && [ -z "${BIB_TEST_NO_SANITIZE:-}" ]; then
    suite sanitize make -s --no-print-directory sanitize
fi

echo
[ -n "$failures" ] && echo "failed suites:$failures"
if [ -n "$SANITIZED" ]; then
    echo "sanitized: $passed passed, $failed failed"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
