#!/usr/bin/env bash
# A lab cluster on this machine, as an operator sees it: builds pvc, then brings
# up N nodes (default hv1 hv2), each a network namespace with its own libvirtd
# and pvcnoded (the first three are coordinators), one ZooKeeper and a BMC per
# node (tools/lab/README.md). Every node is readied, guest tiny1 is started on
# the first, a first `pvc` session and each node's health are printed (every
# deduction explained), then the daemons' logs follow. Ctrl-C (or SIGTERM)
# stops the guest, the daemons and the lab; nothing is left running.
#   tools/lab-cluster.sh [N...]      nodes 1 2 by default
#   tools/lab-cluster.sh down        removes what a killed run left behind
#   tools/lab-cluster.sh demo        fencing show on hv1..hv3 (see demo below), then down
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = down ]; then exec "$root/tools/lab/lab.sh" down; fi
"$root/tools/install-deps.sh"
build=${PVC_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target pvcnoded pvc pvc-health-plugins pvc-module-hypervisor pvc-module-fencing
export PVC_LAB_PVCNODED=$build/bin/pvcnoded PVC_LAB_MODULE_DIR=$build/modules

# The fencing demo: three coordinators with a BMC each (tools/lab/bmc.sh), two
# guests on hv3; hv3's power is cut through its BMC as an operator's ipmitool
# would (its daemon, libvirtd and guests die at once); hv1/hv2 find it dead,
# fence it over IPMI and start its guests; the fence powers hv3 on again, it
# registers, and `pvc node ready hv3` brings its guests home. Each phase's
# time is printed. Keepalive 1 s x 3 intervals, no saving throws (the
# defaults, 5 s x 6 and 6 throws, work the same, only slower:
# PVC_LAB_KEEPALIVE_INTERVAL, PVC_LAB_FENCE_INTERVALS, PVC_LAB_SAVING_THROWS).
demo() {
    export PVC_LAB_COORDINATORS="1 2 3" PVC_LAB_SUCCESSFUL_FENCE=migrate
    export PVC_LAB_KEEPALIVE_INTERVAL=${PVC_LAB_KEEPALIVE_INTERVAL:-1}
    export PVC_LAB_FENCE_INTERVALS=${PVC_LAB_FENCE_INTERVALS:-3} PVC_LAB_SAVING_THROWS=${PVC_LAB_SAVING_THROWS:-0}
    export PVC_LAB_CONSOLE_DIR=${PVC_LAB_CONSOLE_DIR:-/var/log/libvirt}
    local lab=$root/tools/lab t0 t zk pvc vms="demo1 demo2" v
    . "$lab/common.sh"
    command -v ipmi_sim >/dev/null || lab_die "ipmi_sim missing (openipmi): the demo needs the lab BMCs"
    "$lab/lab.sh" down >/dev/null 2>&1 || true
    trap "'$lab/lab.sh' down >/dev/null 2>&1 || true" EXIT
    "$lab/lab.sh" up 1 2 3
    zk=$("$lab/zookeeper.sh" hosts)
    pvc() { "$build/bin/pvc" --zookeeper "$zk" "$@"; }
    # A field of `pvc <noun> info NAME --format json`.
    field() { pvc "$1" info "$2" --format json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$3"; }
    running_on() { [ "$("$lab/libvirtd.sh" virsh "$1" domstate "$2" 2>/dev/null | head -1)" = running ]; }
    # until SECONDS WHAT COMMAND...: polls every 50 ms.
    until_true() {
        local limit=$1 what=$2; shift 2
        local end=$(( $(now_ms) + limit * 1000 ))
        until "$@"; do [ "$(now_ms)" -lt "$end" ] || lab_die "demo: timed out waiting for $what"; sleep 0.05; done
    }
    phase() { local n; n=$(now_ms); printf '[demo %7.2f s] %-58s (%.2f s)\n' "$(( n - t0 ))e-3" "$1" "$(( n - t ))e-3"; t=$n; }
    t0=$(now_ms); t=$t0

    for n in 1 2 3; do pvc node ready "hv$n" --wait >/dev/null; done
    phase "hv1 hv2 hv3 ready (coordinators; keepalive ${PVC_LAB_KEEPALIVE_INTERVAL} s x ${PVC_LAB_FENCE_INTERVALS})"
    mkdir -p "$PVC_LAB_DIR/demo"
    for v in $vms; do
        sed -e "s/tiny1/$v/g; s/<uuid>.*<\/uuid>/<uuid>$(cat /proc/sys/kernel/random/uuid)<\/uuid>/" \
            -e "s/type='kvm'/type='$(lab_accel)'/" "$lab/tiny-vm.xml" >"$PVC_LAB_DIR/demo/$v.xml"
        # Selector vms: the survivors are alike here (one machine), the VM count tells them apart.
        pvc vm define "$PVC_LAB_DIR/demo/$v.xml" --node hv3 --no-resource-check --node-selector vms \
            --migration-method live >/dev/null
        pvc vm start "$v" --wait >/dev/null
    done
    on_hv3() { for v in $vms; do running_on 3 "$v" || return 1; done; }
    published() {
        pvc node info hv3 --format json | /usr/bin/python3 -c 'import json,sys
r = json.load(sys.stdin)["running_domains"]
sys.exit(0 if len(r if isinstance(r, list) else r.split()) == 2 else 1)'
    }
    until_true 10 "guests running on hv3" on_hv3
    until_true 10 "runningdomains of hv3" published
    phase "demo1 demo2 started on hv3"
    # The fencers judge only after a full deadline of fresh observations.
    sleep $(( PVC_LAB_KEEPALIVE_INTERVAL * PVC_LAB_FENCE_INTERVALS + 1 ))
    pvc node list
    t=$(now_ms)

    echo "--- cutting hv3's power: ipmitool -I lanplus -C 3 -H $("$lab/bmc.sh" addr 3) -U admin -P pass chassis power off"
    ipmitool -I lanplus -C 3 -H "$("$lab/bmc.sh" addr 3)" -U admin -P pass chassis power off
    phase "hv3 powered off (daemon, libvirtd, guests killed)"
    hv3_is() { case " $* " in *" $(field node hv3 daemon_state) "*) return 0 ;; esac; return 1; }
    until_true 60 "hv3 dead" hv3_is dead fenced init
    phase "hv3 found dead by a coordinator"
    until_true 60 "hv3 fenced" hv3_is fenced init
    phase "hv3 fenced (BMC confirmed power off)"
    local where
    moved() {
        for v in $vms; do
            where=$(field vm "$v" node)
            [ "$where" != hv3 ] && [ "$(field vm "$v" state)" = start ] && running_on "${where#hv}" "$v" || return 1
        done
    }
    until_true 60 "guests running elsewhere" moved
    phase "demo1 on $(field vm demo1 node), demo2 on $(field vm demo2 node): running"
    until_true 90 "hv3 back" hv3_is run
    phase "hv3 powered on by the fence, registered, run (flushed)"
    pvc node list
    pvc node ready hv3 --wait >/dev/null
    home() { for v in $vms; do [ "$(field vm "$v" node)" = hv3 ] && running_on 3 "$v" || return 1; done; }
    until_true 60 "guests home" home
    phase "pvc node ready hv3: demo1 demo2 running home on hv3"
    pvc node list
    pvc vm list
    printf '[demo %7.2f s] done; the lab goes down\n' "$(( $(now_ms) - t0 ))e-3"
}
if [ "${1:-}" = demo ]; then demo; exit 0; fi
[ $# -gt 0 ] || set -- 1 2
export PVC_LAB_PLUGINS=$build/plugins
exec "$root/tools/lab/lab.sh" run "$@"
