#!/usr/bin/env bash
# The one-machine lab cluster: network, ZooKeeper, and one libvirtd per node.
#   lab.sh up [N...]      default nodes 1 2 3 (hv1..hv3); idempotent; with
#                         PVC_LAB_PVCNODED=<binary> also a pvcnoded per node (node.sh)
#   lab.sh down           stops everything the lab started and removes its state
#   lab.sh status
#   (every node also gets a BMC, bmc.sh: power off kills the node, power on boots it)
#   lab.sh smoke          up 1 2, a tiny guest started on hv1, live-migrated to hv2 and
#                         back the way the daemon does it, then down (harness self-check)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"

all_nodes() { "$HERE/netns.sh" status | sed -n 's/^hv\([0-9]*\) .*/\1/p'; }

up() {
    "$HERE/netns.sh" up "$@"
    "$HERE/zookeeper.sh" start
    for n in "$@"; do "$HERE/libvirtd.sh" start "$n"; done
    # A BMC per node (power off = power loss of the node), when ipmi_sim is installed.
    if command -v ipmi_sim >/dev/null; then for n in "$@"; do "$HERE/bmc.sh" start "$n"; done; fi
    # With a daemon binary given, every node runs pvcnoded too.
    if [ -n "${PVC_LAB_PVCNODED:-}" ]; then
        # An empty ZooKeeper is a new cluster: initialise it (schema 10) with the CLI built beside the daemon.
        local pvc; pvc=$(dirname "$PVC_LAB_PVCNODED")/pvc; [ -x "$pvc" ] || pvc=pvc
        "$pvc" --zookeeper "$("$HERE/zookeeper.sh" hosts)" cluster init >/dev/null
        for n in "$@"; do "$HERE/node.sh" start "$n"; done
    fi
    echo "lab up: nodes $*; guests use domain type $(lab_accel); zookeeper $("$HERE/zookeeper.sh" hosts)"
}
down() {
    for n in $(all_nodes); do "$HERE/bmc.sh" stop "$n"; "$HERE/node.sh" stop "$n"; "$HERE/libvirtd.sh" stop "$n"; done
    "$HERE/zookeeper.sh" stop
    "$HERE/netns.sh" down
    rm -rf "$PVC_LAB_DIR/smoke" "$PVC_LAB_DIR/accel"
    rmdir "$PVC_LAB_DIR" 2>/dev/null || true
}

# A 64 MiB disk-less guest (no OS: SeaBIOS only), serial console to a file.
tiny_xml() {  # NAME UUID CONSOLE_FILE
    cat <<XML
<domain type='$(lab_accel)'>
  <name>$1</name>
  <uuid>$2</uuid>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot><on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <serial type='file'><source path='$3'/><target port='0'/></serial>
    <console type='file'><source path='$3'/><target type='serial' port='0'/></console>
    <memballoon model='none'/>
  </devices>
</domain>
XML
}

smoke() {
    lab_need_root
    trap down EXIT
    up 1 2
    local x=$PVC_LAB_DIR/smoke; mkdir -p "$x"
    tiny_xml pvclab-smoke 6f2b9a3e-3c1d-4c55-9e1f-5ab1e0c0ffee "$x/console.log" >"$x/vm.xml"
    local V1="$HERE/libvirtd.sh virsh 1" V2="$HERE/libvirtd.sh virsh 2" t
    t=$(now_ms); $V1 create "$x/vm.xml" >/dev/null; echo "create on hv1: $(( $(now_ms) - t ))ms"
    # Classic (client-driven) live migration, data over the cluster network by name,
    # as the reference's migration does it.
    t=$(now_ms); $V1 migrate --live pvclab-smoke "$($HERE/libvirtd.sh uri 2)" "tcp://hv2.$PVC_LAB_DOMAIN"
    echo "migrate hv1->hv2: $(( $(now_ms) - t ))ms; hv1: $($V1 list --name | xargs) hv2: $($V2 list --name | xargs)"
    [ "$($V2 domstate pvclab-smoke)" = running ] || lab_die "guest not running on hv2"
    t=$(now_ms); $V2 migrate --live pvclab-smoke "$($HERE/libvirtd.sh uri 1)" "tcp://hv1.$PVC_LAB_DOMAIN"
    echo "migrate hv2->hv1: $(( $(now_ms) - t ))ms"
    [ "$($V1 domstate pvclab-smoke)" = running ] || lab_die "guest not running on hv1"
    echo "lab smoke: OK"
}

cmd=${1:-}; shift || true
case "$cmd" in
up) lab_need_root; [ $# -gt 0 ] || set -- 1 2 3; up "$@" ;;
down) lab_need_root; down ;;
status) "$HERE/netns.sh" status; "$HERE/zookeeper.sh" status || true
        for n in $(all_nodes); do "$HERE/libvirtd.sh" status "$n" || true; "$HERE/node.sh" status "$n" || true; done ;;
smoke) smoke ;;
*) sed -n '2,9p' "$0"; exit 1 ;;
esac
