#!/usr/bin/env bash
# A node daemon (pvcnoded) per lab node, in the same net, mount and UTS namespaces
# as the node's libvirtd: hostname hvN, qemu:///system is the node's own libvirtd,
# every lab node resolves by name (hvN.<cluster domain>).
#   node.sh start NODE    (libvirtd.sh start NODE and zookeeper.sh start first)
#   node.sh stop NODE     SIGTERM (VMs keep running, as on a real node), then removes
#                         the daemon's state
#   node.sh config NODE   writes the node's pvcnoded.yaml and prints its path
#   node.sh log NODE      prints the daemon's output
# Settings (environment):
#   PVC_LAB_PVCNODED          the pvcnoded binary (default: pvcnoded on PATH)
#   PVC_LAB_MODULE_DIR        module directory (default: the daemon's built-in one)
#   PVC_LAB_ZK                ZooKeeper "host:port" (default: zookeeper.sh hosts)
#   PVC_LAB_COORDINATORS      space-separated coordinator node names (default: none;
#                             then ZooKeeper is given by address and every node is a
#                             hypervisor). Coordinators are named as on a real cluster
#                             (hvN, port 2181): the node's netns forwards <net>.*:2181
#                             to the lab's ZooKeeper (an iptables DNAT rule)
#   PVC_LAB_VM_SHUTDOWN_TIMEOUT (default 180), PVC_LAB_KEEPALIVE_INTERVAL (default 5),
#   PVC_LAB_CONSOLE_LOG_LINES (default 1000), PVC_LAB_DEBUG (default false),
#   PVC_LAB_CONSOLE_DIR       console_log_directory (default: per node, under its state)
#   PVC_LAB_SUCCESSFUL_FENCE  successful_fence (default none), PVC_LAB_SAVING_THROWS (default 6),
#   PVC_LAB_FENCE_INTERVALS   fence_intervals (default 6);
#                             the node's IPMI details are its lab BMC (bmc.sh)
#   PVC_LAB_PLUGINS           a directory of built health plugins: those that apply
#                             to the lab are installed into the node's plugin
#                             directory, each one left out is named with the reason
#                             in <state>/plugins-left-out (lab_plugin_left_out in
#                             common.sh); default: no plugins
# Daemon state: $PVC_LAB_DIR/hvN/pvcnoded/{pvcnoded.yaml,run,log,console,pid,out.log}
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"

cmd=${1:-}; shift || true
node=${1:?node}; shift
NAME=$(node_name "$node")
R=$PVC_LAB_DIR/$NAME/pvcnoded

pid() {
    local p; p=$(cat "$R/pid" 2>/dev/null) || return 1
    lab_alive "$p" pvcnoded && echo "$p"
}

write_config() {
    mkdir -p "$R"/{run,log,console,plugins} "${PVC_LAB_CONSOLE_DIR:-$R/console}"
    local zk=${PVC_LAB_ZK:-$("$HERE/zookeeper.sh" hosts 2>/dev/null || true)}
    [ -n "$zk" ] || lab_die "no ZooKeeper (zookeeper.sh start, or set PVC_LAB_ZK)"
    {
        echo "pvc:"
        echo "  node: $NAME"
        echo "  debug: ${PVC_LAB_DEBUG:-false}"
        echo "  functions:"
        echo "    enable_hypervisor: true"
        echo "    enable_networking: false"
        echo "    enable_storage: false"
        echo "    enable_api: false"
        echo "  cluster:"
        echo "    coordinators:"
        if [ -n "${PVC_LAB_COORDINATORS:-}" ]; then
            for c in $PVC_LAB_COORDINATORS; do echo "      - $(node_name "$c")"; done
        else
            echo "      - $zk"
        fi
        echo "    networks:"
        echo "      cluster:"
        echo "        domain: $PVC_LAB_DOMAIN"
        echo "  system:"
        echo "    intervals:"
        echo "      vm_shutdown_timeout: ${PVC_LAB_VM_SHUTDOWN_TIMEOUT:-180}"
        echo "      keepalive_interval: ${PVC_LAB_KEEPALIVE_INTERVAL:-5}"
        echo "      fence_intervals: ${PVC_LAB_FENCE_INTERVALS:-6}"
        echo "      suicide_intervals: 0"
        echo "    fencing:"
        echo "      actions:"
        echo "        successful_fence: ${PVC_LAB_SUCCESSFUL_FENCE:-none}"
        echo "        failed_fence: none"
        echo "      saving_throws: ${PVC_LAB_SAVING_THROWS:-6}"
        echo "      ipmi:"
        echo "        host: $("$HERE/bmc.sh" addr "$NAME")"
        echo "        user: admin"
        echo "        pass: pass"
        echo "        timeout: 5"
        echo "        ipmitool_args: [\"-C\", \"3\"]"
        echo "    migration:"
        echo "      target_selector: mem"
        echo "    hypervisor:"
        echo "      libvirt_uri: qemu:///system"
        echo "      migration_uri: qemu+tcp://{node}.{cluster_domain}/system"
        echo "    configuration:"
        echo "      directories:"
        [ -z "${PVC_LAB_MODULE_DIR:-}" ] || echo "        module_directory: $PVC_LAB_MODULE_DIR"
        echo "        plugin_directory: $R/plugins"
        echo "        dynamic_directory: $R/run"
        echo "        log_directory: $R/log"
        echo "        console_log_directory: ${PVC_LAB_CONSOLE_DIR:-$R/console}"
        echo "      logging:"
        echo "        file_logging: false"
        echo "        stdout_logging: true"
        echo "        zookeeper_logging: false"
        echo "        log_colours: false"
        echo "        log_dates: true"
        echo "        log_keepalives: true"
        echo "        console_log_lines: ${PVC_LAB_CONSOLE_LOG_LINES:-1000}"
        echo "        node_log_lines: 100"
    } >"$R/pvcnoded.yaml"
    echo "$R/pvcnoded.yaml"
}

