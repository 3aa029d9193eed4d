#!/usr/bin/env bash
# tests/packaging/swap_test.sh BUILD_DIR SOURCE_DIR
#
# Our packages replace the reference PVC's in place. Stand-ins with the
# reference's package names, files, units and maintainer-script behaviour
# (pvc-daemon-common, pvc-daemon-node, pvc-daemon-api, pvc-client-cli
# 0.9.82) are built here with dpkg-deb and installed into a throwaway root
# (dpkg --root, maintainer scripts run chrootless with DPKG_ROOT set); the
# node's configuration is the administrator's, as on a reference node. Then
# our packages (tools/build-debs.sh: the real debian/ metadata over this
# build tree) are installed over them, and finally purged. Nothing outside the
# throwaway root is touched; where the machine runs systemd, dpkg runs with
# /run/systemd hidden (a private mount namespace), so no maintainer script
# can reach the machine's systemd.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/pvc-pkg-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
R=$work/root
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}
check() {  # check DESCRIPTION COMMAND...
    local what=$1
    shift
    if "$@"; then echo "ok: $what"; else fail "$what"; fi
}
step() { echo "--- $*"; }

dpkg_root() {
    local cmd=(dpkg --root="$R" --force-script-chrootless --force-not-root --force-depends)
    if [ -d /run/systemd/system ]; then
        unshare --mount --propagation private sh -c 'mount -t tmpfs none /run/systemd && exec "$@"' sh "${cmd[@]}" "$@"
    else
        "${cmd[@]}" "$@"
    fi
}
owner() {  # the package owning $1 (diversion lines left out)
    dpkg-query --admindir="$R/var/lib/dpkg" -S "$1" 2>/dev/null | grep -v '^diversion by' |
        sed -n 's/^\([^:]*\): .*/\1/p' | head -1
}
status_of() {
    dpkg-query --admindir="$R/var/lib/dpkg" -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null | tr -d ' ' || true
}
installed() { [ "$(status_of "$1")" = ii ]; }
not_installed() { local s; s=$(status_of "$1"); [ -z "$s" ] || [ "$s" = un ] || [ "$s" = rc ] || [ "$s" = pn ]; }
same_file() { cmp -s "$1" "$2"; }

step "our packages from $build"
"$src/tools/build-debs.sh" "$build" "$work/ours" >/dev/null
for p in pvc-common pvc-daemon pvc-cli; do
    ls "$work/ours/${p}_"*.deb >/dev/null || { echo "FAIL: no $p package built" >&2; exit 1; }
done

step "stand-ins of the reference's packages"
# mkpkg NAME "EXTRA CONTROL LINES" FILE...: each FILE gets a line naming its package.
mkpkg() {
    local name=$1 extra=$2 d=$work/standin/$1
    shift 2
    mkdir -p "$d/DEBIAN"
    printf 'Package: %s\nVersion: 0.9.82\nArchitecture: all\nMaintainer: stand-in <stand-in@localhost>\n%sDescription: stand-in for the reference %s\n' \
        "$name" "$extra" "$name" >"$d/DEBIAN/control"
    for f in "$@"; do
        mkdir -p "$d/$(dirname "$f")"
        echo "reference $name: $f" >"$d/$f"
    done
}
mkpkg pvc-daemon-common "" usr/share/pvc/daemon_lib/__init__.py usr/share/pvc/daemon_lib/common.py \
    usr/share/pvc/daemon_lib/zkhandler.py
mkpkg pvc-daemon-node $'Depends: pvc-daemon-common\n' usr/share/pvc/pvcnoded.py usr/share/pvc/pvcnoded/Daemon.py \
    usr/share/pvc/pvcnoded.sample.yaml usr/share/pvc/plugins/disk usr/share/pvc/plugins/nics \
    usr/share/pvc/plugins/psql usr/share/pvc/plugins/load lib/systemd/system/pvcnoded.service lib/systemd/system/pvc.target \
    lib/systemd/system/pvcautoready.service
mkpkg pvc-daemon-api $'Depends: pvc-daemon-common\n' usr/share/pvc/pvcapid.py usr/share/pvc/pvcapid/flaskapi.py \
    usr/share/pvc/pvcapid.sample.yaml lib/systemd/system/pvcapid.service lib/systemd/system/pvcworkerd.service
mkpkg pvc-client-cli "" usr/bin/pvc usr/lib/python3/dist-packages/pvc/__init__.py
printf '[Unit]\nDescription=reference\n[Install]\nWantedBy=multi-user.target\n' \
    >"$work/standin/pvc-daemon-node/lib/systemd/system/pvc.target"
printf '[Unit]\nDescription=reference node daemon\n[Service]\nExecStart=/usr/share/pvc/pvcnoded.py\n[Install]\nWantedBy=pvc.target multi-user.target\n' \
    >"$work/standin/pvc-daemon-node/lib/systemd/system/pvcnoded.service"
