# Shared settings of the lab harness (sourced by the other scripts, never run).
#
# Topology (all confined to network namespaces this harness creates):
#   netns <name>-sw    bridge br0, address ${PVC_LAB_NET}.100 (lab services: ZooKeeper)
#   netns <name>-hvN   eth0 = ${PVC_LAB_NET}.N/24, veth to br0; node N's libvirtd (and daemon)
#   root netns         veth <name>-host = ${PVC_LAB_NET}.254/24 into br0 (PVC_LAB_HOST_LINK=1),
#                      so tests running in the root netns reach every node by IP
# <name> is $PVC_LAB_NAME (default pvclab): two labs with different names and nets
# (e.g. a developer's lab and the e2e tests) run side by side.
# State lives under $PVC_LAB_DIR (default: a fixed directory under $TMPDIR).
# $PVC_LAB_DIR/hosts names every node (hvN, hvN.<cluster domain>); node namespaces
# and tests bind-mount it over /etc/hosts so migration URIs by name resolve.

PVC_LAB_NAME=${PVC_LAB_NAME:-pvclab}
PVC_LAB_DIR=${PVC_LAB_DIR:-${TMPDIR:-/tmp}/$PVC_LAB_NAME}
PVC_LAB_NET=${PVC_LAB_NET:-10.123.0}          # first three octets of the lab /24
PVC_LAB_DOMAIN=${PVC_LAB_DOMAIN:-pvc.local}   # cluster domain: hvN.<domain> resolves in nodes
PVC_LAB_HOST_LINK=${PVC_LAB_HOST_LINK:-1}
# QEMU capability probing costs ~8 s per fresh cache; keep one cache for every lab run.
PVC_LAB_CACHE=${PVC_LAB_CACHE:-${TMPDIR:-/tmp}/pvc-lab-cache}

[ ${#PVC_LAB_NAME} -le 10 ] || { echo "lab: PVC_LAB_NAME too long (interface names)" >&2; exit 1; }
LAB_SW=$PVC_LAB_NAME-sw
LAB_HOST_IF=$PVC_LAB_NAME-host
LAB_SW_IP=$PVC_LAB_NET.100
LAB_HOST_IP=$PVC_LAB_NET.254

# node_num hv3|3 -> 3 ; node_name -> hv3 ; node_ns -> pvclab-hv3 ; node_ip -> 10.123.0.3
node_num() {
    local n=${1//[!0-9]/}
    if [ -z "$n" ] || [ "$n" -lt 1 ] || [ "$n" -gt 99 ]; then
        echo "lab: bad node '$1' (want 1..99 or hv1..hv99)" >&2; return 1
    fi
    echo $((10#$n))
}
node_name() { echo "hv$(node_num "$1")"; }
node_ns()   { echo "$PVC_LAB_NAME-hv$(node_num "$1")"; }
node_ip()   { echo "$PVC_LAB_NET.$(node_num "$1")"; }

lab_die() { echo "lab: $*" >&2; exit 1; }
lab_need_root() { [ "$(id -u)" -eq 0 ] || lab_die "must run as root (network and mount namespaces)"; }
now_ms() { date +%s%3N; }

# Domain type for guests: "kvm" when /dev/kvm really works here, else "qemu" (TCG).
# Probed once per lab dir (QEMU starts with accel=kvm and quits). PVC_LAB_ACCEL=qemu
# forces TCG (to check the fallback on a machine with KVM).
lab_accel() {
    local f=$PVC_LAB_DIR/accel
    if [ -n "${PVC_LAB_ACCEL:-}" ]; then echo "$PVC_LAB_ACCEL"; return; fi
    if [ ! -s "$f" ]; then
        mkdir -p "$PVC_LAB_DIR"
        if [ -r /dev/kvm ] && [ -w /dev/kvm ] && echo quit | timeout 20 qemu-system-x86_64 \
                -machine none,accel=kvm -display none -nodefaults -no-user-config -monitor stdio \
                >/dev/null 2>&1; then
            echo kvm >"$f"
        else
            echo qemu >"$f"
        fi
    fi
    cat "$f"
}

# Writes $PVC_LAB_DIR/hosts (every possible node by name) and prints its path.
lab_hosts_file() {
    local f=$PVC_LAB_DIR/hosts i
    mkdir -p "$PVC_LAB_DIR"
    {
        echo "127.0.0.1 localhost"
        for i in $(seq 1 99); do echo "$PVC_LAB_NET.$i hv$i.$PVC_LAB_DOMAIN hv$i"; done
    } >"$f.tmp" && mv "$f.tmp" "$f"
    echo "$f"
}
