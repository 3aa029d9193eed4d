#!/usr/bin/env bash
# A BMC per lab node: OpenIPMI's ipmi_sim in the switch netns, so it outlives
# its node, on <net>.(100+N) port 623/udp, login admin/pass (what node.sh
# registers as the node's IPMI details). Its power control is chassis.sh:
#   power off / reset   SIGKILL to every process in the node's netns (pvcnoded,
#                       libvirtd, QEMU guests): a power loss
#   power on            libvirtd.sh start N, then node.sh start N (detached)
#   power status        on while the node's libvirtd runs
#   bmc.sh start NODE | stop NODE | addr NODE | status NODE
# ipmitool needs `-C 3` against ipmi_sim (else 10 s of cipher-suite probing):
#   ipmitool -I lanplus -C 3 -H $(bmc.sh addr 1) -U admin -P pass chassis power status
# Settings: the PVC_LAB_* variables of the caller are passed on to power on.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"

cmd=${1:-}; shift || true
node=${1:?node}; shift
NUM=$(node_num "$node")
NAME=$(node_name "$node")
ADDR=$PVC_LAB_NET.$((100 + NUM))
S=$PVC_LAB_DIR/$NAME/bmc

pid() {
    local p; p=$(cat "$S/ipmi_sim.pid" 2>/dev/null) || return 1
    [ -n "$p" ] && [ "$(cat /proc/$p/comm 2>/dev/null)" = ipmi_sim ] && echo "$p"
}

case "$cmd" in
addr) echo "$ADDR" ;;
start)
    lab_need_root
    if p=$(pid); then echo "bmc $NAME already running pid=$p on $ADDR"; exit 0; fi
    command -v ipmi_sim >/dev/null || lab_die "ipmi_sim not installed (openipmi)"
    ip netns list | awk '{print $1}' | grep -qx "$LAB_SW" || lab_die "switch netns $LAB_SW missing (netns.sh up)"
    mkdir -p "$S/state"
    ip -n "$LAB_SW" addr replace "$ADDR/24" dev br0
    # The settings power on needs, frozen for chassis.sh (ipmi_sim runs it with its own environment).
    {
        { env | grep '^PVC_LAB_' | grep -v '^PVC_LAB_\(NAME\|DIR\|NET\)=' || true; } | sed 's/^/export /; s/=/="/; s/$/"/'
        echo "export PVC_LAB_NAME=\"$PVC_LAB_NAME\" PVC_LAB_DIR=\"$PVC_LAB_DIR\" PVC_LAB_NET=\"$PVC_LAB_NET\""
    } >"$S/env"
    cat >"$S/lan.conf" <<CONF
name "bmc-$NAME"
set_working_mc 0x20
  startlan 1
    addr $ADDR 623
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid $(printf '%032x' "$(( $(echo -n "$PVC_LAB_NAME-$NAME" | cksum | cut -d' ' -f1) ))")
  endlan
  chassis_control "$HERE/chassis.sh $S/env $NUM"
  user 2 true "admin" "pass" admin 10 none md2 md5 straight
CONF
    # mc_setbmc is mandatory (without it ipmi_sim fails or crashes); the GUID
    # above is what lanplus sessions need.
    cat >"$S/bmc.emu" <<EMU
mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr
mc_enable 0x20
EMU
    # -n: no console (stdin is not a terminal). setsid: a Ctrl-C in the caller's
    # terminal reaches the caller only.
    setsid ip netns exec "$LAB_SW" ipmi_sim -n -c "$S/lan.conf" -f "$S/bmc.emu" -s "$S/state" \
        </dev/null >"$S/ipmi_sim.log" 2>&1 &
    echo $! >"$S/ipmi_sim.pid"
    sleep 0.3
    pid >/dev/null || { cat "$S/ipmi_sim.log" >&2; lab_die "ipmi_sim for $NAME exited"; }
    echo "bmc $NAME pid=$(pid) on $ADDR:623/udp"
    ;;
stop)
    if p=$(pid); then kill "$p" 2>/dev/null || true; fi
    ip -n "$LAB_SW" addr del "$ADDR/24" dev br0 2>/dev/null || true
    rm -rf "$S"
    echo "bmc $NAME stopped" ;;
status) if p=$(pid); then echo "bmc $NAME running pid=$p on $ADDR"; else echo "bmc $NAME stopped"; exit 3; fi ;;
*) sed -n '2,13p' "$0"; exit 1 ;;
esac
