#!/bin/sh
# `make fresh-check`: the README's two commands on a fresh Debian 12.
#
# Makes a minimal Debian 12 root with mmdebstrap (apt, make, gcc and git
# only, as a new user's machine might be), clones this repository's HEAD
# into it, and runs `make demo` and then `make test` there (FRESH_STEPS
# overrides the list). Each step's log is kept in $OUT; when one fails, the
# report names what the log says is missing (a library, a header, a program)
# and the Debian package that provides it here, when one does.
# Needs root (mmdebstrap's root mode) and a Debian mirror. A few GB in $DIR.
#
#   FRESH_DIR   where the root goes (default $BUILD/fresh; removed first)
#   FRESH_STEPS the commands to run, ';'-separated (default "make demo;make test")
#   FRESH_MIRROR the Debian mirror (default http://deb.debian.org/debian)
set -u
BUILD=${BUILD:-build}
DIR=${FRESH_DIR:-$BUILD/fresh}
OUT=$BUILD/fresh-check
STEPS=${FRESH_STEPS:-make demo;make test}
MIRROR=${FRESH_MIRROR:-http://deb.debian.org/debian}
if [ "$(id -u)" -ne 0 ]; then
    echo "fresh-check: needs root (mmdebstrap makes the root as root)" >&2
    exit 1
fi
if ! command -v mmdebstrap >/dev/null 2>&1; then
    sh tools/install-deps.sh mmdebstrap || exit 1
fi
SRC=$(pwd)
BRANCH=$(git rev-parse --abbrev-ref HEAD)
# The mounts of the root's /proc, /sys and /dev (recursive: /dev/pts, the
# cgroups) come off before anything in it is removed.
unmount() {
    for m in proc sys dev; do umount -R "$DIR/$m" 2>/dev/null; done
}
unmount
if [ -d "$DIR" ] && grep -q " $(cd "$DIR" && pwd -P)/" /proc/mounts; then
    echo "fresh-check: something is still mounted under $DIR; unmount it first" >&2
    exit 1
fi
rm -rf "$DIR" "$OUT"
mkdir -p "$OUT"
start=$(date +%s)
echo "fresh-check: making a Debian 12 root in $DIR (apt, make, gcc, git)"
if ! mmdebstrap --variant=apt --include=make,gcc,git,ca-certificates --mode=root \
    bookworm "$DIR" "$MIRROR" >"$OUT/mmdebstrap.log" 2>&1; then
    echo "fresh-check: mmdebstrap failed; see $OUT/mmdebstrap.log:"
    tail -5 "$OUT/mmdebstrap.log"
    exit 1
fi
echo "fresh-check: root made in $(($(date +%s) - start)) s"
git clone -q --branch "$BRANCH" "$SRC" "$DIR/root/bib" || exit 1
echo "fresh-check: cloned $BRANCH at $(git -C "$DIR/root/bib" rev-parse --short HEAD)"

# The root gets /proc, /sys and /dev for the steps, and the host's resolver.
cp /etc/resolv.conf "$DIR/etc/resolv.conf"
# Slave mounts: unmounting them never reaches the host's own.
trap unmount EXIT
mount -t proc proc "$DIR/proc" && mount --rbind /sys "$DIR/sys" && mount --make-rslave "$DIR/sys" &&
    mount --rbind /dev "$DIR/dev" && mount --make-rslave "$DIR/dev" || exit 1

# missing LOG: what a failed step's log says is missing, one line each.
missing() {
    sed -n -e 's/.*cannot find -l\([^: ]*\).*/library lib\1.so (-l\1)/p' \
        -e 's/.*fatal error: \([^:]*\): No such file or directory.*/header \1/p' \
        -e 's/.*: \([^: ]*\): \(command \)\{0,1\}not found$/program \1/p' \
        -e 's/.*No module named .\([^'"'"']*\).*/Python module \1/p' "$1" | sort -u
}
# package WHAT: the Debian package that provides it on this (the host) machine.
package() {
    case $1 in
    library*) f=/$(echo "$1" | sed 's/library \([^ ]*\).*/\1/') ;;
    header*) f=/$(echo "$1" | sed 's/header //') ;;
    program*) f=/bin/$(echo "$1" | sed 's/program //') ;;
    *) return ;;
    esac
    # The native one: not a 32-bit or x32 multilib copy.
    dpkg -S "*$f" 2>/dev/null | grep -v '/32/\|/x32/\|^lib32\|^libx32' | head -1 | cut -d: -f1
}

status=0
n=0
IFS=';'
for step in $STEPS; do
    n=$((n + 1))
    log=$OUT/step$n.log
    t0=$(date +%s)
    echo "fresh-check: [$step] ..."
    if env -i HOME=/root TERM=dumb PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        chroot "$DIR" /bin/sh -c "cd /root/bib && $step" >"$log" 2>&1; then
        echo "fresh-check: [$step] passed in $(($(date +%s) - t0)) s"
        tail -1 "$log"
    else
        status=1
        echo "fresh-check: [$step] FAILED after $(($(date +%s) - t0)) s; log: $log"
        tail -5 "$log" | sed 's/^/    /'
        missing "$log" | while read -r what; do
            p=$(package "$what")
            echo "fresh-check: missing $what${p:+ (Debian package $p: add it to DEB_PACKAGES)}"
        done
        break
    fi
done
unset IFS
echo "fresh-check: $([ $status -eq 0 ] && echo passed || echo FAILED) in $(($(date +%s) - start)) s; logs in $OUT"
exit $status
