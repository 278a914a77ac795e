#!/bin/sh
# `make install` and `make uninstall`: a staged install (DESTDIR) under a
# prefix that does not exist, the installed files, the soname and its links,
# the exported symbols (only bib_* functions that bib.h declares), the
# examples/embed.c host built with pkg-config against the shared and the
# static library and run, the Python package found under the prefix, and an
# uninstall that leaves no file behind.
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"
SRC=$(pwd)
if [ -n "${BIB_TEST_SANITIZED:-}" ]; then
    echo "SKIP: install: installs the plain build; the sanitized run tests that build in place"
    exit 0
fi
PREFIX=/opt/bib-install-test
D=$T/dest
R=$D$PREFIX
MAKE="make -s --no-print-directory BUILD=$BUILD PREFIX=$PREFIX DESTDIR=$D"

if $MAKE install >"$T/log" 2>&1; then ok "make install DESTDIR=... PREFIX=$PREFIX"; else
    bad "make install: $(tail -5 "$T/log")"
    finish
fi
VERSION=$(sed -n 's/^#define BIB_VERSION_STRING "\(.*\)"/\1/p' include/bib.h)
MAJOR=${VERSION%%.*}
for f in bin/bib bin/bib-onnx share/man/man1/bib-onnx.1 lib/libbib.so.$VERSION lib/libbib-glsl.so.$MAJOR lib/libbib.a include/bib.h include/bib.hpp \
    lib/pkgconfig/bib.pc share/man/man1/bib.1 share/man/man5/bib-asm.5 \
    share/bash-completion/completions/bib; do
    if [ -f "$R/$f" ]; then ok "installs $f"; else bad "$f is not installed"; fi
done
for f in share/man/man1/bib.1 share/man/man1/bib-onnx.1 share/man/man5/bib-asm.5; do
    if head -1 "$R/$f" | grep -q "\"bib $VERSION\""; then ok "$f says bib $VERSION"; else
        bad "$f: $(head -1 "$R/$f")"
    fi
done
[ "$(readlink "$R/lib/libbib.so.$MAJOR")" = "libbib.so.$VERSION" ] &&
    ok "libbib.so.$MAJOR -> libbib.so.$VERSION" || bad "libbib.so.$MAJOR: $(ls -l "$R/lib")"
[ "$(readlink "$R/lib/libbib.so")" = "libbib.so.$MAJOR" ] &&
    ok "libbib.so -> libbib.so.$MAJOR" || bad "libbib.so link: $(ls -l "$R/lib")"
SONAME=$(readelf -d "$R/lib/libbib.so.$VERSION" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$SONAME" = "libbib.so.$MAJOR" ] && ok "soname $SONAME" || bad "soname is '$SONAME'"

# Every function bib.h declares is marked BIB_API (unmarked, it would be
# hidden); every exported symbol is such a function, and every one exported.
unmarked=$(grep -nE '^[a-z_]+[a-z_ *]*[ *]bib_[a-z0-9_]+\(' include/bib.h | grep -v ':static inline ' | tr '\n' ' ')
[ -z "$unmarked" ] && ok "every function bib.h declares is BIB_API" || bad "declared without BIB_API: $unmarked"
nm -D --defined-only "$R/lib/libbib.so.$VERSION" | awk '{print $3}' | sort >"$T/exported"
sed -n 's/^BIB_API [^(]*[ *]\(bib_[a-z0-9_]*\)(.*/\1/p' include/bib.h | sort -u >"$T/declared"
n=$(wc -l <"$T/exported")
[ "$n" -gt 0 ] && [ "$n" -le 200 ] && ok "$n exported symbols (at most 200)" || bad "$n exported symbols"
extra=$(comm -23 "$T/exported" "$T/declared" | tr '\n' ' ')
[ -z "$extra" ] && ok "every exported symbol is a bib_ function bib.h declares" ||
    bad "exported but not declared in bib.h: $extra"
missing=$(comm -13 "$T/exported" "$T/declared" | tr '\n' ' ')
[ -z "$missing" ] && ok "every BIB_API function is exported" || bad "declared, not exported: $missing"

# The GLSL compiler library exports its one entry point, and libbib.so
# needs no C++ runtime (the shader compiler is not in it).
glsl_exports=$(nm -D --defined-only "$R/lib/libbib-glsl.so.$MAJOR" | awk '{print $3}' | tr '\n' ' ')
[ "$glsl_exports" = "bib_glsl_compile " ] && ok "libbib-glsl.so.$MAJOR exports bib_glsl_compile only" ||
    bad "libbib-glsl.so.$MAJOR exports: $glsl_exports"
if readelf -d "$R/lib/libbib.so.$VERSION" | grep -q "NEEDED.*libstdc++"; then
    bad "libbib.so needs libstdc++"
else
    ok "libbib.so needs no libstdc++: $(ls -l "$R/lib/libbib.so.$VERSION" | awk '{print $5}') bytes"
fi

# pkg-config against the staged tree: the sysroot maps its -I and -L there.
export PKG_CONFIG_PATH="$R/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$D"
if pkg-config --exists bib && [ "$(pkg-config --modversion bib)" = "$VERSION" ]; then
    ok "pkg-config finds bib $VERSION"
else
    bad "pkg-config: $(pkg-config --modversion bib 2>&1)"
fi
CC=${CC:-cc}
if $CC -o "$T/embed_shared" examples/embed.c $(pkg-config --cflags --libs bib) 2>"$T/err"; then
    ok "cc embed.c \$(pkg-config --cflags --libs bib)"
else
    bad "shared link: $(head -5 "$T/err")"
fi
if readelf -d "$T/embed_shared" 2>/dev/null | grep -q "NEEDED.*\[libbib.so.$MAJOR\]"; then
    ok "the shared host needs libbib.so.$MAJOR"
else
    bad "the shared host does not need libbib.so.$MAJOR"
fi
out=$(LD_LIBRARY_PATH="$R/lib" "$T/embed_shared" 2>&1)
case $out in *"= 385"*"host saw 385"*) ok "the shared host runs: $(echo "$out" | tail -1)" ;;
*) bad "the shared host: $out" ;; esac
LIBS_STATIC=$(pkg-config --static --libs bib | sed 's/-lbib /-l:libbib.a /')
if $CC -o "$T/embed_static" examples/embed.c $(pkg-config --cflags bib) $LIBS_STATIC 2>"$T/err"; then
    ok "cc embed.c with pkg-config --static against libbib.a"
