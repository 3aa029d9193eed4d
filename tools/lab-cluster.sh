#!/usr/bin/env bash
# A lab cluster on this machine: builds pvc, then brings up N nodes (default 2),
# each a network namespace with its own libvirtd and pvcnoded, plus one ZooKeeper
# (tools/lab/README.md), and initialises the cluster. Then use `pvc` against it:
#   export PVC_ZOOKEEPER=<printed address>; pvc node list; pvc vm define tools/lab/tiny-vm.xml ...
#   tools/lab-cluster.sh [N...]      up (nodes 1 2 by default)
#   tools/lab-cluster.sh down        everything stopped and removed
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = down ]; then exec "$root/tools/lab/lab.sh" down; fi
"$root/tools/install-deps.sh"
build=${PVC_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target pvcnoded pvc pvc-module-hypervisor
export PVC_LAB_PVCNODED=$build/bin/pvcnoded PVC_LAB_MODULE_DIR=$build/modules
# Console logs where the VM XML (tools/lab/tiny-vm.xml) writes them; /var/log/libvirt
# is private to each node.
export PVC_LAB_CONSOLE_DIR=${PVC_LAB_CONSOLE_DIR:-/var/log/libvirt}
[ $# -gt 0 ] || set -- 1 2
"$root/tools/lab/lab.sh" up "$@"
zk=$("$root/tools/lab/zookeeper.sh" hosts)
sleep 2
"$build/bin/pvc" --zookeeper "$zk" node list
cat <<TXT

Lab cluster up. Try:
  export PVC_ZOOKEEPER=$zk PATH=$build/bin:\$PATH
  pvc node ready hv1 --wait; pvc node ready hv2 --wait
  pvc vm define tools/lab/tiny-vm.xml --node hv1 --no-resource-check   # nodes here have 2 CPUs
  pvc vm start tiny1 --wait; pvc vm migrate tiny1 --node hv2 --live --wait; pvc vm unmigrate tiny1 --wait
  pvc node flush hv1 --wait; pvc node ready hv1 --wait; pvc vm log tiny1
Stop it with: tools/lab-cluster.sh down
TXT
