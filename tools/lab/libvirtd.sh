#!/usr/bin/env bash
# A private libvirtd per lab node, inside the node's netns plus its own mount and
# UTS namespaces, so several "hypervisors" run on one machine and can live-migrate.
#   libvirtd.sh start NODE    (netns.sh up NODE first) -> listens on qemu+tcp://<node ip>/system
#   libvirtd.sh stop NODE     destroys the node's guests, stops libvirtd, removes its state
#   libvirtd.sh uri NODE      prints the node's libvirt URI
#   libvirtd.sh virsh NODE ARGS...   virsh against the node, from its netns
#   libvirtd.sh accel         prints the guest domain type to use: kvm or qemu (TCG)
# Node state: $PVC_LAB_DIR/hvN/libvirt/{etc,run,lib,cache,log}, bind-mounted over
# /etc/libvirt, /run/libvirt, /var/lib/libvirt, /var/cache/libvirt, /var/log/libvirt.
set -euo pipefail
. "$(dirname "$0")/common.sh"

cmd=${1:-}; shift || true
[ "$cmd" = accel ] && { lab_accel; exit 0; }
node=${1:?node}; shift
NAME=$(node_name "$node"); NUM=$(node_num "$node"); NS=$(node_ns "$node"); IP=$(node_ip "$node")
R=$PVC_LAB_DIR/$NAME/libvirt
URI=qemu+tcp://$IP/system

pid() {
    local p; p=$(cat "$R/libvirtd.pid" 2>/dev/null) || return 1
    lab_alive "$p" libvirtd && echo "$p"
}
lvirsh() { ip netns exec "$NS" virsh -q -c "$URI" "$@"; }

write_config() {
    mkdir -p "$R"/{etc,run,lib,cache,log} "$R/etc/qemu/networks/autostart" "$R/cache/qemu/capabilities"
    cat >"$R/etc/libvirtd.conf" <<CONF
listen_tls = 0
listen_tcp = 1
listen_addr = "$IP"
auth_tcp = "none"
auth_unix_rw = "none"
unix_sock_group = "root"
host_uuid = "$(printf '00000000-0000-4000-8000-%012d' "$NUM")"
log_outputs = "${PVC_LAB_LIBVIRT_LOG_LEVEL:-3}:file:/var/log/libvirt/libvirtd.log"
keepalive_interval = 5
keepalive_count = 5
CONF
    # No virtlogd (stdio to a file), no cgroups (two daemons would collide on the same
    # machine/qemu-1-<vm> names), no security labelling; migration stays on the node IP
    # because the node's hostname is not in any DNS.
    cat >"$R/etc/qemu.conf" <<CONF
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
stdio_handler = "file"
cgroup_controllers = [ ]
migration_address = "$IP"
migration_host = "$IP"
CONF
    : >"$R/etc/libvirt.conf"
    cp "$(lab_hosts_file)" "$R/hosts"
}

case "$cmd" in
start)
    lab_need_root
    ip netns list | awk '{print $1}' | grep -qx "$NS" || lab_die "netns $NS missing (netns.sh up $NUM)"
    if p=$(pid); then echo "libvirtd $NAME already running pid=$p $URI"; exit 0; fi
    command -v libvirtd >/dev/null || lab_die "libvirtd not installed"
    write_config
    mkdir -p "$PVC_LAB_CACHE"
    rm -f "$R/libvirtd.pid"
    t0=$(now_ms)
    # unshare -m -u: private mounts and hostname (libvirt refuses to migrate to a host
    # with the same hostname or host UUID). taskset -c 0: libvirt keys its QEMU
    # capability cache on the host CPUID, which differs between vCPUs of some VMs, so
    # an unpinned daemon may re-probe (~8 s); QEMU children are re-pinned by libvirt.
    # setsid: a session of its own, so a Ctrl-C in the caller's terminal reaches the caller only.
    setsid ip netns exec "$NS" unshare -m -u --propagation private bash -c "
        set -e
        hostname $NAME
        mkdir -p /run/libvirt
        mount --bind '$R/etc'   /etc/libvirt
        mount --bind '$R/run'   /run/libvirt
        mount --bind '$R/lib'   /var/lib/libvirt
        mount --bind '$R/cache' /var/cache/libvirt
        mount --bind '$PVC_LAB_CACHE' /var/cache/libvirt/qemu/capabilities
        mount --bind '$R/log'   /var/log/libvirt
        mount --bind '$R/hosts' /etc/hosts
        exec taskset -c 0 libvirtd --listen -f /etc/libvirt/libvirtd.conf -p '$R/libvirtd.pid'
    " </dev/null >"$R/stdout.log" 2>&1 &
    for _ in $(seq 1 600); do
        lvirsh version >/dev/null 2>&1 && break
        if ! kill -0 $! 2>/dev/null && ! pid >/dev/null; then
            cat "$R/stdout.log" >&2; lab_die "libvirtd $NAME exited"
        fi
        sleep 0.05
    done
    lvirsh version >/dev/null 2>&1 || { tail -20 "$R/log/libvirtd.log" >&2 || true; lab_die "libvirtd $NAME not answering on $URI"; }
    echo "libvirtd $NAME pid=$(pid) $URI ready_in=$(( $(now_ms) - t0 ))ms"
    ;;
stop)
    if p=$(pid); then
        # libvirtd leaves QEMU running when it exits: destroy the guests first.
        for vm in $(lvirsh list --name 2>/dev/null); do lvirsh destroy "$vm" >/dev/null 2>&1 || true; done
        for vm in $(lvirsh list --all --name 2>/dev/null); do lvirsh undefine "$vm" >/dev/null 2>&1 || true; done
        kill "$p" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
        kill -9 "$p" 2>/dev/null || true
    fi
    # Any QEMU this node's libvirtd left behind (its netns holds nothing else of ours).
    if ip netns list | awk '{print $1}' | grep -qx "$NS"; then
        for q in $(ip netns pids "$NS" 2>/dev/null); do
            case "$(cat /proc/$q/comm 2>/dev/null)" in qemu-system-*) kill -9 "$q" 2>/dev/null || true ;; esac
        done
    fi
    rm -rf "$R"; rmdir "$PVC_LAB_DIR/$NAME" 2>/dev/null || true
    echo "libvirtd $NAME stopped" ;;
uri) echo "$URI" ;;
virsh) lvirsh "$@" ;;
status) if p=$(pid); then echo "libvirtd $NAME running pid=$p $URI"; else echo "libvirtd $NAME stopped"; exit 3; fi ;;
*) sed -n '2,11p' "$0"; exit 1 ;;
esac
