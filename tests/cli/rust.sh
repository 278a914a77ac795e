#!/bin/sh
# The Rust crate (bindings/rust): `cargo test --offline` against the shared
# library in $BUILD (BIB_LIB_DIR), built into $BUILD/rust. The crate has no
# dependencies, so no registry is needed.
set -u
BUILD=${BUILD:-build}
CARGO=${CARGO:-$(command -v cargo || { [ -x "$HOME/.cargo/bin/cargo" ] && echo "$HOME/.cargo/bin/cargo"; })}
if [ -z "$CARGO" ]; then
    echo "SKIP: rust: cargo is not installed (Debian: apt-get install cargo)"
    exit 0
fi
if [ -n "${BIB_TEST_SANITIZED:-}" ]; then
    echo "SKIP: rust: the sanitized libbib.so needs the ASan runtime in the test binaries; the plain run tests the crate"
    exit 0
fi
LIB_DIR=$(cd "$BUILD" && pwd)
BIB_LIB_DIR=$LIB_DIR timeout 900 "$CARGO" test --offline --manifest-path bindings/rust/Cargo.toml \
    --target-dir "$LIB_DIR/rust" -- --nocapture 2>&1
