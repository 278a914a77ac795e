#!/bin/sh
# Installs the Debian packages named on the command line that are missing.
# Quiet when everything is present; needs root (or sudo) otherwise.
missing=""
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null 2>&1 || true
if ! $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null; then
    echo "install-deps: could not install:$missing" >&2
    exit 1
fi
