#!/usr/bin/env bash
# The daemon's main job on one machine, as an operator sees it. Builds pvc, then
# brings up one node, hv1, with the lab harness (tools/lab/README.md): its own
# network namespace, a private libvirtd (KVM where /dev/kvm works, else TCG),
# ZooKeeper, and pvcnoded as a coordinator with the hypervisor module and the
# bundled health plugins that apply to the lab (each one left out is named, with
# the reason). The node is readied, a tiny guest is defined and started with
# `pvc`, a first `pvc` session and the node's health are printed (every
# deduction with its plugin's message), then the daemon's log follows.
# Ctrl-C (or SIGTERM) stops the guest, the daemon and the lab: nothing is left
# running. tools/lab-cluster.sh does the same for several nodes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/install-deps.sh"
build=${PVC_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target pvcnoded pvc pvc-health-plugins pvc-module-hypervisor pvc-module-fencing
# A lab of its own name and network: it runs beside tools/lab-cluster.sh and the e2e tests.
export PVC_LAB_NAME=${PVC_LAB_NAME:-pvcnode} PVC_LAB_NET=${PVC_LAB_NET:-10.123.2}
export PVC_LAB_PVCNODED=$build/bin/pvcnoded PVC_LAB_MODULE_DIR=$build/modules PVC_LAB_PLUGINS=$build/plugins
exec "$root/tools/lab/lab.sh" run 1
