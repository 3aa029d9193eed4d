#!/usr/bin/env bash
# A real guest that boots a Debian kernel, prints a marker on its serial console
# and powers itself off, built from Debian packages only (tools/debian-packages.txt:
# linux-image-cloud-amd64, busybox-static). Boot it with direct kernel boot:
#   <os><kernel>$(guest.sh kernel)</kernel><initrd>OUT</initrd>
#       <cmdline>$(guest.sh cmdline)</cmdline></os>
#   guest.sh kernel            prints the Debian kernel (bzImage) to boot
#   guest.sh initramfs OUT [DELAY]   writes a gzip'd cpio whose /init prints
#                              "pvc-guest: up" on the console, waits DELAY
#                              seconds (default 2) and powers the guest off
#   guest.sh cmdline           prints the kernel command line to use
#   guest.sh accel INITRD      prints the domain type that boots this guest: the
#                              lab's (libvirtd.sh accel) when the guest really
#                              comes up under it, else "qemu" (TCG). Some nested
#                              KVM hosts run SeaBIOS but hang a Linux kernel.
#                              Probed once per lab dir (a few seconds).
# The files only need to be readable by QEMU (root in the node's mount namespace,
# which sees the host's filesystem).
set -euo pipefail
. "$(dirname "$0")/common.sh"

die() { echo "guest.sh: $*" >&2; exit 1; }

kernel() {
    # The newest installed Debian kernel image; the cloud flavour is preferred
    # (smaller, boots fastest) but any Debian amd64 bzImage works.
    local k
    k=$(ls -1 /boot/vmlinuz-*-cloud-amd64 2>/dev/null | sort -V | tail -1)
    [ -n "$k" ] || k=$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)
    [ -n "$k" ] || die "no kernel in /boot: install linux-image-cloud-amd64 (tools/install-deps.sh)"
    [ -r "$k" ] || die "kernel $k not readable"
    echo "$k"
}

initramfs() {
    local out=${1:?output file} delay=${2:-2}
    local bb=/bin/busybox
    [ -x "$bb" ] || die "$bb missing: install busybox-static (tools/install-deps.sh)"
    # A dynamically linked busybox would not run without its libraries in the image.
    if ldd "$bb" >/dev/null 2>&1; then
        die "$bb is not static: install busybox-static"
    fi
    local root; root=$(mktemp -d)
    trap 'rm -rf "$root"' RETURN
    mkdir -p "$root"/{bin,dev,proc,sys}
    cp "$bb" "$root/bin/busybox"
    cat >"$root/init" <<INIT
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
echo "pvc-guest: up kernel=\$(uname -r) uptime=\$(cut -d' ' -f1 /proc/uptime)s"
echo "pvc-guest: powering off in $delay s"
sleep $delay
echo "pvc-guest: poweroff"
poweroff -f
# Only reached when ACPI power-off failed: say so, and try the sysrq way.
echo "pvc-guest: poweroff -f returned"
echo o >/proc/sysrq-trigger
INIT
    chmod 755 "$root/init"
    mkdir -p "$(dirname "$out")"
    (cd "$root" && find . | "$bb" cpio -o -H newc 2>/dev/null | "$bb" gzip -9) >"$out.tmp"
    mv "$out.tmp" "$out"
    echo "$out"
}

cmdline() { echo "console=ttyS0,115200 quiet loglevel=3 panic=-1 rdinit=/init"; }

accel() {
    local initrd=${1:?initramfs} f=$PVC_LAB_DIR/guest-accel a
    [ -s "$f" ] && { cat "$f"; return; }
    a=$(lab_accel)
    if [ "$a" = kvm ]; then
        # The same CPU model libvirt gives a domain without <cpu> (QEMU's default).
        # The guest powers itself off (-no-reboot: QEMU exits) unless it hangs.
        local out
        out=$(timeout 8 qemu-system-x86_64 -accel kvm -m 128 -nodefaults -no-user-config \
                -display none -serial stdio -no-reboot -kernel "$(kernel)" -initrd "$initrd" \
                -append "$(cmdline)" </dev/null 2>/dev/null) || true
        if ! grep -q 'pvc-guest: up' <<<"$out"; then
            echo "guest.sh: a Linux guest does not boot under KVM here: using TCG" >&2
            a=qemu
        fi
    fi
    mkdir -p "$PVC_LAB_DIR"; echo "$a" >"$f"; echo "$a"
}

case "${1:-}" in
kernel) kernel ;;
initramfs) shift; initramfs "$@" ;;
cmdline) cmdline ;;
accel) shift; accel "$@" ;;
*) sed -n '2,18p' "$0"; exit 1 ;;
esac
