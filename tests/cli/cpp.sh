#!/bin/sh
# The C++ wrappers (include/bib.hpp): tests/cpp/test_bib.cpp built with
# g++ -std=c++17 -Wall -Wextra -Wshadow -pedantic -Werror against the shared library
# in $BUILD, then run. Prints the test's lines and "N passed, N failed".
set -u
BUILD=${BUILD:-build}
CXX=${CXX:-g++}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
if ! command -v "$CXX" >/dev/null 2>&1; then
    echo "SKIP: cpp: $CXX is not installed (make deps installs g++)"
    exit 0
fi
# Under the sanitizers the library is the sanitized one: the test program
# carries the same runtime.
SAN=
[ -n "${BIB_TEST_SANITIZED:-}" ] && SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
if ! $CXX -std=c++17 -Wall -Wextra -Wshadow -pedantic -Werror $SAN -Iinclude -o "$T/test_bib" \
    tests/cpp/test_bib.cpp -L"$BUILD" -lbib -Wl,-rpath,"$(cd "$BUILD" && pwd)" 2>"$T/err"; then
    cat "$T/err"
    echo "0 passed, 1 failed"
    exit 1
fi
"$T/test_bib"
