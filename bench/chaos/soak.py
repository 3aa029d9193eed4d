#!/usr/bin/python3
"""The seeded chaos soak (bench/chaos/README.md).

Brings up the namespace lab (tools/lab) with five nodes of ours (hv1..hv3
coordinators that fence through the lab's BMCs, hv4 hv5 hypervisors), a
three-member ZooKeeper ensemble and two tiny TCG/KVM guests plus VMs that are
only defined; then runs a schedule of random faults drawn from --seed, with
operator actions (`pvc`) in between, while an observer reads ZooKeeper and
every node's libvirtd from outside and checks the invariants:

  double-run      no VM runs on two nodes
  failover        every VM in `start` runs somewhere within the failover bound
  lost            no VM disappears or fails; none stays in a transient state
  fence-current   no node is marked dead while its keepalive was current
  primary         at most one coordinator is primary
  keys            the cluster's keys hold valid values

It prints faults by kind, recoveries, the longest VM downtime per fault kind
and every violation with the seed and the timeline before it.
Run as root from a built tree:  bench/chaos/soak.py --seed 1 --minutes 5
"""

import argparse
import collections
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid as uuidlib

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LAB = os.path.join(ROOT, "tools", "lab")

NODES = [1, 2, 3, 4, 5]
COORDS = [1, 2, 3]
ZK_MEMBERS = [1, 2, 3]

DAEMON_STATES = {"init", "run", "shutdown", "stop", "dead", "fenced"}
ROUTER_STATES = {"client", "secondary", "primary", "takeover", "relinquish"}
DOMAIN_STATES = {"ready", "flush", "flushed", "unflush", "fence-flush"}
VM_STATES = {"start", "restart", "shutdown", "stop", "disable", "fail", "migrate", "migrate-live",
             "unmigrate", "provision", "restore", "delete"}
VM_TRANSIENT = {"restart", "shutdown", "migrate", "migrate-live", "unmigrate", "provision", "delete"}
VM_RUNNING = {"start", "migrate", "migrate-live", "unmigrate"}
HEAVY = {"bmc-power-off", "sigstop-pvcnoded-long", "net-cut-long", "zk-quorum-loss", "sigstop-libvirtd-long",
         "zk-sigstop-long"}
# The faults after which a node may be found dead (silent beyond the deadline).
FENCE_OK = {"bmc-power-off", "sigstop-pvcnoded-long", "net-cut-long"}


def now():
    return time.monotonic()


