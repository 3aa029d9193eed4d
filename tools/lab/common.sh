# Shared settings of the lab harness (sourced by the other scripts, never run).
#
# Topology (all confined to network namespaces this harness creates):
#   netns <name>-sw    bridge br0, address ${PVC_LAB_NET}.100 (lab services: ZooKeeper)
#   netns <name>-hvN   eth0 = ${PVC_LAB_NET}.N/24, veth to br0; node N's libvirtd (and daemon)
#   root netns         veth <name>-host = ${PVC_LAB_NET}.254/24 into br0 (PVC_LAB_HOST_LINK=1),
#                      so tests running in the root netns reach every node by IP
# <name> is $PVC_LAB_NAME (default pvclab): two labs with different names and nets
# (e.g. a developer's lab and the e2e tests) run side by side.
# State lives under $PVC_LAB_DIR (default: a fixed directory under $TMPDIR).
# $PVC_LAB_DIR/hosts names every node (hvN, hvN.<cluster domain>); node namespaces
# and tests bind-mount it over /etc/hosts so migration URIs by name resolve.

PVC_LAB_NAME=${PVC_LAB_NAME:-pvclab}
PVC_LAB_DIR=${PVC_LAB_DIR:-${TMPDIR:-/tmp}/$PVC_LAB_NAME}
PVC_LAB_NET=${PVC_LAB_NET:-10.123.0}          # first three octets of the lab /24
PVC_LAB_DOMAIN=${PVC_LAB_DOMAIN:-pvc.local}   # cluster domain: hvN.<domain> resolves in nodes
PVC_LAB_HOST_LINK=${PVC_LAB_HOST_LINK:-1}
# QEMU capability probing costs ~8 s per fresh cache; keep one cache for every lab run.
PVC_LAB_CACHE=${PVC_LAB_CACHE:-${TMPDIR:-/tmp}/pvc-lab-cache}

