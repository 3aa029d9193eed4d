#!/usr/bin/env bash
# The daemon's main job, locally: builds pvc, starts a private ZooKeeper on
# loopback, initialises the cluster, and runs one pvcnoded (node "pvchv1", a
# coordinator) in the foreground with keepalive logging. A status line from
# ZooKeeper shows the node registered and its keepalive advancing.
# Ctrl-C (or SIGTERM) stops the daemon cleanly (daemonstate stop), then ZooKeeper.
# For the multi-node lab with libvirtd per node see tools/lab/lab.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
node=${PVC_LAB_NODE:-pvchv1}
"$root/tools/install-deps.sh"
build=${PVC_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# The bundled health plugins too, so the keepalive log shows node health and
# each plugin's result from the first run on.
cmake --build "$build" -j"$(nproc)" --target pvcnoded pvc pvc-health-plugins

export PVC_LAB_NAME=${PVC_LAB_NAME:-pvcsolo}          # no lab network: ZooKeeper on loopback
export PVC_LAB_DIR=${PVC_LAB_DIR:-${TMPDIR:-/tmp}/pvc-lab-node}
mkdir -p "$PVC_LAB_DIR"
"$root/tools/lab/zookeeper.sh" start >/dev/null
zk=$("$root/tools/lab/zookeeper.sh" hosts)
port=${zk##*:}
d=$PVC_LAB_DIR/$node
mkdir -p "$d"/{run,log,console,plugins}
# Refreshed on every run: a rebuilt plugin replaces the copy of an earlier run.
install -m 0755 "$build"/plugins/* "$d/plugins/"   # a new file each: never rewrites a loaded .so in place
echo "127.0.0.1 localhost $node $node.pvc.local" >"$d/hosts"
cat >"$d/pvcnoded.yaml" <<YAML
---
pvc:
  node: $node
  debug: false
  functions: {enable_hypervisor: false, enable_networking: false, enable_storage: false, enable_api: false}
  cluster:
    coordinators: ["$node:$port"]
    networks: {cluster: {domain: pvc.local}}
  system:
    intervals: {vm_shutdown_timeout: 180, keepalive_interval: 5, fence_intervals: 6, suicide_intervals: 0}
    fencing:
      actions: {successful_fence: migrate, failed_fence: None}
      ipmi: {host: "", user: admin, pass: password}
    migration: {target_selector: mem}
    configuration:
      directories:
        plugin_directory: $d/plugins
        dynamic_directory: $d/run
        log_directory: $d/log
        console_log_directory: $d/console
        module_directory: $build/modules
      logging:
        file_logging: true
        stdout_logging: true
        zookeeper_logging: true
        log_colours: true
        log_dates: true
        log_keepalives: true
        log_keepalive_cluster_details: true
        log_keepalive_plugin_details: true
        console_log_lines: 1000
        node_log_lines: 2000
YAML
# The node's name resolves to loopback only inside its own mount namespace.
in_node() { unshare -u -m --propagation private sh -c "mount --bind '$d/hosts' /etc/hosts && hostname '$node' && exec \"\$@\"" sh "$@"; }
in_node "$build/bin/pvcnoded" --config "$d/pvcnoded.yaml" --init-cluster

status() {   # one line from ZooKeeper, read by the pvc CLI
    "$build/bin/pvc" --zookeeper "$zk" node list 2>/dev/null | sed 's/^/[zookeeper] /' || true
}
( while sleep 5; do status; done ) &
watcher=$!
cleanup() {
    kill "$watcher" 2>/dev/null || true
    status
    "$root/tools/lab/zookeeper.sh" stop >/dev/null || true
}
trap cleanup EXIT
trap 'kill -TERM "$daemon" 2>/dev/null || true' INT TERM
# The daemon runs with hostname $node (UTS namespace) and resolves $node to loopback.
in_node "$build/bin/pvcnoded" --config "$d/pvcnoded.yaml" &
daemon=$!
set +e
wait "$daemon"; rc=$?
[ "$rc" -gt 128 ] && { wait "$daemon"; rc=$?; }
echo "pvcnoded exited with status $rc"
exit "$rc"