case "$cmd" in
config) write_config ;;
start)
    lab_need_root
    if p=$(pid); then echo "pvcnoded $NAME already running pid=$p"; exit 0; fi
    lvpid=$(cat "$PVC_LAB_DIR/$NAME/libvirt/libvirtd.pid" 2>/dev/null) || lab_die "libvirtd $NAME not running (libvirtd.sh start $NAME)"
    bin=${PVC_LAB_PVCNODED:-$(command -v pvcnoded || true)}
    [ -x "$bin" ] || lab_die "pvcnoded not found (set PVC_LAB_PVCNODED)"
    cfg=$(write_config)
    if [ -n "${PVC_LAB_PLUGINS:-}" ]; then
        rm -f "$R"/plugins/* "$R/plugins-left-out"
        for f in "$PVC_LAB_PLUGINS"/*; do
            [ -f "$f" ] || continue
            why=$(lab_plugin_left_out "${f##*/}" "$NAME")
            if [ -n "$why" ]; then
                echo "health plugin ${f##*/} left out: $why" >>"$R/plugins-left-out"
            else
                install -m 0755 "$f" "$R/plugins/"   # a copy: a rebuild never rewrites a loaded .so
            fi
        done
    fi
    if [ -n "${PVC_LAB_COORDINATORS:-}" ]; then
        # The daemon connects to its coordinators by name (hvN:2181) as on a real
        # cluster; in the lab the one ZooKeeper answers for all of them.
        zk=${PVC_LAB_ZK:-$("$HERE/zookeeper.sh" hosts)}
        ns=$(node_ns "$node")
        rule=(OUTPUT -p tcp -d "$PVC_LAB_NET.0/24" --dport 2181 -j DNAT --to-destination "$zk")
        ip netns exec "$ns" iptables -t nat -C "${rule[@]}" 2>/dev/null ||
            ip netns exec "$ns" iptables -t nat -A "${rule[@]}" || lab_die "cannot forward port 2181 in $ns (iptables nat)"
    fi
    # The libvirtd's namespaces: same hostname, /run/libvirt, /etc/hosts and network.
    # A session of its own: a Ctrl-C in the caller's terminal reaches the caller only.
    setsid nsenter -t "$lvpid" -m -u -n env PVCD_CONFIG_FILE="$cfg" "$bin" --config "$cfg" \
        </dev/null >"$R/out.log" 2>&1 &
    echo $! >"$R/pid"
    sleep 0.2
    pid >/dev/null || { cat "$R/out.log" >&2; lab_die "pvcnoded $NAME exited at once"; }
    plugins=$(cd "$R/plugins" && ls | sed 's/\.so$//' | sort | xargs)
    echo "pvcnoded $NAME pid=$(pid) config=$cfg${PVC_LAB_PLUGINS:+ health plugins: ${plugins:-none}}"
    ;;
stop)
    if p=$(pid); then
        kill -TERM "$p" 2>/dev/null || true
        for _ in $(seq 1 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
        kill -9 "$p" 2>/dev/null || true
    fi
    [ "${PVC_LAB_KEEP_LOGS:-0}" = 1 ] || rm -rf "$R"
    echo "pvcnoded $NAME stopped" ;;
log) cat "$R/out.log" ;;
status) if p=$(pid); then echo "pvcnoded $NAME running pid=$p"; else echo "pvcnoded $NAME stopped"; exit 3; fi ;;
*) sed -n '2,20p' "$0"; exit 1 ;;
esac