# The reference's node package enables its units at install and disables
# them at removal (systemctl enable/disable; here the same symlinks, made in
# the throwaway root).
cat >"$work/standin/pvc-daemon-node/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
[ -n "$DPKG_ROOT" ] || exit 1
s=$DPKG_ROOT/etc/systemd/system
mkdir -p "$s/multi-user.target.wants" "$s/pvc.target.wants"
ln -sf /lib/systemd/system/pvcnoded.service "$s/multi-user.target.wants/pvcnoded.service"
ln -sf /lib/systemd/system/pvcnoded.service "$s/pvc.target.wants/pvcnoded.service"
ln -sf /lib/systemd/system/pvc.target "$s/multi-user.target.wants/pvc.target"
ln -sf /lib/systemd/system/pvcautoready.service "$s/pvc.target.wants/pvcautoready.service"
EOF
cat >"$work/standin/pvc-daemon-node/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
[ -n "$DPKG_ROOT" ] || exit 1
s=$DPKG_ROOT/etc/systemd/system
rm -f "$s/multi-user.target.wants/pvcnoded.service" "$s/pvc.target.wants/pvcnoded.service" \
    "$s/multi-user.target.wants/pvc.target" "$s/pvc.target.wants/pvcautoready.service"
EOF
chmod 755 "$work/standin/pvc-daemon-node/DEBIAN/postinst" "$work/standin/pvc-daemon-node/DEBIAN/prerm"
printf '#!/bin/sh\necho "reference pvc (HTTP API client)"\n' >"$work/standin/pvc-client-cli/usr/bin/pvc"
chmod 755 "$work/standin/pvc-client-cli/usr/bin/pvc"
for p in pvc-daemon-common pvc-daemon-node pvc-daemon-api pvc-client-cli; do
    dpkg-deb --root-owner-group -Zgzip -z1 --build "$work/standin/$p" "$work/standin/$p.deb" >/dev/null
done

step "a reference node in $R"
mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates" "$R/var/lib/dpkg/triggers" "$R/etc/pvc"
touch "$R/var/lib/dpkg/status" "$R/var/lib/dpkg/available"
dpkg_root -i "$work/standin/pvc-daemon-common.deb" "$work/standin/pvc-daemon-node.deb" \
    "$work/standin/pvc-daemon-api.deb" "$work/standin/pvc-client-cli.deb" >"$work/standin.log" 2>&1 ||
    { cat "$work/standin.log"; exit 1; }
# The administrator's files (the reference's packages ship only a sample).
printf 'pvc:\n  node: hv1\n  cluster:\n    coordinators:\n      - hv1\n# site settings\n' >"$R/etc/pvc/pvcnoded.yaml"
touch "$R/etc/pvc/autoready"
cp "$R/etc/pvc/pvcnoded.yaml" "$work/config.before"
check "reference units enabled" test -L "$R/etc/systemd/system/multi-user.target.wants/pvcnoded.service"
reference_cli=$(cat "$R/usr/bin/pvc")

step "install ours over it"
dpkg_root -i "$work"/ours/pvc-common_*.deb "$work"/ours/pvc-cli_*.deb "$work"/ours/pvc-daemon_*.deb \
    >"$work/swap.log" 2>&1 || { cat "$work/swap.log"; exit 1; }
grep -E '^(Unpacking|Removing|Setting up|Adding|pvc-)' "$work/swap.log" || true
for p in pvc-common pvc-daemon pvc-cli; do check "$p installed" installed "$p"; done
for p in pvc-daemon-node pvc-daemon-common pvc-daemon-api; do
    check "$p removed" not_installed "$p"
done
check "the reference's HTTP client stays installed" installed pvc-client-cli
check "dpkg --audit is clean" test -z "$(dpkg --root="$R" --audit 2>&1)"
for f in /lib/systemd/system/pvcnoded.service /lib/systemd/system/pvc.target /lib/systemd/system/pvcautoready.service \
    /usr/share/pvc/pvcnoded.sample.yaml /usr/share/pvc/plugins/nics; do
    check "$f belongs to pvc-daemon" test "$(owner "$f")" = pvc-daemon
done
check "pvcnoded.service is ours" same_file "$R/lib/systemd/system/pvcnoded.service" "$src/etc/pvcnoded.service"
check "pvcautoready.service is ours" same_file "$R/lib/systemd/system/pvcautoready.service" "$src/etc/pvcautoready.service"
check "pvc.target is ours" same_file "$R/lib/systemd/system/pvc.target" "$src/etc/pvc.target"
check "our daemon is installed" test -x "$R/usr/sbin/pvcnoded"
# The reference's Python load plugin is our native load.so: it must not stay beside it.
for f in /usr/share/pvc/pvcnoded.py /usr/share/pvc/pvcnoded /usr/share/pvc/daemon_lib /usr/share/pvc/pvcapid.py \
    /usr/share/pvc/plugins/load \
    /lib/systemd/system/pvcapid.service /lib/systemd/system/pvcworkerd.service; do
    check "$f of the reference is gone" test ! -e "$R$f"
