# tests/cli/lib/common.sh: the start every CLI test script shares, sourced as
#   . "$(dirname "$0")/lib/common.sh"
# It sets BIB, BUILD and PY (from the environment, or the defaults), a
# temporary folder T removed at exit, and the check counters:
#   ok NAME     a check passed;  bad WHY   a check failed (WHY says how);
#   finish      prints "N passed, N failed" and exits 1 when any failed.
# tools/run-tests.sh runs tests/cli/*.sh, so this file lives a folder down.
set -u
BIB=${BIB:-build/bib}
BUILD=${BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit $?
}
