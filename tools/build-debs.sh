#!/usr/bin/env bash
# tools/build-debs.sh BUILD_DIR OUT_DIR
#
# Builds our .debs from an already built tree in seconds, with the real
# debian/ metadata: `cmake --install` of BUILD_DIR into a staging directory
# (laid out as the package build lays it out: /usr, the multiarch library
# directory, /lib/systemd/system), then `debian/rules binary` on a fresh copy
# of debian/ that packages the staged files instead of configuring and
# building (PVC_DEB_STAGED); control, install lists, units and maintainer
# scripts are the ones dpkg-buildpackage uses. For the packaging test and
# quick trials: the binaries keep the paths compiled into BUILD_DIR (its
# install prefix), so packages for machines come from
# `dpkg-buildpackage -us -uc -b`. Neither the source tree nor BUILD_DIR is
# written to, except BUILD_DIR's install_manifest.txt.
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD_DIR OUT_DIR" >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

stage=$work/stage
DESTDIR=$stage cmake --install "$build" --prefix /usr >"$work/install.log" 2>&1 || {
    cat "$work/install.log" >&2
    echo "build-debs: cmake --install $build failed (is the tree fully built?)" >&2
    exit 1
}
# A development tree has a prefix other than /usr: its library directory is
# plain lib/ and its unit directory relative to the prefix.
move() {
    if [ -e "$stage/$1" ] && [ ! -e "$stage/$2" ]; then
        mkdir -p "$(dirname "$stage/$2")"
        mv "$stage/$1" "$stage/$2"
    fi
}
move usr/lib/pvc "usr/lib/$ma/pvc"
move usr/lib/cmake "usr/lib/$ma/cmake"
move usr/lib/systemd/system lib/systemd/system
rmdir "$stage/usr/lib/systemd" 2>/dev/null || true

# A clean copy of debian/ (no artefacts of an earlier package build in the source tree).
mkdir "$work/src"
cp -a "$root/debian" "$work/src/debian"
(cd "$work/src/debian" && rm -rf tmp .debhelper files ./*.substvars ./*.debhelper.log \
    pvc-common pvc-daemon pvc-cli pvc-dev pvc-client-cli)

(
    cd "$work/src"
    export PVC_DEB_STAGED=$stage DEB_RULES_REQUIRES_ROOT=no
    export DEB_BUILD_OPTIONS="nocheck nostrip noautodbgsym"
    export DPKG_DEB_COMPRESSOR_TYPE=gzip DPKG_DEB_COMPRESSOR_LEVEL=1
    debian/rules binary
) >"$work/rules.log" 2>&1 || {
    cat "$work/rules.log" >&2
    echo "build-debs: debian/rules binary failed" >&2
    exit 1
}
mv "$work"/*.deb "$out"/
ls "$out"/*.deb