[ ${#PVC_LAB_NAME} -le 10 ] || { echo "lab: PVC_LAB_NAME too long (interface names)" >&2; exit 1; }
LAB_SW=$PVC_LAB_NAME-sw
LAB_HOST_IF=$PVC_LAB_NAME-host
LAB_SW_IP=$PVC_LAB_NET.100
LAB_HOST_IP=$PVC_LAB_NET.254

# node_num hv3|3 -> 3 ; node_name -> hv3 ; node_ns -> pvclab-hv3 ; node_ip -> 10.123.0.3
node_num() {
    local n=${1//[!0-9]/}
    if [ -z "$n" ] || [ "$n" -lt 1 ] || [ "$n" -gt 99 ]; then
        echo "lab: bad node '$1' (want 1..99 or hv1..hv99)" >&2; return 1
    fi
    echo $((10#$n))
}
node_name() { echo "hv$(node_num "$1")"; }
node_ns()   { echo "$PVC_LAB_NAME-hv$(node_num "$1")"; }
node_ip()   { echo "$PVC_LAB_NET.$(node_num "$1")"; }

lab_die() { echo "lab: $*" >&2; exit 1; }
# lab_alive PID COMM: PID runs COMM and has not exited. A killed process stays
# a zombie (same comm) until it is reaped: that is not running, so a restart
# right after a kill -9 starts the daemon instead of finding it "already running".
# Name and state come from one read of /proc/PID/status: a zombie reaped
# between two reads (comm, then status) must not count as running.
lab_alive() {
    [ -n "$1" ] || return 1
    local s; s=$(cat "/proc/$1/status" 2>/dev/null) || return 1
    local name state
    name=$(sed -n 's/^Name:[[:space:]]*//p' <<<"$s")
    state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' <<<"$s")
    [ "$name" = "$2" ] && [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}
lab_need_root() { [ "$(id -u)" -eq 0 ] || lab_die "must run as root (network and mount namespaces)"; }
now_ms() { date +%s%3N; }

# Domain type for guests: "kvm" when /dev/kvm really works here, else "qemu" (TCG).
# Probed once per lab dir (QEMU starts with accel=kvm and quits). PVC_LAB_ACCEL=qemu
# forces TCG (to check the fallback on a machine with KVM).
lab_accel() {
    local f=$PVC_LAB_DIR/accel
    if [ -n "${PVC_LAB_ACCEL:-}" ]; then echo "$PVC_LAB_ACCEL"; return; fi
    if [ ! -s "$f" ]; then
        mkdir -p "$PVC_LAB_DIR"
        if [ -r /dev/kvm ] && [ -w /dev/kvm ] && echo quit | timeout 20 qemu-system-x86_64 \
                -machine none,accel=kvm -display none -nodefaults -no-user-config -monitor stdio \
                >/dev/null 2>&1; then
            echo kvm >"$f"
        else
            echo qemu >"$f"
        fi
    fi
    cat "$f"
}

# Writes $PVC_LAB_DIR/hosts (every possible node by name) and prints its path.
lab_hosts_file() {
    local f=$PVC_LAB_DIR/hosts i
    mkdir -p "$PVC_LAB_DIR"
    {
        echo "127.0.0.1 localhost"
        for i in $(seq 1 99); do echo "$PVC_LAB_NET.$i hv$i.$PVC_LAB_DOMAIN hv$i"; done
    } >"$f.tmp" && mv "$f.tmp" "$f"
    echo "$f"
}

# Why a bundled health plugin does not apply to lab node NODE (one line), or
# nothing when it does: the lab has no KeyDB, runs without the networking
# function, and has no RAID controller or in-band BMC unless this machine has.
# PLUGIN is the plugin's file name (load.so, kydb, ...).
lab_plugin_left_out() {
    local plugin=${1%.so} node=$2 c
    case "$plugin" in
    kydb) echo "no KeyDB in the lab (the plugin checks localhost:6379)" ;;
    psql) echo "its PostgreSQL databases belong to the networking function, off in the lab (enable_networking: false)" ;;
    nics) echo "no bridge/upstream/cluster/storage devices: the networking function is off in the lab (enable_networking: false)" ;;
    ipmi) command -v ipmi_sim >/dev/null ||
              echo "no BMC in the lab (ipmi_sim, Debian package openipmi, is not installed)" ;;
    psur) [ -e /dev/ipmi0 ] || echo "no in-band BMC on this machine (/dev/ipmi0) for its power supply sensors" ;;
    hwrd) command -v mvcli >/dev/null || command -v megacli >/dev/null || command -v ssacli >/dev/null ||
              echo "no hardware RAID tool on this machine (mvcli, megacli, ssacli)" ;;
    edac) [ -x /usr/bin/edac-util ] || echo "edac-util is not installed (Debian package edac-utils): no memory error counts to read" ;;
    disk) command -v smartctl >/dev/null || [ -x /usr/sbin/smartctl ] ||
              echo "smartctl is not installed (Debian package smartmontools): no disk to check" ;;
    zkpr) for c in ${PVC_LAB_COORDINATORS:-}; do [ "$(node_name "$c")" = "$(node_name "$node")" ] && return 0; done
          echo "$(node_name "$node") is not a coordinator: no ZooKeeper member of its own to check" ;;
    esac
}

# Prints NODE's health from ZooKeeper and every plugin's deduction with its
# message; "waiting" (status 1) until every plugin has run.
lab_health() {  # ZK NODE
    /usr/bin/python3 - "$1" "$(node_name "$2")" <<'PY'
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=10)
node = sys.argv[2]
base = f"/nodes/{node}"
def get(path):
    try:
        return zk.get(path)[0].decode()
    except Exception:
        return ""
plugins = [p for p in get(f"{base}/monitoring_plugins").split() if p]
health = get(f"{base}/monitoring_health")
rows = []
for p in sorted(zk.get_children(f"{base}/monitoring_data") if zk.exists(f"{base}/monitoring_data") else []):
    rows.append((p, get(f"{base}/monitoring_data/{p}/health_delta") or "0",
                 get(f"{base}/monitoring_data/{p}/message"), get(f"{base}/monitoring_data/{p}/last_run") or "0"))
zk.stop()
pending = [p for p in plugins if not any(r[0] == p and r[3] not in ("", "0") for r in rows)]
if not health.isdigit() or pending:
    print(f"{node}: waiting for the first run of {' '.join(pending) or 'the health check'}")
    sys.exit(1)
print(f"{node} health {health}%")
width = max([len(r[0]) for r in rows] + [4])
for name, delta, message, _ in rows:
    print(f"  {name:<{width}} {'-' + delta if delta not in ('0', '') else '0':>4}  {message}")
PY
}
