#!/usr/bin/env bash
# ipmi_sim's chassis_control program for lab node N (see bmc.sh):
#   chassis.sh ENV N get power        -> power:1 while the node's libvirtd runs, else power:0
#   chassis.sh N set power 0|1    -> 0: kill everything in the node's netns; 1: boot it
#   chassis.sh N set reset 1      -> kill, then boot
# ipmi_sim waits for this program: booting is started detached.
HERE=$(cd "$(dirname "$0")" && pwd)
# The lab settings bmc.sh froze at start (ipmi_sim does not pass them on).
. "$1"; shift
NUM=$1; shift
. "$HERE/common.sh"
NAME=$(node_name "$NUM")
S=$PVC_LAB_DIR/$NAME/bmc
NS=$(node_ns "$NUM")
log() { echo "$(date +%T.%3N) $NAME $*" >>"$S/chassis.log"; }

is_on() {
    local p; p=$(cat "$PVC_LAB_DIR/$NAME/libvirt/libvirtd.pid" 2>/dev/null) || return 1
    lab_alive "$p" libvirtd
}
power_off() {
    local n=0 q
    for q in $(ip netns pids "$NS" 2>/dev/null); do kill -9 "$q" 2>/dev/null && n=$((n + 1)); done
    log "power off: killed $n process(es) in $NS"
}
power_on() {
    is_on && return 0
    # The daemon's state dir survives the power loss as a disk would; libvirtd
    # and pvcnoded start as at boot.
    setsid bash -c "'$HERE/libvirtd.sh' start $NUM && { [ -z \"\${PVC_LAB_PVCNODED:-}\" ] || '$HERE/node.sh' start $NUM; }" \
        >>"$S/boot.log" 2>&1 </dev/null &
    log "power on (boot pid $!)"
}

op=${1:-}; shift || true
case "$op" in
get) for parm in "$@"; do case $parm in
       power) if is_on; then echo "power:1"; else echo "power:0"; fi ;;
       boot) echo "boot:default" ;;
       *) echo "Invalid parameter: $parm"; exit 1 ;;
     esac; done ;;
set) while [ $# -gt 0 ]; do parm=$1; val=${2:-}; shift 2 || shift
       case $parm in
         power) log "set power $val"; if [ "$val" = 1 ]; then power_on; else power_off; fi ;;
         reset) log "set reset $val"; [ "$val" = 1 ] && { power_off; sleep 0.2; power_on; } ;;
         boot|identify) ;;
         *) echo "Invalid parameter: $parm"; exit 1 ;;
       esac; done ;;
check) exit 1 ;;
*) echo "Unknown operation: $op"; exit 1 ;;
esac
