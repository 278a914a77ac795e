#!/bin/sh
# `make demo`: a short tour of what BIB does, on the examples.
set -eu
BIB=${BIB:-build/bib}
say() { printf '\n\033[1m$ %s\033[0m\n' "$*" 2>/dev/null || printf '\n$ %s\n' "$*"; }
run() { say "$*"; "$@"; }

run $BIB --version
run $BIB run examples/hello.basm
run $BIB run examples/fib.basm
run $BIB asm examples/sieve.basm -o build/sieve.bib
run $BIB run build/sieve.bib
say "$BIB dis build/sieve.bib | head -20"
$BIB dis build/sieve.bib | head -20
say "$BIB run --trace examples/hello.basm 2>&1 >/dev/null | head -8"
$BIB run --trace examples/hello.basm 2>&1 >/dev/null | head -8
if [ -f examples/mlp.basm ] && [ -f tools/make-npy.py ]; then
    run /usr/bin/python3 tools/make-npy.py build/demo
    run $BIB run examples/mlp.basm --input x=build/demo/x.npy --input W1=build/demo/W1.npy \
        --input b1=build/demo/b1.npy --input W2=build/demo/W2.npy --input b2=build/demo/b2.npy \
        --output y=build/demo/y.npy
    /usr/bin/python3 -c "import numpy; print(numpy.load('build/demo/y.npy'))"
fi
if [ -f tools/bib-onnx ]; then
    say "make digits   # a model trained with torch, imported from ONNX, run by bib"
    BIB=$BIB sh examples/digits/run.sh build/digits
fi
if [ -f tools/bib-onnx ] && [ -f examples/generate/run.sh ]; then
    say "make generate   # a small GPT trained with torch, generating text through its cache in bib"
    BIB=$BIB sh examples/generate/run.sh build/generate
fi
