#!/usr/bin/env bash
# A private standalone ZooKeeper for the lab (Debian's jar run directly, small heap).
#   zookeeper.sh start    in the switch netns on <net>.100:2181 when the lab network is
#                         up (reachable from every node and, via the host link, the root
#                         netns), else on 127.0.0.1:$PVC_LAB_ZK_PORT (default 21810)
#   zookeeper.sh stop     stops it and removes its data
#   zookeeper.sh hosts    prints its connect string
#   zookeeper.sh status
# State: $PVC_LAB_DIR/zookeeper/{zoo.cfg,data,zk.log,pid,hosts}
set -euo pipefail
. "$(dirname "$0")/common.sh"
D=$PVC_LAB_DIR/zookeeper
CP=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar
JVM_OPTS="-Xms32m -Xmx128m -XX:+UseSerialGC -XX:MaxMetaspaceSize=64m -Xss512k -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true -Dzookeeper.jmx.log4j.disable=true"

pid() {
    local p; p=$(cat "$D/pid" 2>/dev/null) || return 1
    [ -n "$p" ] && kill -0 "$p" 2>/dev/null && grep -q QuorumPeerMain "/proc/$p/cmdline" 2>/dev/null && echo "$p"
}
# ruok HOST PORT [NETNS] -> 0 when the server answers imok
ruok() {
    ${3:+ip netns exec $3} /usr/bin/python3 - "$1" "$2" <<'PY'
import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1)
    s.sendall(b"ruok"); sys.exit(0 if s.recv(16) == b"imok" else 1)
except Exception:
    sys.exit(1)
PY
}

cmd=${1:-}
case "$cmd" in
start)
    if p=$(pid); then echo "zookeeper already running pid=$p $(cat "$D/hosts")"; exit 0; fi
    [ -r /usr/share/java/zookeeper.jar ] || lab_die "zookeeper not installed (Debian package zookeeper)"
    if ip netns list | awk '{print $1}' | grep -qx $LAB_SW; then
        addr=$LAB_SW_IP port=2181 ns=$LAB_SW
    else
        addr=127.0.0.1 port=${PVC_LAB_ZK_PORT:-21810} ns=
    fi
    rm -rf "$D"; mkdir -p "$D/data"
    cat >"$D/zoo.cfg" <<CFG
tickTime=500
initLimit=10
syncLimit=5
dataDir=$D/data
clientPortAddress=$addr
clientPort=$port
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
standaloneEnabled=true
CFG
    echo "$addr:$port" >"$D/hosts"
    # setsid: a Ctrl-C in the caller's terminal reaches the caller only.
    setsid ${ns:+ip netns exec $ns} java $JVM_OPTS -cp "$CP" org.apache.zookeeper.server.quorum.QuorumPeerMain \
        "$D/zoo.cfg" </dev/null >"$D/zk.log" 2>&1 &
    echo $! >"$D/pid"
    t0=$(now_ms)
    for _ in $(seq 1 600); do
        ruok "$addr" "$port" "$ns" && break
        pid >/dev/null || { tail -20 "$D/zk.log" >&2; lab_die "zookeeper exited"; }
        sleep 0.05
    done
    ruok "$addr" "$port" "$ns" || { tail -20 "$D/zk.log" >&2; lab_die "zookeeper not ready"; }
    echo "zookeeper pid=$(pid) $addr:$port ready_in=$(( $(now_ms) - t0 ))ms"
    ;;
stop)
    if p=$(pid); then
        kill "$p"; for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
        kill -9 "$p" 2>/dev/null || true
    fi
    rm -rf "$D"; echo "zookeeper stopped" ;;
hosts) cat "$D/hosts" ;;
status) if p=$(pid); then echo "zookeeper running pid=$p $(cat "$D/hosts")"; else echo "zookeeper stopped"; exit 3; fi ;;
*) sed -n '2,10p' "$0"; exit 1 ;;
esac