done
check "/etc/pvc/pvcnoded.yaml unchanged" same_file "$R/etc/pvc/pvcnoded.yaml" "$work/config.before"
check "/etc/pvc/pvcnoded.yaml belongs to no package" test -z "$(owner /etc/pvc/pvcnoded.yaml)"
check "/etc/pvc/autoready kept" test -e "$R/etc/pvc/autoready"
check "pvcnoded.service enabled (multi-user)" test -L "$R/etc/systemd/system/multi-user.target.wants/pvcnoded.service"
check "pvcnoded.service enabled (pvc.target)" test -L "$R/etc/systemd/system/pvc.target.wants/pvcnoded.service"
check "pvcautoready.service enabled (pvc.target)" test -L "$R/etc/systemd/system/pvc.target.wants/pvcautoready.service"
check "pvc.target enabled" test -L "$R/etc/systemd/system/multi-user.target.wants/pvc.target"
check "no systemd acted on (DPKG_ROOT install said so)" grep -q "pvcnoded.service not started" "$work/swap.log"
# Both packages list /usr/bin/pvc; the reference's copy is diverted.
owners=$(owner /usr/bin/pvc)
check "/usr/bin/pvc is ours (owners: $owners)" test "$(echo "$owners" | tr -d ' ' | tr , '\n' | sort | paste -sd,)" = pvc-cli,pvc-client-cli
check "/usr/bin/pvc is an ELF binary" test "$(head -c 4 "$R/usr/bin/pvc" | tail -c 3)" = ELF
check "the reference's pvc is /usr/bin/pvc-http" test "$(cat "$R/usr/bin/pvc-http" 2>/dev/null)" = "$reference_cli"
check "the diversion is pvc-cli's" grep -q "diversion of /usr/bin/pvc to /usr/bin/pvc-http by pvc-cli" \
    <(dpkg-divert --admindir "$R/var/lib/dpkg" --list)
dpkg-query --admindir="$R/var/lib/dpkg" -L pvc-common pvc-daemon pvc-cli | sort -u >"$work/ours.files"

step "purge ours"
dpkg_root --purge pvc-daemon pvc-cli pvc-common >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; exit 1; }
for p in pvc-common pvc-daemon pvc-cli; do check "$p purged" test -z "$(status_of "$p" | grep -v '^un$' || true)"; done
left=()
while read -r f; do
    [ -n "$f" ] || continue
    [ -e "$R$f" ] || [ -L "$R$f" ] || continue
    [ -d "$R$f" ] && [ ! -L "$R$f" ] && continue  # directories shared with others (/usr, /etc/pvc, ...)
    [ "$f" = /usr/bin/pvc ] && continue           # the reference's, checked below
    left+=("$f")
done <"$work/ours.files"
check "purge leaves no file of ours (${left[*]:-none})" test ${#left[@]} -eq 0
check "purge leaves no unit link" test -z "$(find "$R/etc/systemd" \( -name 'pvc*' -o -name '*.dsh-also' \) 2>/dev/null)"
check "no state of ours for deb-systemd-helper" \
    test -z "$(find "$R/var/lib/systemd" -name '*pvc*' 2>/dev/null)"
check "the diversion is gone" test -z "$(dpkg-divert --admindir "$R/var/lib/dpkg" --list 'pvc*')"
check "/usr/bin/pvc is the reference's again" test "$(cat "$R/usr/bin/pvc")" = "$reference_cli"
check "/usr/bin/pvc belongs to pvc-client-cli" test "$(owner /usr/bin/pvc)" = pvc-client-cli
check "/etc/pvc/pvcnoded.yaml still unchanged" same_file "$R/etc/pvc/pvcnoded.yaml" "$work/config.before"

step "purge the reference's leftovers"
dpkg_root --purge pvc-client-cli pvc-daemon-node pvc-daemon-common pvc-daemon-api >"$work/purge2.log" 2>&1 ||
    { cat "$work/purge2.log"; exit 1; }
check "/etc/pvc/pvcnoded.yaml survives every purge" same_file "$R/etc/pvc/pvcnoded.yaml" "$work/config.before"
rest=$(cd "$R" && find . -path ./var/lib/dpkg -prune -o -print | grep -v -x -e . -e ./etc -e ./etc/pvc \
    -e ./etc/pvc/pvcnoded.yaml -e ./etc/pvc/autoready -e ./var -e ./var/lib -e ./var/lib/dpkg \
    -e ./etc/systemd -e ./etc/systemd/system -e ./var/lib/systemd || true)  # systemd's own directories, empty
check "nothing else left in the root (${rest:-none})" test -z "$rest"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
echo "all checks passed"
