#!/bin/sh
# A dependency kit for a machine that has gcc, make, dpkg and the CUDA toolkit
# but neither Debian's packages nor a registry to fetch them from (the GPU
# machine). Two steps:
#
#   sh tools/gpu-kit.sh fetch          here, with apt: downloads the Debian
#                                      packages the build and tests need into
#                                      .kit/ (ignored by git), about 30 MB
#   sh tools/gpu-kit.sh unpack DIR     there: unpacks .kit/*.deb into DIR,
#                                      never into /
#
# then build and test against it there:
#
#   make KIT=DIR PYTHON=python3 gpu-check OUT=$OUT
#
# KIT (Makefile) adds DIR's headers and libraries to the build, puts DIR on
# PATH (glslc), LD_LIBRARY_PATH and the Vulkan layer path, and installs
# nothing. The Vulkan loader itself comes from ../shared/gpu/prepare-gl.sh.
set -eu

# What the build links or runs, with the shared libraries those need that a
# bare Ubuntu or Debian image may lack (Criterion pulls in libgit2's chain).
PACKAGES="libmimalloc-dev libmimalloc2.0 zlib1g-dev
libcriterion-dev libcriterion3 libnanomsg5 libgit2-1.5 libhttp-parser2.9
libmbedcrypto7 libmbedtls14 libmbedx509-1 libssh2-1 libgssapi-krb5-2 libkrb5-3
libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1
libvulkan1 libvulkan-dev vulkan-validationlayers glslc libshaderc1 libshaderc-dev
glslang-dev spirv-tools spirv-headers
libedit-dev libedit2 libbsd0 libmd0"

top=$(git rev-parse --show-toplevel 2>/dev/null || pwd)
kit="$top/.kit"

case "${1:-}" in
fetch)
    rm -rf "$kit"
    mkdir -p "$kit" /tmp/bib-kit-lists/partial
    o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/bib-kit-lists'
    # shellcheck disable=SC2086
    apt-get $o update -qq
    # shellcheck disable=SC2086
    (cd "$kit" && apt-get $o download $PACKAGES 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
    n=$(ls "$kit"/*.deb | wc -l)
    want=$(echo $PACKAGES | wc -w)
    if [ "$n" -ne "$want" ]; then
        echo "gpu-kit: fetched $n of $want packages" >&2
        exit 1
    fi
    echo "gpu-kit: $n packages, $(du -sh "$kit" | cut -f1) in $kit; carry .kit, then: sh tools/gpu-kit.sh unpack DIR"
    ;;
unpack)
    dir=${2:?usage: gpu-kit.sh unpack DIR}
    ls "$kit"/*.deb >/dev/null 2>&1 || { echo "gpu-kit: no .kit/*.deb: run 'sh tools/gpu-kit.sh fetch' and carry .kit" >&2; exit 1; }
    mkdir -p "$dir"
    for f in "$kit"/*.deb; do dpkg -x "$f" "$dir"; done
    # Debian's layer manifest names its library bare; give the loader its path.
    for m in "$dir"/usr/share/vulkan/explicit_layer.d/*.json; do
        [ -f "$m" ] && sed -i "s|\"library_path\": \"libVkLayer|\"library_path\": \"$dir/usr/lib/x86_64-linux-gnu/libVkLayer|" "$m"
    done
    echo "gpu-kit: unpacked into $dir; build with: make KIT=$dir PYTHON=python3 ..."
    ;;
*)
    echo "usage: sh tools/gpu-kit.sh fetch | unpack DIR" >&2
    exit 2
    ;;
esac
