#!/usr/bin/env bash
# The one-machine lab cluster: network, ZooKeeper, and one libvirtd per node.
#   lab.sh up [N...]      default nodes 1 2 3 (hv1..hv3); idempotent; with
#                         PVC_LAB_PVCNODED=<binary> also a pvcnoded per node (node.sh)
#   lab.sh down           stops everything the lab started and removes its state
#   lab.sh status
#   (every node also gets a BMC, bmc.sh: power off kills the node, power on boots it)
#   lab.sh smoke          up 1 2, a tiny guest started on hv1, live-migrated to hv2 and
#                         back the way the daemon does it, then down (harness self-check)
#   lab.sh run [N...]     what an operator sees (tools/lab-node.sh, tools/lab-cluster.sh):
#                         up with a pvcnoded per node (PVC_LAB_PVCNODED, the bundled
#                         health plugins that apply from PVC_LAB_PLUGINS), every node
#                         readied, guest tiny1 started on the first, health shown, then
#                         the daemons' logs until SIGINT/SIGTERM, which stops the guest
#                         and takes the lab down
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

# The operator's view of a lab: see the header. Default coordinators: the first
# three nodes (a coordinator checks its ZooKeeper member, zkpr).
run() {
    lab_need_root
    # A shell started in the background ignores SIGINT and cannot trap it: such
    # a run starts afresh with SIGINT at its default, so that `kill -INT` stops
    # the lab as Ctrl-C in a terminal does.
    if (( 0x$(awk '/^SigIgn:/ {print $2}' /proc/$$/status) & 2 )); then
        exec /usr/bin/python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv("/bin/bash", ["bash"] + sys.argv[1:])' "$0" run "$@"
    fi
    [ -x "${PVC_LAB_PVCNODED:-}" ] || lab_die "run needs PVC_LAB_PVCNODED (the pvcnoded binary)"
    local pvcbin zk n vm=tiny1 first t0 torn=0 followers=() lab_pids=() p
    pvcbin=$(dirname "$PVC_LAB_PVCNODED")/pvc
    [ -x "$pvcbin" ] || lab_die "no pvc beside $PVC_LAB_PVCNODED"
    export PVC_LAB_COORDINATORS=${PVC_LAB_COORDINATORS:-$(echo "$@" | cut -d' ' -f1-3)}
    # Guest console logs where tools/lab/tiny-vm.xml writes them (private to each node).
    export PVC_LAB_CONSOLE_DIR=${PVC_LAB_CONSOLE_DIR:-/var/log/libvirt}
    first=$(node_name "$1")
    t0=$(now_ms)
    say() { printf '[lab %6.1f s] %s\n' "$(( $(now_ms) - t0 ))e-3" "$*"; }
    pvc() { echo "\$ pvc $*"; "$pvcbin" --zookeeper "$zk" "$@"; }
    # until_ok SECONDS WHAT COMMAND...: polls every 0.2 s.
    until_ok() {
        local end=$(( $(now_ms) + $1 * 1000 )) what=$2; shift 2
        until "$@"; do
            if [ "$(now_ms)" -ge "$end" ]; then
                # What the last `pvc` call said (field() keeps its error output).
                [ -s "$PVC_LAB_DIR/field.err" ] && sed 's/^/  pvc: /' "$PVC_LAB_DIR/field.err" >&2
                lab_die "timed out waiting for $what"
            fi
            sleep 0.2
        done
    }
    field() {  # NOUN NAME FIELD: a field of `pvc NOUN info NAME --format json`
        "$pvcbin" --zookeeper "$zk" "$1" info "$2" --format json 2>"$PVC_LAB_DIR/field.err" | /usr/bin/python3 -c '
import json, sys
try:
    print(json.load(sys.stdin).get(sys.argv[1], ""))
except ValueError:
    pass' "$3"
    }
    teardown() {
        trap '' INT TERM   # a second Ctrl-C does not cut the teardown short
        [ "$torn" = 0 ] || return 0
        torn=1
        echo
        say "stopping the guest, the daemons and the lab"
        # Every process of the lab (its namespaces, ZooKeeper), to prove them gone after.
        for n in $(all_nodes); do lab_pids+=($(ip netns pids "$(node_ns "$n")" 2>/dev/null)); done
        lab_pids+=($(ip netns pids "$LAB_SW" 2>/dev/null) $(cat "$PVC_LAB_DIR/zookeeper/pid" 2>/dev/null))
        if [ -n "${zk:-}" ] && [ -n "$(field vm "$vm" state)" ]; then
            timeout 60 "$pvcbin" --zookeeper "$zk" vm stop "$vm" --wait || true
        fi
        # The daemons first, their logs kept until the followers have shown the end.
        for n in $(all_nodes); do PVC_LAB_KEEP_LOGS=1 "$HERE/node.sh" stop "$n" >/dev/null || true; done
        if [ ${#followers[@]} -gt 0 ]; then
            sleep 0.5
            for p in "${followers[@]}"; do kill "$p" 2>/dev/null || true; done
        else  # stopped before the logs were shown (a failure): their ends
            for n in $(all_nodes); do
                [ -s "$PVC_LAB_DIR/hv$n/pvcnoded/out.log" ] || continue
                echo "--- the last lines of pvcnoded hv$n's log:"; tail -n 25 "$PVC_LAB_DIR/hv$n/pvcnoded/out.log"
            done
        fi
        rm -rf "$PVC_LAB_DIR/guest"
        down || true
        local left=()
        for p in "${lab_pids[@]}"; do [ -d "/proc/$p" ] && left+=("$p $(cat "/proc/$p/comm" 2>/dev/null)"); done
        if [ ${#left[@]} -gt 0 ] || ip netns list | grep -q "^$PVC_LAB_NAME-"; then
            say "lab down, but left running: ${left[*]:-} $(ip netns list | grep "^$PVC_LAB_NAME-" | xargs)"
        else
            say "lab down: ${#lab_pids[@]} processes stopped, namespaces removed, nothing left running"
        fi
    }
    trap 'teardown; exit 130' INT
    trap 'teardown; exit 143' TERM
    trap teardown EXIT
    if [ -n "$(all_nodes)" ]; then say "taking down the lab an earlier run left"; down >/dev/null 2>&1 || true; fi

    up "$@"
    zk=$("$HERE/zookeeper.sh" hosts)
    # One line per plugin left out, with the reason (the same on every node but zkpr's).
    for n in "$@"; do cat "$PVC_LAB_DIR/$(node_name "$n")/pvcnoded/plugins-left-out" 2>/dev/null || true; done | sort -u
    for n in "$@"; do
        # Loading the health plugins may take up to plugin_timeout (30 s) before run.
        until_ok 90 "pvcnoded $(node_name "$n") to run" [ "$(field node "$(node_name "$n")" daemon_state)" = run ]
    done
    say "pvcnoded on $(for n in "$@"; do node_name "$n"; done | xargs): daemon state run"
    for n in "$@"; do pvc node ready "$(node_name "$n")" --wait; done
    say "ready: $(for n in "$@"; do node_name "$n"; done | xargs)"
    mkdir -p "$PVC_LAB_DIR/guest"
    sed "s/type='kvm'/type='$(lab_accel)'/" "$HERE/tiny-vm.xml" >"$PVC_LAB_DIR/guest/$vm.xml"
    # The lab's nodes have 2 CPUs, below the reference's vCPU admission rule.
    pvc vm define "$PVC_LAB_DIR/guest/$vm.xml" --node "$first" --no-resource-check
    pvc vm start "$vm" --wait
    until_ok 30 "$vm running in libvirt on $first" \
        [ "$("$HERE/libvirtd.sh" virsh "$first" domstate "$vm" 2>/dev/null | head -1)" = running ]
    # The node's next keepalive publishes it (running domains, allocated memory).
    local uuid; uuid=$(field vm "$vm" uuid)
    published() {
        [[ "$(field node "$first" running_domains)" == *"$uuid"* ]] && [ "$(field node "$first" domains_count)" != 0 ]
    }
    until_ok 30 "$first to publish $vm as running" published
    say "guest $vm running on $first (libvirt domain type $(lab_accel))"
    pvc node list
    pvc vm list
    pvc vm info "$vm"
    for n in "$@"; do until_ok 120 "the first health check of $(node_name "$n")" lab_health "$zk" "$n" >/dev/null; done
    say "health (each plugin's deduction and message):"
    for n in "$@"; do lab_health "$zk" "$n"; done
    pvc node list
    cat <<TXT

In another shell:  export PVC_ZOOKEEPER=$zk PATH=$(dirname "$pvcbin"):\$PATH
  pvc node info $first; pvc vm info $vm; pvc vm log $vm; pvc node flush $first --wait; pvc node ready $first --wait
The daemons' logs follow; Ctrl-C stops the guest, the daemons and the lab.

TXT
    for n in "$@"; do
        local name; name=$(node_name "$n")
        if [ $# -eq 1 ]; then
            tail -n +1 -F "$PVC_LAB_DIR/$name/pvcnoded/out.log" &
        else
            tail -n +1 -F "$PVC_LAB_DIR/$name/pvcnoded/out.log" > >(sed -u "s/^/[$name] /") &
        fi
        followers+=($!)
    done
    while :; do
        sleep 2 & wait $!
        for n in "$@"; do
            "$HERE/node.sh" status "$n" >/dev/null || { say "pvcnoded $(node_name "$n") exited"; exit 1; }
        done
    done
}

cmd=${1:-}; shift || true
case "$cmd" in
up) lab_need_root; [ $# -gt 0 ] || set -- 1 2 3; up "$@" ;;
down) lab_need_root; down ;;
status) "$HERE/netns.sh" status; "$HERE/zookeeper.sh" status || true
        for n in $(all_nodes); do "$HERE/libvirtd.sh" status "$n" || true; "$HERE/node.sh" status "$n" || true; done ;;
smoke) smoke ;;
run) [ $# -gt 0 ] || set -- 1; run "$@" ;;
*) sed -n '2,15p' "$0"; exit 1 ;;
esac