else
    bad "static link: $(head -5 "$T/err")"
fi
if readelf -d "$T/embed_static" 2>/dev/null | grep -q "libbib"; then
    bad "the static host still needs libbib.so"
else
    ok "the static host needs no libbib.so"
fi
out=$("$T/embed_static" 2>&1)
case $out in *"= 385"*"host saw 385"*) ok "the static host runs" ;; *) bad "the static host: $out" ;; esac

if bash -c ". '$R/share/bash-completion/completions/bib' && complete -p bib" >/dev/null 2>&1; then
    ok "the bash completion defines completion for bib"
else
    bad "the bash completion does not load"
fi
if "$R/bin/bib" --version >/dev/null 2>&1; then ok "the installed bib runs"; else bad "bin/bib --version"; fi

# The Python package, through its installed library path (no DESTDIR).
P=$T/prefix
if make -s --no-print-directory BUILD="$BUILD" PREFIX="$P" install >"$T/log" 2>&1; then
    site=$(ls -d "$P"/lib/python3*/dist-packages 2>/dev/null | head -1)
    got=$(cd "$T" && PYTHONPATH="$site" "$PY" -c 'import bib; print(bib.library_path()); m = bib.assemble(".func main regs=1\n LDI r0, 7\n HALT r0\n.end\n"); print(m.run().exit_value)' 2>&1)
    case $got in "$P/lib/libbib.so.$MAJOR"*7) ok "import bib under the prefix loads $P/lib/libbib.so.$MAJOR" ;;
    *) bad "import bib under the prefix: $got" ;; esac
    # GLSL through the installed libbib.so: the compiler library beside it.
    got=$(cd "$T" && PYTHONPATH="$site" "$PY" -c 'import bib, sys; print(len(bib.load(sys.argv[1]).bytes) > 0)' \
        "$SRC/examples/vk_custom.basm" 2>&1)
    [ "$got" = True ] && ok "the installed libbib.so assembles GLSL with libbib-glsl.so.$MAJOR" ||
        bad "GLSL through the installed libbib.so: $got"
    rm "$P/lib/libbib-glsl.so.$MAJOR"
    got=$(cd "$T" && PYTHONPATH="$site" "$PY" -c 'import bib, sys
try:
    bib.load(sys.argv[1])
except bib.AssemblyError as e:
    print(e.message.splitlines()[0])' "$SRC/examples/vk_custom.basm" 2>&1)
    case $got in *"vk_custom.basm:11:1: error: "*"GLSL needs the shader compiler libbib-glsl.so.$MAJOR, which could not be loaded"*)
        ok "without libbib-glsl.so.$MAJOR, GLSL is an assembly error at the .shader line" ;;
    *) bad "without libbib-glsl.so.$MAJOR: $got" ;; esac
    # bib-onnx under the prefix finds the package installed there.
    if "$PY" -c 'import onnx' 2>/dev/null; then
        "$PY" -c 'import onnx, sys
from onnx import helper, TensorProto as T
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
    [helper.make_tensor_value_info("x", T.FLOAT, [3])], [helper.make_tensor_value_info("y", T.FLOAT, [3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])' "$T/relu.onnx"
        if (cd "$T" && PYTHONDONTWRITEBYTECODE=1 "$P/bin/bib-onnx" relu.onnx -o relu.bib) >"$T/err" 2>&1 &&
            got=$(PYTHONPATH="$site" "$PY" -c 'import bib, sys; print(list(bib.load(sys.argv[1]).run({"x": [-1, 0, 2]})["y"]))' \
                "$T/relu.bib" 2>&1) && [ "$got" = "[0.0, 0.0, 2.0]" ]; then
            ok "the installed bib-onnx imports a model that runs"
        else
            bad "the installed bib-onnx: $(cat "$T/err") ${got:-}"
        fi
    else
        echo "SKIP: the installed bib-onnx: python3-onnx is missing"
    fi
    make -s --no-print-directory BUILD="$BUILD" PREFIX="$P" uninstall >/dev/null 2>&1
else
    bad "make install PREFIX=$P: $(tail -5 "$T/log")"
fi

if $MAKE uninstall >"$T/log" 2>&1; then ok "make uninstall"; else bad "make uninstall: $(tail -5 "$T/log")"; fi
left=$(find "$D" "$P" ! -type d 2>/dev/null | head -5)
[ -z "$left" ] && ok "uninstall leaves no file behind" || bad "left behind: $left"
finish