class Soak:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.name = args.lab_name
        self.net = args.lab_net
        self.dir = os.path.join(os.environ.get("TMPDIR", "/tmp"), self.name)
        self.ki = args.keepalive
        self.fi = args.fence_intervals
        self.throws = args.saving_throws
        self.deadline = self.ki * self.fi
        self.bound = args.failover_bound
        self.zk_hosts = ",".join(f"{self.zk_ip(m)}:2181" for m in ZK_MEMBERS)
        build = os.path.abspath(args.build)
        self.pvcnoded = os.path.join(build, "bin", "pvcnoded")
        self.pvc_bin = os.path.join(build, "bin", "pvc")
        self.modules = os.path.join(build, "modules")
        self.t0 = now()
        self.lock = threading.RLock()
        self.timeline = []          # (t, text)
        self.violations = []        # (t, kind, text)
        self.vio_keys = set()
        self.faults = collections.Counter()
        self.bg_faults = collections.Counter()
        self.recoveries = collections.defaultdict(list)   # kind -> [seconds]
        self.unrecovered = collections.Counter()
        self.downtime = collections.defaultdict(float)      # cause kind -> longest seconds
        self.fences = []            # (t, node, expected)
        self.ops = collections.Counter()
        self.cause = "none"         # fault kind or operator action in progress
        self.silenced = {}          # node -> fault kind that keeps it from writing keepalives
        self.silent_hold = {}       # node -> for how long
        self.healed = {}            # node -> (kind, hold, when) of the last silence
        self.stopped = set()        # pids we SIGSTOPped
        self.own_restart = set()    # nodes whose killed daemon the fault itself restarts
        self.windows = []           # (t from, t to, node or None for ZooKeeper) of each fault
        self.ka_gaps = []           # (t of the previous write seen, t of this one, node, seconds between their mtimes)
        self.zk_pids = {}
        self.vms = {}               # uuid -> {"name", "guest": bool}
        self.expected_gone = set()
        self.lab_faults = []        # (t, text): the host misbehaved, not a daemon of ours
        self.logf = None
        self.stop_observer = threading.Event()

    # ------------------------------------------------------------------ output
    def t(self):
        return now() - self.t0

    def log(self, text, quiet=False):
        line = f"[{self.t():8.2f}] {text}"
        with self.lock:
            self.timeline.append((self.t(), text))
            if self.logf:
                self.logf.write(line + "\n")
                self.logf.flush()
        if not quiet:
            print(line, flush=True)

    def violation(self, kind, key, text):
        with self.lock:
            if (kind, key) in self.vio_keys:
                return
            self.vio_keys.add((kind, key))
            t = self.t()
            self.violations.append((t, kind, text))
            self.log(f"VIOLATION {kind}: {text}")
            print(f"--- timeline before the violation (seed {self.seed}, t={t:.2f} s; replay: "
                  f"{' '.join(self.replay_cmd())})", flush=True)
            for (te, txt) in self.timeline:
                if te >= t - 90 and not txt.startswith("VIOLATION"):
                    print(f"    [{te:8.2f}] {txt}", flush=True)
            print("--- end of timeline", flush=True)

    def replay_cmd(self):
        return ["bench/chaos/soak.py", "--seed", str(self.seed), "--minutes", str(self.args.minutes)]

    # ------------------------------------------------------------------ helpers
    def env(self):
        e = dict(os.environ)
        e.update({
            "PVC_LAB_NAME": self.name, "PVC_LAB_NET": self.net, "PVC_LAB_DIR": self.dir,
            "PVC_LAB_COORDINATORS": " ".join(map(str, COORDS)),
            "PVC_LAB_PVCNODED": os.path.join(self.dir, "pvcnoded"),
            "PVC_LAB_MODULE_DIR": self.modules,
            "PVC_LAB_KEEPALIVE_INTERVAL": str(self.ki),
            "PVC_LAB_FENCE_INTERVALS": str(self.fi),
            "PVC_LAB_SAVING_THROWS": str(self.throws),
            "PVC_LAB_SUCCESSFUL_FENCE": "migrate",
            "PVC_LAB_VM_SHUTDOWN_TIMEOUT": "5",
            "PVC_LAB_CONSOLE_DIR": "/var/log/libvirt",
            "PVC_LAB_ZK": f"{self.zk_ip(1)}:2181",
        })
        return e

    def sh(self, argv, timeout=120, check=False, quiet=True):
        try:
            r = subprocess.run(argv, env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, timeout=timeout, text=True)
            out, rc = r.stdout, r.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), 124
        if check and rc != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({rc}): {out.strip()[-2000:]}")
        if not quiet:
            self.log(f"$ {' '.join(argv)} -> {rc}")
        return rc, out

    def script(self, name, *args, timeout=120, check=True):
        return self.sh([os.path.join(LAB, name)] + [str(a) for a in args], timeout=timeout, check=check)

    def pvc(self, *args, timeout=120):
        args = [str(a) for a in args]
        front = []
        if "--timeout" in args:  # a global option of pvc
            i = args.index("--timeout")
            front, args = args[i:i + 2], args[:i] + args[i + 2:]
        argv = [self.pvc_bin, "--zookeeper", self.zk_hosts, "--no-color"] + front + args
        rc, out = self.sh(argv, timeout=timeout)
        return rc, out.strip()

    def zk_ip(self, m):
        return f"{self.net}.{90 + m}"

    def ns(self, n):
        return f"{self.name}-hv{n}"

    def pid_of(self, path, comm):
        try:
            p = int(open(path).read().strip())
            if open(f"/proc/{p}/comm").read().strip() == comm:
                return p
        except (OSError, ValueError):
            pass
        return None

    def daemon_pid(self, n):
        return self.pid_of(f"{self.dir}/hv{n}/pvcnoded/pid", "pvcnoded")

    def libvirtd_pid(self, n):
        return self.pid_of(f"{self.dir}/hv{n}/libvirt/libvirtd.pid", "libvirtd")

    def zk_pid(self, m):
        p = self.zk_pids.get(m)
        if p and os.path.exists(f"/proc/{p}") and "QuorumPeerMain" in open(f"/proc/{p}/cmdline").read():
            try:
                if open(f"/proc/{p}/stat").read().split()[2] != "Z":
                    return p
            except OSError:
                pass
        return None

    def silence(self, n, kind, hold):
        self.silenced[n] = kind
        self.silent_hold[n] = hold

    def unsilence(self, n):
        kind = self.silenced.pop(n, None)
        if kind:
            self.healed[n] = (kind, self.silent_hold.get(n, 0), now())

    def fence_expected(self, n):
        """The fault that may have got node n fenced: one that keeps it silent past
        the deadline by design, or a short one whose hold (plus the interval
        before it and the one after) reaches the deadline (short deadlines)."""
        kind, hold = self.silenced.get(n), self.silent_hold.get(n, 0)
        if kind is None and n in self.healed and now() - self.healed[n][2] < 2 * self.ki + 1:
            kind, hold = self.healed[n][:2]
        if kind and (kind in FENCE_OK or hold >= self.deadline - 2 * self.ki):
            return kind
        return None

    def gone(self, pid, timeout=10):
        """Waits until a killed process has exited (a zombie counts as exited)."""
        def dead():
            try:
                return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
            except OSError:
                return True
        return self.wait(dead, timeout, 0.05)

    def sig(self, pid, s):
        try:
            os.kill(pid, s)
            if s == signal.SIGSTOP:
                self.stopped.add(pid)
            elif s in (signal.SIGCONT, signal.SIGKILL):
                self.stopped.discard(pid)
            return True
        except ProcessLookupError:
            return False

    # ------------------------------------------------------------------ lab
    def zk_start(self, m):
        d = f"{self.dir}/zk{m}"
        os.makedirs(f"{d}/data", exist_ok=True)
        with open(f"{d}/data/myid", "w") as f:
            f.write(f"{m}\n")
        servers = "\n".join(f"server.{k}={self.zk_ip(k)}:2888:3888" for k in ZK_MEMBERS)
        with open(f"{d}/zoo.cfg", "w") as f:
            f.write(f"""tickTime=1000
initLimit=20
syncLimit=10
dataDir={d}/data
clientPortAddress={self.zk_ip(m)}
clientPort=2181
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
{servers}
""")
        jvm = ("-Xms32m -Xmx128m -XX:+UseSerialGC -XX:MaxMetaspaceSize=64m -Xss512k -XX:TieredStopAtLevel=1 "
               "-Djava.net.preferIPv4Stack=true -Dzookeeper.jmx.log4j.disable=true").split()
        cp = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
        log = open(f"{d}/zk.log", "a")
        p = subprocess.Popen(["setsid", "ip", "netns", "exec", f"{self.name}-sw", "java"] + jvm +
                             ["-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", f"{d}/zoo.cfg"],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.zk_pids[m] = p.pid

    def zk_ok(self, m):
        import socket
        try:
            s = socket.create_connection((self.zk_ip(m), 2181), timeout=1)
            s.sendall(b"ruok")
            ok = s.recv(16) == b"imok"
            s.close()
            if not ok:
                return False
            s = socket.create_connection((self.zk_ip(m), 2181), timeout=1)
            s.sendall(b"srvr")
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            s.close()
            return b"Mode: leader" in data or b"Mode: follower" in data
        except OSError:
            return False

    def wait(self, pred, timeout, step=0.2):
        end = now() + timeout
        while now() < end:
            if pred():
                return True
            time.sleep(step)
        return pred()

    def up(self):
        self.log(f"lab {self.name} ({self.net}.0/24): nodes hv1..hv5, coordinators hv1..hv3, "
                 f"ZooKeeper {self.zk_hosts}; keepalive {self.ki} s x {self.fi} (deadline {self.deadline} s), "
                 f"saving throws {self.throws}, failover bound {self.bound} s")
        self.down(quiet=True)
        os.makedirs(self.dir, exist_ok=True)
        # pvcnoded under libfaketime: the clock-skew fault writes an offset into the
        # node's file; the monotonic clock is left alone (what a stepped wall clock does).
        with open(os.path.join(self.dir, "pvcnoded"), "w") as f:
            f.write(f"""#!/bin/sh
d=$(dirname "$PVCD_CONFIG_FILE")
[ -f "$d/faketime" ] || echo +0 >"$d/faketime"
export LD_PRELOAD={self.args.faketime_lib} FAKETIME_TIMESTAMP_FILE="$d/faketime" FAKETIME_CACHE_DURATION=1 DONT_FAKE_MONOTONIC=1
exec {self.pvcnoded} "$@"
""")
        os.chmod(os.path.join(self.dir, "pvcnoded"), 0o755)
        self.script("netns.sh", "up", *NODES)
        for m in ZK_MEMBERS:
            self.sh(["ip", "-n", f"{self.name}-sw", "addr", "replace", f"{self.zk_ip(m)}/24", "dev", "br0"],
                    check=True)
            self.zk_start(m)
        if not self.wait(lambda: all(self.zk_ok(m) for m in ZK_MEMBERS), 120, 0.5):
            raise RuntimeError("the ZooKeeper ensemble did not form (zk*/zk.log)")
        self.log("ZooKeeper ensemble formed")
        # Each node reaches coordinator K's ZooKeeper member as hvK:2181, as on a
        # real cluster (node.sh appends its catch-all rule after these).
        for n in NODES:
            for k in COORDS:
                self.sh(["ip", "netns", "exec", self.ns(n), "iptables", "-t", "nat", "-I", "OUTPUT", "-p", "tcp",
                         "-d", f"{self.net}.{k}", "--dport", "2181", "-j", "DNAT", "--to-destination",
                         f"{self.zk_ip(k)}:2181"], check=True)
        for n in NODES:
            self.script("libvirtd.sh", "start", n)
        for n in NODES:
            self.script("bmc.sh", "start", n)
        rc, out = self.pvc("cluster", "init")
        if rc != 0:
            raise RuntimeError(f"pvc cluster init: {out}")
        for n in NODES:
            os.makedirs(f"{self.dir}/hv{n}/pvcnoded", exist_ok=True)
            with open(f"{self.dir}/hv{n}/pvcnoded/faketime", "w") as f:
                f.write("+0\n")
            self.script("node.sh", "start", n)
        for n in NODES:
            rc, out = self.pvc("node", "ready", f"hv{n}", "--wait", "--timeout", "120", timeout=150)
            if rc != 0:
                raise RuntimeError(f"pvc node ready hv{n}: {out}")
        self.log("hv1..hv5 run and ready")
        accel = self.sh([os.path.join(LAB, "libvirtd.sh"), "accel"])[1].strip()
        self.accel = accel
        for i in range(self.args.guests):
            self.define(f"soakg{i + 1}", f"hv{4 + i % 2}", guest=True)
        for i in range(self.args.defined):
            self.define(f"soakd{i + 1}", f"hv{NODES[i % len(NODES)]}", guest=False)
        self.log(f"VMs: {self.args.guests} guests (domain type {accel}) started, "
                 f"{self.args.defined} defined only")

    def domain_xml(self, name, uid):
        return f"""<domain type='{self.accel}'>
  <name>{name}</name>
  <uuid>{uid}</uuid>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot><on_crash>restart</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <serial type='file'><source path='/var/log/libvirt/{name}.log'/><target port='0'/></serial>
    <console type='file'><source path='/var/log/libvirt/{name}.log'/><target type='serial' port='0'/></console>
    <memballoon model='none'/>
  </devices>
</domain>
"""

    def define(self, name, node, guest):
        uid = str(uuidlib.UUID(int=random.Random(f"{self.seed}-{name}").getrandbits(128),
                               version=4))
        path = os.path.join(self.dir, f"{name}.xml")
        with open(path, "w") as f:
            f.write(self.domain_xml(name, uid))
        rc, out = self.pvc("vm", "define", path, "--node", node, "--no-resource-check",
                           "--migration-method", "live" if guest else "none", timeout=60)
        self.log(f"op define {name} on {node} ({'guest' if guest else 'defined only'}): rc {rc} {out[-200:]}")
        if rc != 0:
            return False
        with self.lock:
            self.vms[uid] = {"name": name, "guest": guest}  # dicts shared with the observer
        if guest:
            rc, out = self.pvc("vm", "start", name, "--wait", "--timeout", "90", timeout=120)
            self.log(f"op start {name}: rc {rc} {out[-200:]}")
        return True

    def down(self, quiet=False):
        for p in list(self.stopped):
            self.sig(p, signal.SIGCONT)
        for n in NODES:
            self.sh(["ip", "netns", "exec", self.ns(n), "nft", "delete", "table", "inet", "soakcut"])
            for s in ("bmc.sh", "node.sh", "libvirtd.sh"):
                self.script(s, "stop", n, check=False, timeout=60)
        for m in ZK_MEMBERS:
            p = self.zk_pid(m)
            if p:
                self.sig(p, signal.SIGKILL)
        # ZooKeeper members an earlier run left (their config is under our directory).
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    cmd = open(f"/proc/{pid}/cmdline").read()
                except OSError:
                    continue
                if "QuorumPeerMain" in cmd and f"/{self.name}/zk" in cmd:
                    self.sig(int(pid), signal.SIGKILL)
        self.script("netns.sh", "down", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
        if not quiet:
            self.log("lab down")

    # ------------------------------------------------------------------ observer
    def start_observer(self):
        import libvirt
        import logging
        from kazoo.client import KazooClient
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # its reconnects are our faults
        libvirt.registerErrorHandler(lambda ctx, err: None, None)
        self.libvirt = libvirt
        self.zk = KazooClient(hosts=self.zk_hosts, timeout=10,
                              connection_retry=dict(max_tries=-1, delay=0.2, max_delay=1))
        self.zk.start(timeout=30)
        self.lv = {n: (0.0, {}) for n in NODES}   # node -> (time of the answer, {uuid: state})
        for n in NODES:
            threading.Thread(target=self.lv_loop, args=(n,), daemon=True).start()
        self.obs = {"first_double": {}, "down_since": {}, "transient": {}, "node_bad": {}, "invalid": {},
                    "two_primaries": 0, "ka": {n: [] for n in NODES}, "dstate": {}, "vmstate": {},
                    "snapshot": None, "zk_ok_at": now(), "zk_down_since": None}
        threading.Thread(target=self.observe_loop, daemon=True).start()

    def lv_loop(self, n):
        conn = None
        uri = f"qemu+unix:///system?socket={self.dir}/hv{n}/libvirt/run/libvirt-sock"
        while not self.stop_observer.is_set():
            try:
                if conn is None:
                    conn = self.libvirt.open(uri)
                doms = {}
                for d in conn.listAllDomains(0):
                    try:
                        doms[d.UUIDString()] = d.state()[0]
                    except self.libvirt.libvirtError:
                        pass
                self.lv[n] = (now(), doms)
            except self.libvirt.libvirtError:
                try:
                    if conn is not None:
                        conn.close()
                except self.libvirt.libvirtError:
                    pass
                conn = None
            time.sleep(0.4)

    def qemu_procs(self):
        """{node: set(uuid)} of QEMU processes in each node's network namespace."""
        ino = {}
        for n in NODES:
            try:
                ino[os.stat(f"/run/netns/{self.ns(n)}").st_ino] = n
            except OSError:
                pass
        out = {n: set() for n in NODES}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if not open(f"/proc/{pid}/comm").read().startswith("qemu-system"):
                    continue
                n = ino.get(os.stat(f"/proc/{pid}/ns/net").st_ino)
                args = open(f"/proc/{pid}/cmdline").read().split("\0")
            except OSError:
                continue
            if n and "-uuid" in args:
                out[n].add(args[args.index("-uuid") + 1])
        return out

    def running_view(self):
        """{uuid: [nodes running it]}; a node whose libvirtd has not answered lately
        counts each of its QEMU processes as running."""
        q = self.qemu_procs()
        res = collections.defaultdict(list)
        fresh = {}
        for n in NODES:
            at, doms = self.lv[n]
            fresh[n] = now() - at < 2.0
            if fresh[n]:
                for u, st in doms.items():
                    if st == self.libvirt.VIR_DOMAIN_RUNNING and u in q[n]:
                        res[u].append(n)
            else:
                for u in q[n]:
                    res[u].append(n)
        return res, fresh

    def read_zk(self):
        zk = self.zk
        paths = ["/config/primary_node"]
        for n in NODES:
            for k in ("daemonstate", "routerstate", "domainstate", "keepalive"):
                paths.append(f"/nodes/hv{n}/{k}")
        try:
            uuids = zk.get_children("/domains")
        except Exception:
            return None
        for u in uuids:
            paths.append(f"/domains/{u}")
            for k in ("state", "node", "lastnode", "failedreason"):
                paths.append(f"/domains/{u}/{k}")
        reqs = [(p, zk.get_async(p)) for p in paths]
        res = {}
        for p, r in reqs:
            try:
                data, stat = r.get(timeout=5)
                res[p] = (data.decode(errors="replace"), stat)
            except Exception as e:  # noqa: BLE001 - absent keys and lost connections alike
                if type(e).__name__ == "NoNodeError":
                    res[p] = (None, None)
                else:
                    return None
        return {"keys": res, "uuids": uuids}

    def observe_loop(self):
        while not self.stop_observer.is_set():
            t_start = now()
            try:
                self.observe_once()
            except Exception as e:  # noqa: BLE001 - the observer must keep going
                self.log(f"observer error: {type(e).__name__}: {e}")
            time.sleep(max(0.05, 0.5 - (now() - t_start)))

    def observe_once(self):
        o = self.obs
        snap = self.read_zk()
        running, fresh = self.running_view()
        tnow = now()
        if snap is None:
            if o["zk_down_since"] is None:
                o["zk_down_since"] = tnow
            snap = o["snapshot"]
            zk_fresh = False
        else:
            if o["zk_down_since"] is not None:
                self.log(f"observer: ZooKeeper readable again after {tnow - o['zk_down_since']:.1f} s", quiet=True)
            o["zk_down_since"] = None
            o["snapshot"] = snap
            zk_fresh = True
        # -- no VM runs on two nodes (held 3 s: a live migration's hand-over is instant)
        for u, ns in running.items():
            if len(ns) >= 2:
                first = o["first_double"].setdefault(u, tnow)
                if tnow - first >= 3.0:
                    self.violation("double-run", (u, first),
                                   f"VM {self.vm_name(u)} ({u}) running on {', '.join(f'hv{n}' for n in ns)} "
                                   f"for {tnow - first:.1f} s")
            else:
                o["first_double"].pop(u, None)
        if snap is None:
            return
        keys = snap["keys"]

        def val(p):
            return keys.get(p, (None, None))[0]

        # -- keepalive writes seen (ZooKeeper's mtime and zxid of each)
        for n in NODES:
            v, st = keys.get(f"/nodes/hv{n}/keepalive", (None, None))
            if st is not None and zk_fresh:
                hist = o["ka"][n]
                if not hist or hist[-1][0] != st.mzxid:
                    if hist:
                        self.ka_gaps.append((hist[-1][2] - self.t0, tnow - self.t0, n, (st.mtime - hist[-1][1]) / 1000))
                    hist.append((st.mzxid, st.mtime, tnow))
                    del hist[:-100]
        # -- fences: `dead` written while the keepalive was current
        for n in NODES:
            v, st = keys.get(f"/nodes/hv{n}/daemonstate", (None, None))
            prev = o["dstate"].get(n)
            if zk_fresh:
                o["dstate"][n] = v
            if v == "dead" and prev != "dead" and zk_fresh and st is not None:
                before = [mt for (zx, mt, _) in o["ka"][n] if zx < st.mzxid]
                age = (st.mtime - max(before)) / 1000.0 if before else None
                expected = self.fence_expected(n)
                self.fences.append((self.t(), n, expected))
                self.log(f"observer: hv{n} marked dead, its last keepalive {age if age is None else round(age, 2)} s "
                         f"before (deadline {self.deadline} s; {'after ' + expected if expected else 'NO fault silenced it'})")
                if age is not None and age < self.deadline - 0.5:
                    self.violation("fence-current", (n, st.mzxid),
                                   f"hv{n} marked dead {age:.2f} s after its last keepalive (deadline {self.deadline} s)")
                elif not expected:
                    # Its daemon ran and reached ZooKeeper: only a node silenced for
                    # longer than the deadline may be found dead.
                    self.violation("fence-unexpected", (n, st.mzxid),
                                   f"hv{n} marked dead while no fault kept it silent for the deadline "
                                   f"(last keepalive {age if age is None else round(age, 2)} s before)")
        # -- at most one primary (held over two reads: they are not one snapshot)
        prim = [n for n in NODES if val(f"/nodes/hv{n}/routerstate") == "primary"]
        if len(prim) > 1 and zk_fresh:
            o["two_primaries"] += 1
            if o["two_primaries"] >= 3:
                self.violation("primary", tuple(prim), f"{', '.join(f'hv{n}' for n in prim)} all primary")
        elif zk_fresh:
            o["two_primaries"] = 0
        # -- valid keys
        bad = []
        names = {f"hv{n}" for n in NODES}
        for n in NODES:
            for k, allowed in (("daemonstate", DAEMON_STATES), ("routerstate", ROUTER_STATES),
                               ("domainstate", DOMAIN_STATES)):
                v = val(f"/nodes/hv{n}/{k}")
                if v not in allowed:
                    bad.append(f"hv{n}/{k}={v!r}")
            ka = val(f"/nodes/hv{n}/keepalive")
            if ka is None or not ka.strip().isdigit():
                bad.append(f"hv{n}/keepalive={ka!r}")
        pn = val("/config/primary_node")
        if pn not in {"none", ""} | {f"hv{c}" for c in COORDS}:
            bad.append(f"primary_node={pn!r}")
        for u in snap["uuids"]:
            nm, st_, nd, ln = (val(f"/domains/{u}"), val(f"/domains/{u}/state"), val(f"/domains/{u}/node"),
                               val(f"/domains/{u}/lastnode"))
            if nm is None and st_ is None:
                continue  # removed between the listing and the reads
            if not nm:
                bad.append(f"{u} name={nm!r}")
            if st_ not in VM_STATES:
                bad.append(f"{self.vm_name(u)} state={st_!r}")
            if nd not in names:
                bad.append(f"{self.vm_name(u)} node={nd!r}")
            if ln not in names | {"", None}:
                bad.append(f"{self.vm_name(u)} lastnode={ln!r}")
        for b in bad:
            first = o["invalid"].setdefault(b, tnow)
            if tnow - first >= 1.0:
                self.violation("keys", b, f"invalid key {b}")
        for b in list(o["invalid"]):
            if b not in bad:
                del o["invalid"][b]
        # -- nodes left in a transient state
        for n in NODES:
            for k, ok, limit in (("daemonstate", {"run"}, self.args.transient_limit),
                                 ("domainstate", {"ready", "flushed"}, self.args.transient_limit),
                                 ("routerstate", {"client", "secondary", "primary"}, 60)):
                v = val(f"/nodes/hv{n}/{k}")
                key = (n, k, v)
                if v in ok or (k == "daemonstate" and self.silenced.get(n) == "operator"):
                    o["node_bad"] = {x: y for x, y in o["node_bad"].items() if x[:2] != (n, k)}
                    continue
                first = o["node_bad"].setdefault(key, tnow)
                if tnow - first > limit:
                    self.violation("transient", key, f"hv{n} {k} {v} for {tnow - first:.0f} s")
        # -- VMs: lost, failed, transient, down beyond the failover bound
        with self.lock:
            tracked = dict(self.vms)  # the values are the shared dicts
        for u, info in tracked.items():
            st_ = val(f"/domains/{u}/state")
            if u in snap["uuids"]:
                info["seen"] = True
            elif not info.get("seen"):
                continue  # defined after this read began
            if u not in snap["uuids"]:
                if u not in self.expected_gone:
                    self.violation("lost", u, f"VM {info['name']} ({u}) is gone from /domains")
                continue
            prev = o["vmstate"].get(u)
            if st_ != prev:
                o["vmstate"][u] = st_
                self.log(f"observer: {info['name']} state {prev} -> {st_} (node {val(f'/domains/{u}/node')})",
                         quiet=True)
            if st_ == "fail":
                self.violation("lost", (u, "fail"), f"VM {info['name']} failed: {val(f'/domains/{u}/failedreason')}")
            if st_ in VM_TRANSIENT:
                first = o["transient"].setdefault((u, st_), tnow)
                if tnow - first > self.args.transient_limit:
                    self.violation("transient", (u, st_), f"VM {info['name']} in {st_} for {tnow - first:.0f} s")
            else:
                o["transient"] = {k: v for k, v in o["transient"].items() if k[0] != u}
            if info["guest"] and st_ in VM_RUNNING and running.get(u):
                info["seen_running"] = True
            if info["guest"] and st_ in VM_RUNNING and info.get("seen_running"):
                if running.get(u):
                    ds = o["down_since"].pop(u, None)
                    if ds:
                        d = tnow - ds[0]
                        self.downtime[ds[1]] = max(self.downtime[ds[1]], d)
                        self.log(f"observer: {info['name']} running again on "
                                 f"{','.join(f'hv{n}' for n in running[u])} after {d:.1f} s down ({ds[1]})")
                else:
                    ds = o["down_since"].setdefault(u, (tnow, self.cause))
                    if tnow - ds[0] > self.bound:
                        self.violation("failover", (u, ds[0]),
                                       f"VM {info['name']} in {st_} on {val(f'/domains/{u}/node')} "
                                       f"not running anywhere for {tnow - ds[0]:.0f} s (bound {self.bound} s)")
            else:
                o["down_since"].pop(u, None)

    def vm_name(self, u):
        return self.vms.get(u, {}).get("name", u[:8])

    # ------------------------------------------------------------------ settled
    def settled(self):
        """Every node run and ready, each started guest running on its node only,
        no VM in a transient state, every ZooKeeper member serving."""
        snap = self.obs["snapshot"]
        if snap is None or self.read_zk() is None:
            return False, "ZooKeeper unreadable"
        snap = self.read_zk()
        keys = snap["keys"]

        def val(p):
            return keys.get(p, (None, None))[0]
        for n in NODES:
            if val(f"/nodes/hv{n}/daemonstate") != "run":
                return False, f"hv{n} {val(f'/nodes/hv{n}/daemonstate')}"
            if val(f"/nodes/hv{n}/domainstate") != "ready":
                return False, f"hv{n} {val(f'/nodes/hv{n}/domainstate')}"
        for n in NODES:
            hist = self.obs["ka"][n]
            if not hist or now() - hist[-1][2] > 2 * self.ki + 1:
                return False, f"hv{n} keepalive not fresh"
        running, fresh = self.running_view()
        for n in NODES:
            if not fresh[n]:
                return False, f"hv{n} libvirtd not answering"
        for u in snap["uuids"]:
            st_ = val(f"/domains/{u}/state")
            if st_ in VM_TRANSIENT:
                return False, f"{self.vm_name(u)} {st_}"
            if st_ == "start":
                nd = val(f"/domains/{u}/node")
                if [f"hv{n}" for n in running.get(u, [])] != [nd]:
                    return False, f"{self.vm_name(u)} start on {nd}, running on {running.get(u, [])}"
        for m in ZK_MEMBERS:
            if not self.zk_ok(m):
                return False, f"ZooKeeper member {m} not serving"
        return True, ""

    def published_mismatch(self):
        """Nodes whose `runningdomains` is not what their libvirtd runs."""
        bad = []
        running, fresh = self.running_view()
        for n in NODES:
            try:
                pub = set(self.zk.get(f"/nodes/hv{n}/runningdomains")[0].decode().split())
            except Exception:  # noqa: BLE001
                return ["ZooKeeper unreadable"]
            real = {u for u, ns in running.items() if n in ns}
            if pub != real:
                bad.append(f"hv{n} publishes {sorted(self.vm_name(u) for u in pub)}, "
                           f"runs {sorted(self.vm_name(u) for u in real)}")
        return bad

    def check_published(self, kind):
        """Once settled, each node's next keepalives publish what it runs."""
        t0 = now()
        first = self.published_mismatch()
        if self.wait(lambda: not self.published_mismatch(), 3 * self.ki + 3, 0.5):
            if now() - t0 > 2:
                self.log(f"runningdomains caught up {now() - t0:.1f} s after settling from {kind}: {'; '.join(first)}")
            return
        bad = self.published_mismatch()
        if bad:
            self.violation("keys", ("runningdomains", round(self.t())),
                           f"runningdomains wrong {3 * self.ki + 3} s after settling from {kind}: {'; '.join(bad)}")

    def recover(self, kind, limit):
        """Operator's part of a recovery (ready a node the fence left flushed) and
        the wait until the cluster has settled."""
        t0 = now()
        why = ""
        readied = set()
        last_why = now()
        while now() - t0 < limit:
            ok, why = self.settled()
            if not ok and now() - last_why > 20:
                self.log(f"waiting for the cluster to settle after {kind}: {why}")
                last_why = now()
            if ok:
                d = now() - t0
                self.recoveries[kind].append(d)
                self.log(f"recovered from {kind} in {d:.1f} s")
                self.check_published(kind)
                return True
            snap = self.obs["snapshot"]
            if snap:
                keys = snap["keys"]
                for n in NODES:
                    if (keys.get(f"/nodes/hv{n}/daemonstate", (None,))[0] == "run" and
                            keys.get(f"/nodes/hv{n}/domainstate", (None,))[0] == "flushed" and n not in readied):
                        rc, out = self.pvc("node", "ready", f"hv{n}", "--wait", "--timeout", "90", timeout=120)
                        self.log(f"op ready hv{n} (back after a fence): rc {rc} {out[-200:]}")
                        self.ops["ready (after fence)"] += 1
                        readied.add(n)
            time.sleep(0.5)
        self.unrecovered[kind] += 1
        self.violation("recovery", (kind, round(self.t())), f"not settled {limit} s after {kind}: {why}")
        return False

    # ------------------------------------------------------------------ faults
    def plan(self):
        """The whole schedule, drawn from the seed before anything runs."""
        rng = random.Random(self.seed)
        kinds = [  # (kind, weight)
            ("kill9-pvcnoded", 14), ("sigstop-pvcnoded", 12), ("sigstop-pvcnoded-long", 1),
            ("kill9-libvirtd", 8), ("restart-libvirtd", 8), ("sigstop-libvirtd", 6), ("sigstop-libvirtd-long", 1),
            ("bmc-power-off", 2), ("zk-kill", 10), ("zk-sigstop", 6), ("zk-sigstop-long", 1), ("zk-quorum-loss", 2),
            ("net-cut", 8), ("net-cut-long", 1), ("clock-skew", 6 if self.args.faketime_lib else 0),
        ]
        if self.args.kinds:
            only = set(self.args.kinds.split(","))
            unknown = only - {k for k, _ in kinds}
            if unknown:
                sys.exit(f"soak: unknown fault kind(s) {', '.join(sorted(unknown))}")
            kinds = [(k, w) for k, w in kinds if k in only]
        ops = [("migrate", 3), ("flush-ready", 2), ("define", 2), ("remove", 2), ("replace-guest", 1)]
        plan = []
        for i in range(self.args.faults):
            kind = rng.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
            f = {"i": i, "kind": kind, "node": rng.choice(NODES), "member": rng.choice(ZK_MEMBERS),
                 "hold": round(rng.uniform(0.5, 4.5), 2), "gap": round(rng.uniform(0.2, 1.0), 2),
                 "skew": rng.choice([-1, 1]) * rng.randint(30, 900),
                 "op": rng.choices([o for o, _ in ops], [w for _, w in ops])[0] if rng.random() < 0.35 else None,
                 "op_node": rng.choice(NODES), "op_guest": rng.randrange(self.args.guests), "op_pick": rng.random(),
                 # the operator's action runs while the fault is injected (after op_delay s)
                 "op_during": rng.random() < 0.4, "op_delay": round(rng.uniform(0, 3), 2)}
            # A second, light fault on another node while a heavy one is recovered
            # from: a fencing coordinator's daemon killed or stopped mid-job, the
            # recovery target's libvirtd restarted.
            bg_kinds = ["kill9-pvcnoded", "sigstop-pvcnoded", "kill9-libvirtd", "restart-libvirtd", "net-cut"]
            bg_kinds += ["clock-skew"] if self.args.faketime_lib else []
            bg_kinds += [] if kind in ("zk-quorum-loss", "zk-sigstop-long") else ["zk-kill", "zk-sigstop"]
            bg = {"kind": rng.choice(bg_kinds),
                  "node": rng.choice([x for x in NODES if x != f["node"]]),
                  "delay": round(rng.uniform(self.deadline - 2, self.deadline + self.throws * self.ki + 4), 2),
                  "hold": round(rng.uniform(1, 4), 2), "i": f"{i}b", "member": rng.choice(ZK_MEMBERS),
                  "skew": rng.choice([-1, 1]) * rng.randint(30, 900)}
            if kind in HEAVY:
                # The operator acts while the dead node's VMs are being recovered.
                f["op_delay"] = round(rng.uniform(self.deadline - 2, self.deadline + self.throws * self.ki + 6), 2)
            f["bg"] = bg if kind in HEAVY and rng.random() < 0.6 else None
            if kind in ("sigstop-pvcnoded-long",):
                f["hold"] = round(self.deadline + self.throws * self.ki + rng.uniform(6, 12), 2)
            elif kind == "sigstop-libvirtd-long":
                # Longer than the deadline: the keepalive must go on without libvirt.
                f["hold"] = round(self.deadline + self.throws * self.ki + rng.uniform(4, 8), 2)
            elif kind == "zk-sigstop-long":
                # A member hung past the deadline: its clients must move to another
                # member (2/3 of the 10 s session timeout) and keep their keepalives.
                f["hold"] = round(self.deadline + rng.uniform(4, 8), 2)
            elif kind == "net-cut-long":
                f["hold"] = round(self.deadline + self.throws * self.ki + rng.uniform(8, 16), 2)
            elif kind == "zk-quorum-loss":
                f["hold"] = round(rng.uniform(8, 20), 2)
            elif kind in ("clock-skew",):
                f["hold"] = round(rng.uniform(4, 12), 2)
            elif kind in ("sigstop-pvcnoded",):
                # Short of what the fencers allow: the deadline less one interval
                # (the last write may have come an interval before the stop) and a margin.
                f["hold"] = round(rng.uniform(1, max(1.5, self.deadline - 2 * self.ki - 2)), 2)
            plan.append(f)
        return plan

    def restart(self, script, n):
        rc, out = self.script(script, "start", n, check=False)
        self.log(f"{script} start {n}: rc {rc} {out.strip().splitlines()[-1] if out.strip() else ''}"[:300])

    def proc_state(self, pid):
        """What a process is doing, from /proc: its state and wait channel, and
        those of each thread (for a process that outlives a signal)."""
        parts = []
        try:
            for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
                try:
                    st = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()[0]
                    wchan = open(f"/proc/{pid}/task/{tid}/wchan").read().strip() or "-"
                except OSError:
                    continue
                parts.append(f"{tid}:{st}/{wchan}")
        except OSError as e:
            return f"gone ({e.strerror})"
        return " ".join(parts[:12]) + (f" (+{len(parts) - 12} threads)" if len(parts) > 12 else "")

    def restart_libvirtd(self, n, killed):
        """Starts node n's libvirtd again after `killed` was signalled, and makes sure a
        new daemon runs: a start that finds the killed pid still alive (the lab's
        check raced its exit) is retried, and a daemon that outlives SIGKILL is
        reported with what its threads wait on, as a fault of the lab's host."""
        end, told = now() + 60, False
        while True:
            self.restart("libvirtd.sh", n)
            p = self.libvirtd_pid(n)
            if p is not None and p != killed:
                return True
            if p is None and not self.lab_alive(killed):
                return True  # the script failed; the supervisor and settle checks say so
            if not told:
                self.log(f"lab: hv{n} libvirtd pid {killed} still there after its kill: "
                         f"{self.proc_state(killed)}; killed again, start retried")
                told = True
            if now() >= end:
                self.lab_faults.append((self.t(), f"hv{n} libvirtd pid {killed} outlived SIGKILL for 60 s: "
                                                  f"{self.proc_state(killed)}"))
                self.log(f"LAB FAULT {self.lab_faults[-1][1]}")
                return False
            self.sig(killed, signal.SIGKILL)
            self.gone(killed, 5)

    def lab_alive(self, pid):
        """Like the lab's scripts: the process exists and is not a zombie."""
        try:
            st = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return st not in ("Z", "X")

    def supervise(self):
        """What systemd does for pvcnoded.service (Restart=on-failure, RestartSec=2):
        a daemon that exited on a node that is powered on (its libvirtd runs) is
        started again; absent 5 s here, so a boot in progress starts it first."""
        absent = {}
        while not self.stop_observer.is_set():
            for n in NODES:
                if n in self.own_restart or self.libvirtd_pid(n) is None or self.daemon_pid(n) is not None:
                    absent.pop(n, None)
                    continue
                first = absent.setdefault(n, now())
                if now() - first >= 5:
                    absent.pop(n, None)
                    try:
                        tail = open(f"{self.dir}/hv{n}/pvcnoded/out.log").read().strip().splitlines()[-1:]
                    except OSError:
                        tail = []
                    self.log(f"systemd: pvcnoded hv{n} exited ({tail[0][:160] if tail else 'no output'}); "
                             f"starting it again")
                    self.ops["systemd restart"] += 1
                    self.restart("node.sh", n)
            time.sleep(1)

    def follow_logs(self, out_dir):
        """Every daemon's output into <out>/soak-<seed>-hvN.log (a restart truncates
        the lab's own copy)."""
        self.followers = []
        for n in NODES:
            f = open(os.path.join(out_dir, f"soak-{self.seed}-hv{n}.log"), "w")
            self.followers.append(subprocess.Popen(
                ["tail", "-n", "+1", "-F", f"{self.dir}/hv{n}/pvcnoded/out.log"],
                stdout=f, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL))

    def inject(self, f, bg=False):
        t0 = self.t()
        try:
            self.inject_fault(f, bg)
        finally:
            self.windows.append((t0, self.t(), None if f["kind"].startswith("zk-") else f["node"]))

    def inject_fault(self, f, bg):
        kind, n, m, hold = f["kind"], f["node"], f["member"], f["hold"]
        self.faults[kind] += 1
        if bg:
            self.bg_faults[kind] += 1
        if not bg:
            self.cause = kind
        node = f"hv{n}"
        if kind == "kill9-pvcnoded":
            p = self.daemon_pid(n)
            self.log(f"fault #{f['i']} {kind} {node} (pid {p}), restarted after {hold} s")
            self.own_restart.add(n)
            if p:
                self.silence(n, kind, hold)
                self.sig(p, signal.SIGKILL)
                self.gone(p)
            time.sleep(hold)
            self.restart("node.sh", n)
            self.own_restart.discard(n)
            self.unsilence(n)
        elif kind in ("sigstop-pvcnoded", "sigstop-pvcnoded-long"):
            p = self.daemon_pid(n)
            self.log(f"fault #{f['i']} {kind} {node} (pid {p}) for {hold} s")
            if p:
                self.silence(n, kind, hold)
                self.sig(p, signal.SIGSTOP)
                time.sleep(hold)
                self.sig(p, signal.SIGCONT)
                self.unsilence(n)
        elif kind == "kill9-libvirtd":
            p = self.libvirtd_pid(n)
            self.log(f"fault #{f['i']} {kind} {node} (pid {p}), restarted after {hold / 3:.2f} s")
            if p:
                self.sig(p, signal.SIGKILL)
                if not self.gone(p):
                    self.log(f"lab: hv{n} libvirtd pid {p} not gone 10 s after SIGKILL: {self.proc_state(p)}")
            time.sleep(hold / 3)
            self.restart_libvirtd(n, p)
        elif kind == "restart-libvirtd":
            p = self.libvirtd_pid(n)
            self.log(f"fault #{f['i']} {kind} {node} (pid {p}): SIGTERM, then started again")
            if p:
                self.sig(p, signal.SIGTERM)
                if not self.gone(p, 20):
                    self.log(f"lab: hv{n} libvirtd pid {p} not gone 20 s after SIGTERM: {self.proc_state(p)}; "
                             f"SIGKILL")
                    self.sig(p, signal.SIGKILL)
                    self.gone(p)
            self.restart_libvirtd(n, p)
        elif kind in ("sigstop-libvirtd", "sigstop-libvirtd-long"):
            p = self.libvirtd_pid(n)
            self.log(f"fault #{f['i']} {kind} {node} (pid {p}) for {hold} s")
            if p:
                self.sig(p, signal.SIGSTOP)
                time.sleep(hold)
                self.sig(p, signal.SIGCONT)
        elif kind == "bmc-power-off":
            self.log(f"fault #{f['i']} {kind} {node}: ipmitool chassis power off")
            self.silence(n, kind, hold)
            rc, out = self.sh(["ipmitool", "-I", "lanplus", "-C", "3", "-H", f"{self.net}.{100 + n}", "-U", "admin",
                               "-P", "pass", "chassis", "power", "off"], timeout=30)
            # The fence powers it on again; the operator does if nobody fenced it.
            ok = self.wait(lambda: self.obs["dstate"].get(n) == "fenced", self.deadline + self.throws * self.ki + 40)
            self.wait(lambda: self.libvirtd_pid(n) is not None, 30)
            if not ok or self.libvirtd_pid(n) is None:
                self.log(f"{node} not fenced or not powered on by the fence: operator powers it on")
                self.sh(["ipmitool", "-I", "lanplus", "-C", "3", "-H", f"{self.net}.{100 + n}", "-U", "admin",
                         "-P", "pass", "chassis", "power", "on"], timeout=30)
            self.unsilence(n)
        elif kind == "zk-kill":
            p = self.zk_pid(m)
            self.log(f"fault #{f['i']} {kind} member {m} (pid {p}), restarted after {hold} s")
            if p:
                self.sig(p, signal.SIGKILL)
            time.sleep(hold)
            self.zk_start(m)
        elif kind in ("zk-sigstop", "zk-sigstop-long"):
            p = self.zk_pid(m)
            self.log(f"fault #{f['i']} {kind} member {m} (pid {p}) for {hold} s")
            if p:
                self.sig(p, signal.SIGSTOP)
                time.sleep(hold)
                self.sig(p, signal.SIGCONT)
        elif kind == "zk-quorum-loss":
            ms = [x for x in ZK_MEMBERS if x != m]
            self.log(f"fault #{f['i']} {kind}: members {ms} killed for {hold} s (quorum lost)")
            for x in ms:
                p = self.zk_pid(x)
                if p:
                    self.sig(p, signal.SIGKILL)
            time.sleep(hold)
            for x in ms:
                self.zk_start(x)
        elif kind in ("net-cut", "net-cut-long"):
            self.log(f"fault #{f['i']} {kind} {node} cut off the network for {hold} s (nftables drop)")
            rules = ('table inet soakcut {\n chain in { type filter hook input priority -10; policy accept; '
                     'iifname "eth0" drop; }\n chain out { type filter hook output priority -10; policy accept; '
                     'oifname "eth0" drop; }\n}\n')
            self.silence(n, kind, hold)
            subprocess.run(["ip", "netns", "exec", self.ns(n), "nft", "-f", "-"], input=rules, text=True,
                           check=False)
            time.sleep(hold)
            self.sh(["ip", "netns", "exec", self.ns(n), "nft", "delete", "table", "inet", "soakcut"])
            self.unsilence(n)
        elif kind == "clock-skew":
            s = f["skew"]
            self.log(f"fault #{f['i']} {kind} {node}: wall clock {s:+d} s for {hold} s")
            path = f"{self.dir}/hv{n}/pvcnoded/faketime"
            with open(path, "w") as fh:
                fh.write(f"{s:+d}\n")
            time.sleep(hold)
            with open(path, "w") as fh:
                fh.write("+0\n")
        else:
            raise ValueError(kind)

    def operate(self, f, during=False):
        op = f["op"]
        node = f"hv{f['op_node']}"
        if not during:
            self.cause = f"operator {op}"
        self.ops[op] += 1
        with self.lock:
            guests = sorted((v["name"], u) for u, v in self.vms.items() if v["guest"] and u not in self.expected_gone)
            defined = sorted((v["name"], u) for u, v in self.vms.items()
                             if not v["guest"] and u not in self.expected_gone)
        if op == "migrate" and guests:
            name = guests[f["op_guest"] % len(guests)][0]
            if f["op_pick"] < 0.3:
                rc, out = self.pvc("vm", "unmigrate", name, "--wait", "--timeout", "90", timeout=120)
                self.log(f"op unmigrate {name}: rc {rc} {out[-200:]}")
            else:
                # The drawn node, or the next one when the VM is there already.
                u = guests[f["op_guest"] % len(guests)][1]
                snap = self.obs["snapshot"]
                here = snap["keys"].get(f"/domains/{u}/node", (None,))[0] if snap else None
                if node == here:
                    node = f"hv{NODES[(f['op_node']) % len(NODES)]}"
                rc, out = self.pvc("vm", "migrate", name, "--node", node, "--live", "--force", "--wait",
                                   "--timeout", "90", timeout=120)
                self.log(f"op migrate {name} --node {node} --live --force: rc {rc} {out[-200:]}")
        elif op == "flush-ready":
            rc, out = self.pvc("node", "flush", node, "--wait", "--timeout", "120", timeout=150)
            self.log(f"op flush {node}: rc {rc} {out[-200:]}")
            rc, out = self.pvc("node", "ready", node, "--wait", "--timeout", "120", timeout=150)
            self.log(f"op ready {node}: rc {rc} {out[-200:]}")
        elif op == "define":
            self.define(f"soakd{100 + f['i']}", node, guest=False)
        elif op == "remove" and defined:
            name, u = defined[int(f["op_pick"] * len(defined))]
            self.expected_gone.add(u)
            rc, out = self.pvc("vm", "remove", name, "--yes", timeout=120)
            self.log(f"op remove {name}: rc {rc} {out[-200:]}")
            if rc != 0:
                self.expected_gone.discard(u)
        elif op == "replace-guest" and guests:
            name, u = guests[f["op_guest"] % len(guests)]
            self.expected_gone.add(u)
            rc, out = self.pvc("vm", "remove", name, "--yes", timeout=120)
            self.log(f"op remove guest {name}: rc {rc} {out[-200:]}")
            if rc != 0:
                self.expected_gone.discard(u)
            else:
                self.define(f"soakg{100 + f['i']}", node, guest=True)

    # ------------------------------------------------------------------ main
    def run(self):
        out_dir = os.path.abspath(self.args.out)
        os.makedirs(out_dir, exist_ok=True)
        self.logf = open(os.path.join(out_dir, f"soak-{self.seed}.log"), "w")
        self.log(f"chaos soak: seed {self.seed}, {self.args.minutes} min or {self.args.faults} faults")
        plan = self.plan()
        for f in plan:
            self.log(f"plan #{f['i']}: {f['kind']} hv{f['node']} zk{f['member']} hold {f['hold']} s"
                     f"{' skew %+d s' % f['skew'] if f['kind'] == 'clock-skew' else ''}"
                     f"{(' during ' if f['op_during'] else ' then ') + f['op'] + ' hv' + str(f['op_node']) if f['op'] else ''}"
                     f"{' with ' + f['bg']['kind'] + ' hv' + str(f['bg']['node']) if f['bg'] else ''}", quiet=True)
        try:
            self.up()
            self.follow_logs(out_dir)
            self.start_observer()
            threading.Thread(target=self.supervise, daemon=True).start()
            time.sleep(self.deadline)  # the fencers trust only after a full deadline
            self.recover("start", 120)
            t_end = now() + self.args.minutes * 60
            self.t_faults = now()
            for f in plan:
                if now() >= t_end:
                    break
                threads = []
                if f["op"] and f["op_during"]:
                    threads.append(threading.Thread(target=self.operate, args=(f, True), daemon=True))
                    threads[-1].start()
                    time.sleep(f["op_delay"])
                if f["bg"]:
                    def background(b=f["bg"]):
                        time.sleep(b["delay"])
                        self.inject(b, bg=True)
                    threads.append(threading.Thread(target=background, daemon=True))
                    threads[-1].start()
                self.inject(f)
                for th in threads:
                    th.join(300)
                self.recover(f["kind"], 240 if f["kind"] in HEAVY else 120)
                self.cause = "none"
                if f["op"] and not f["op_during"]:
                    self.operate(f)
                    self.recover("operator " + f["op"], 180)
                    self.cause = "none"
                time.sleep(f["gap"])
            self.t_faults = now() - self.t_faults
        except KeyboardInterrupt:
            self.log("interrupted")
            self.t_faults = now() - getattr(self, "t_faults", now())
        finally:
            self.stop_observer.set()
            for p in getattr(self, "followers", []):
                p.terminate()
            self.report()
            if not self.args.keep:
                self.down()
        return 1 if self.violations else 0

    def report(self):
        p = print
        p("")
        p(f"=== chaos soak, seed {self.seed}: {sum(self.faults.values())} faults in "
          f"{self.t_faults / 60:.1f} min (keepalive {self.ki} s x {self.fi}, saving throws {self.throws}, "
          f"failover bound {self.bound} s)")
        p("(count: all, of which 'second' came during a heavy fault's recovery; recovered: the cluster settled, "
          "mean/max seconds from the fault's end; downtime: the longest a started guest ran nowhere, by what "
          "was going on when it stopped)")
        p(f"{'fault kind':<24}{'count':>6}{'second':>7}{'recovered':>10}{'mean s':>8}{'max s':>8}"
          f"{'longest VM downtime s':>23}")
        for k in sorted(k for k in set(self.faults) | set(self.downtime) if not k.startswith("operator")):
            r = self.recoveries.get(k, [])
            p(f"{k:<24}{self.faults.get(k, 0):>6}{self.bg_faults.get(k, 0):>7}{len(r):>10}"
              f"{(sum(r) / len(r) if r else 0):>8.1f}{(max(r) if r else 0):>8.1f}{self.downtime.get(k, 0):>23.1f}")
        p("operator actions: " + ", ".join(f"{k} {v}" for k, v in sorted(self.ops.items())))
        opr = {k: v for k, v in self.recoveries.items() if k.startswith("operator")}
        for k, r in sorted(opr.items()):
            p(f"  {k}: settled {len(r)}x, mean {sum(r) / len(r):.1f} s, max {max(r):.1f} s, "
              f"longest VM downtime {self.downtime.get(k, 0):.1f} s")
        p(f"fences: {len(self.fences)} ("
          + ", ".join(f"hv{n} at {t:.0f} s after {e or 'NO FAULT'}" for t, n, e in self.fences) + ")")
        quiet = []
        for (a, b, n, gap) in self.ka_gaps:
            # untouched: no fault on this node or on ZooKeeper overlapped it (+ 2 s)
            if not any(w0 - 2 <= b and a <= w1 + 2 and (wn is None or wn == n) for (w0, w1, wn) in self.windows):
                quiet.append(gap)
        if quiet:
            quiet.sort()
            p(f"keepalive intervals on nodes no fault touched: {len(quiet)}, median {quiet[len(quiet) // 2]:.2f} s, "
              f"99th percentile {quiet[int(len(quiet) * 0.99)]:.2f} s, longest {quiet[-1]:.2f} s "
              f"(keepalive {self.ki} s, deadline {self.deadline} s)")
        if self.lab_faults:
            p(f"lab faults (the host, not the cluster): {len(self.lab_faults)}")
            for t, text in self.lab_faults:
                p(f"  [{t:8.2f}] {text}")
        p(f"violations: {len(self.violations)}")
        for t, kind, text in self.violations:
            p(f"  [{t:8.2f}] {kind}: {text}   (seed {self.seed})")
        p(f"replay: {' '.join(self.replay_cmd())}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: random, printed)")
    ap.add_argument("--minutes", type=float, default=5, help="stop injecting after this long (default 5)")
    ap.add_argument("--faults", type=int, default=1000, help="at most this many faults (default 1000)")
    ap.add_argument("--build", default=os.environ.get("PVC_BUILD_DIR", os.path.join(ROOT, "build")),
                    help="the built tree (bin/pvcnoded, bin/pvc, modules/; default build, or PVC_BUILD_DIR)")
    ap.add_argument("--out", default=".", help="where soak-<seed>.log goes (default: here)")
    ap.add_argument("--keepalive", type=int, default=2, help="keepalive interval, s (default 2)")
    ap.add_argument("--fence-intervals", type=int, default=6, help="fence_intervals (default 6)")
    ap.add_argument("--saving-throws", type=int, default=2, help="saving_throws (default 2)")
    ap.add_argument("--failover-bound", type=float, default=90, help="a started VM runs again within, s (90)")
    ap.add_argument("--transient-limit", type=float, default=150, help="longest transient state, s (150)")
    ap.add_argument("--guests", type=int, default=2, help="real guests (default 2)")
    ap.add_argument("--defined", type=int, default=4, help="VMs only defined (default 4)")
    ap.add_argument("--lab-name", default="pvcsoak")
    ap.add_argument("--lab-net", default="10.123.9")
    ap.add_argument("--faketime-lib", default="/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
                    help="libfaketime for the clock-skew fault ('' leaves the fault out)")
    ap.add_argument("--keep", action="store_true", help="leave the lab up at the end")
    ap.add_argument("--kinds", default="", help="only these fault kinds, comma-separated (another schedule)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("soak: must run as root (network namespaces)")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1 << 31)
    if args.faketime_lib and not os.path.exists(args.faketime_lib):
        sys.exit(f"soak: {args.faketime_lib} missing (Debian package libfaketime), or --faketime-lib ''")
    s = Soak(args)
    # One soak per lab name: a second would take the first one's lab down and up.
    import fcntl
    lock = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"{args.lab_name}.soak.lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        sys.exit(f"soak: another soak runs the lab {args.lab_name} (--lab-name, --lab-net for a second one)")
    for b in (s.pvcnoded, s.pvc_bin):
        if not os.access(b, os.X_OK):
            sys.exit(f"soak: {b} not built (--build)")

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    sys.exit(s.run())


if __name__ == "__main__":
    main()
