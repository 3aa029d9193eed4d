#!/usr/bin/env bash
# Lab network: a switch netns holding bridge br0, one netns per node wired to it.
#   netns.sh up N...     create (idempotent) <name>-sw and <name>-hvN, eth0 = <net>.N/24;
#                        writes $PVC_LAB_DIR/hosts
#   netns.sh down [N...] remove the given nodes (default: all); the switch and the
#                        root-side link go when no node is left
#   netns.sh exec N CMD  run CMD in node N's netns
#   netns.sh status
# See common.sh for the addresses and PVC_LAB_* settings.
set -euo pipefail
. "$(dirname "$0")/common.sh"

ns_exists() { ip netns list | awk '{print $1}' | grep -qx "$1"; }

switch_up() {
    ns_exists $LAB_SW || ip netns add $LAB_SW
    ip -n $LAB_SW link show br0 >/dev/null 2>&1 || ip -n $LAB_SW link add br0 type bridge
    ip -n $LAB_SW link set lo up
    ip -n $LAB_SW link set br0 up
    ip -n $LAB_SW addr show dev br0 | grep -q "inet $LAB_SW_IP/" || ip -n $LAB_SW addr add $LAB_SW_IP/24 dev br0
    if [ "$PVC_LAB_HOST_LINK" = 1 ] && ! ip link show $LAB_HOST_IF >/dev/null 2>&1; then
        ip link add $LAB_HOST_IF type veth peer name v-host netns $LAB_SW
        ip -n $LAB_SW link set v-host master br0 up
        ip addr add $LAB_HOST_IP/24 dev $LAB_HOST_IF
        ip link set $LAB_HOST_IF up
    fi
}

node_up() {
    local num ns ip
    num=$(node_num "$1"); ns=$(node_ns "$1"); ip=$(node_ip "$1")
    ns_exists "$ns" || ip netns add "$ns"
    if ! ip -n "$ns" link show eth0 >/dev/null 2>&1; then
        ip -n $LAB_SW link del "v-hv$num" 2>/dev/null || true
        ip link add "v-hv$num" type veth peer name eth0 netns "$ns"
        ip link set "v-hv$num" netns $LAB_SW
        ip -n $LAB_SW link set "v-hv$num" master br0 up
    fi
    ip -n "$ns" link set lo up
    ip -n "$ns" addr show dev eth0 | grep -q "inet $ip/" || ip -n "$ns" addr add "$ip/24" dev eth0
    ip -n "$ns" link set eth0 up
    echo "netns $ns: eth0 $ip/24"
}

lab_nodes() { ip netns list | awk '{print $1}' | sed -n "s/^$PVC_LAB_NAME-hv\\([0-9]*\\)\$/\\1/p" | sort -n; }

cmd=${1:-}; shift || true
case "$cmd" in
up)
    lab_need_root
    [ $# -gt 0 ] || lab_die "usage: netns.sh up N..."
    switch_up
    for n in "$@"; do node_up "$n"; done
    lab_hosts_file >/dev/null
    ;;
down)
    lab_need_root
    nodes=("$@"); [ ${#nodes[@]} -gt 0 ] || mapfile -t nodes < <(lab_nodes)
    for n in "${nodes[@]}"; do ip netns del "$(node_ns "$n")" 2>/dev/null || true; done
    if [ -z "$(lab_nodes)" ]; then
        ip link del $LAB_HOST_IF 2>/dev/null || true
        ip netns del $LAB_SW 2>/dev/null || true
        rm -f "$PVC_LAB_DIR/hosts"
    fi
    echo "netns down: ${nodes[*]:-none}" ;;
exec)
    n=${1:?node}; shift
    exec ip netns exec "$(node_ns "$n")" "$@" ;;
status)
    for n in $(lab_nodes); do echo "hv$n $(node_ip $n) netns $(node_ns $n)"; done
    ns_exists $LAB_SW && echo "switch $LAB_SW br0 $LAB_SW_IP" || true
    ip link show $LAB_HOST_IF >/dev/null 2>&1 && echo "host link $LAB_HOST_IF $LAB_HOST_IP" || true ;;
*) sed -n '2,9p' "$0"; exit 1 ;;
esac
