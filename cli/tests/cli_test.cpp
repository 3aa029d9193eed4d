// The `pvc` binary against a real ZooKeeper. Every write is read back with
// kazoo (/usr/bin/python3), an independent client, and compared with the
// reference's key layout (docs/wire-contract.md §3); daemons are played by test threads
// writing the keys a node daemon would.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <thread>

#include <nlohmann/json.hpp>

#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

using namespace std::chrono_literals;
using nlohmann::json;
using pvc::test::ProcResult;

namespace {

// One kazoo tool for every read-back: dump | set P V | reset | hold_lock P SECONDS
const char* kKazoo = R"PY(
import sys, json, time
from kazoo.client import KazooClient
hosts, op, args = sys.argv[1], sys.argv[2], sys.argv[3:]
zk = KazooClient(hosts=hosts); zk.start(timeout=10)
def walk(p, out):
    for c in zk.get_children(p):
        cp = (p.rstrip('/') + '/' + c)
        if cp == '/zookeeper': continue
        data, st = zk.get(cp)
        out[cp] = {'data': data.decode(), 'czxid': st.czxid, 'mzxid': st.mzxid, 'eph': st.ephemeralOwner != 0}
        walk(cp, out)
if op == 'dump':
    out = {}; walk('/', out); print(json.dumps(out))
elif op == 'set':
    for i in range(0, len(args), 2):
        p, v = args[i], args[i+1]
        if zk.exists(p): zk.set(p, v.encode())
        else: zk.create(p, v.encode(), makepath=True)
elif op == 'reset':
    for top in ['domains', 'nodes', 'logs', 'config', 'schema', 'networks', 'ceph']:
        if zk.exists('/' + top): zk.delete('/' + top, recursive=True)
    base = {'/schema': '', '/schema/version': '10', '/config': '', '/config/maintenance': '',
            '/config/primary_node': 'hv1', '/config/upstream_ip': '10.0.0.10/24',
            '/config/migration_target_selector': 'mem', '/logs': '', '/nodes': '', '/domains': '',
            '/networks': '', '/ceph': '', '/ceph/health': '{"status": "HEALTH_OK", "checks": {}}'}
    for p, v in base.items(): zk.create(p, v.encode())
    for i, n in enumerate(['hv1', 'hv2', 'hv3']):
        keys = {'': 'coordinator', 'daemonmode': 'coordinator' if n != 'hv3' else 'hypervisor',
                'daemonstate': 'run', 'routerstate': 'primary' if n == 'hv1' else ('secondary' if n == 'hv2' else 'client'),
                'domainstate': 'ready', 'staticdata': '16 6.1.0 GNU/Linux x86_64', 'pvcversion': '0.9.82',
                'keepalive': str(int(time.time())), 'memtotal': '32000', 'memused': '1000',
                'memfree': str(20000 + 1000 * i), 'memalloc': '0', 'memprov': '0', 'vcpualloc': '0',
                'cpuload': '0.5', 'runningdomains': '', 'domainscount': '0', 'networkscount': '0',
                'monitoring_health': '100', 'monitoring_plugins': ''}
        for k, v in keys.items():
            zk.create('/nodes/' + n + ('/' + k if k else ''), v.encode())
        zk.create('/logs/' + n, b'')
        zk.create('/logs/' + n + '/messages', '\n'.join('2024/01/01 00:00:0%d.000000 line %d on %s' % (j, j, n) for j in range(5)).encode())
elif op == 'hold_lock':
    lock = zk.Lock(args[0], 'kazoo-test')
    lock.acquire()
    print('held', flush=True)
    time.sleep(float(args[1]))
    before = zk.get(args[2])[0].decode()
    lock.release()
    print(before)
zk.stop()
)PY";

const std::string kUuid = "5f3ac2c0-7e6b-4a3b-9c2d-1e0f2a3b4c5d";

std::string domain_xml(const std::string& name, const std::string& uuid, int mem_mib = 1024, int vcpus = 2,
                       bool with_name = true) {
    std::string x = "<domain type='kvm'>\n";
    if (with_name) x += "  <name>" + name + "</name>\n";
    if (!uuid.empty()) x += "  <uuid>" + uuid + "</uuid>\n";
    x += "  <description>test VM</description>\n"
         "  <memory unit='MiB'>" + std::to_string(mem_mib) + "</memory>\n"
         "  <vcpu>" + std::to_string(vcpus) + "</vcpu>\n"
         "  <os><type arch='x86_64'>hvm</type></os>\n"
         "  <devices>\n"
         "    <disk type='network' device='disk'><source protocol='rbd' name='vms/" + name + "_disk0'/><target dev='sda' bus='scsi'/></disk>\n"
         "    <disk type='network' device='disk'><source protocol='rbd' name='vms/" + name + "_disk1'/><target dev='sdb' bus='scsi'/></disk>\n"
         "    <interface type='bridge'><mac address='52:54:00:12:34:56'/><source bridge='vmbr100'/><model type='virtio'/></interface>\n"
         "    <serial type='pty'><log file='/var/log/libvirt/" + name + ".log' append='on'/></serial>\n"
         "  </devices>\n"
         "</domain>\n";
    return x;
}

class PvcCli : public ::testing::Test {
protected:
    static void SetUpTestSuite() { server_ = new pvc::test::ZkServer(); }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }

    void SetUp() override {
        dir_ = std::make_unique<pvc::test::TempDir>("pvc-cli");
        kazoo({"reset"});
    }

    ProcResult kazoo(const std::vector<std::string>& args) {
        std::vector<std::string> all = {server_->hosts()};
        all.insert(all.end(), args.begin(), args.end());
        auto r = pvc::test::run_python(kKazoo, all);
        EXPECT_EQ(r.status, 0) << r.err;
        return r;
    }

    json dump() { return json::parse(kazoo({"dump"}).out); }
    std::string value(const json& tree, const std::string& p) {
        EXPECT_TRUE(tree.contains(p)) << p << " missing";
        return tree.contains(p) ? tree[p]["data"].get<std::string>() : "<absent>";
    }
    void set(const std::string& p, const std::string& v) { kazoo({"set", p, v}); }

    ProcResult pvc(std::vector<std::string> args, std::chrono::seconds timeout = 60s) {
        std::vector<std::string> argv = {PVC_CLI_BINARY, "--zookeeper", server_->hosts()};
        argv.insert(argv.end(), args.begin(), args.end());
        return pvc::test::run_command(argv, timeout);
    }

    std::string write_file(const std::string& name, const std::string& text) {
        auto p = dir_->path() / name;
        std::ofstream(p) << text;
        return p.string();
    }

    // Defines `name` on `node` and sets its state.
    void define(const std::string& name, const std::string& uuid, const std::string& node = "hv1") {
        auto r = pvc({"vm", "define", write_file(name + ".xml", domain_xml(name, uuid)), "--node", node});
        ASSERT_EQ(r.status, 0) << r.err;
    }

    // Keys minus lock contenders (which are ephemeral and come and go).
    static json persistent(const json& tree) {
        json out = json::object();
        for (auto& [k, v] : tree.items())
            if (!v["eph"].get<bool>()) out[k] = v;
        return out;
    }

    // Runs `args`, expects `status`, and that nothing changed in the tree.
    void expect_refused(const std::vector<std::string>& args, int status, const std::string& message_part) {
        json before = persistent(dump());
        auto r = pvc(args);
        EXPECT_EQ(r.status, status) << "stdout: " << r.out << " stderr: " << r.err;
        EXPECT_NE(r.err.find(message_part), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), status == 2 ? std::count(r.err.begin(), r.err.end(), '\n') : 1)
            << "one-line error expected: " << r.err;
        json after = persistent(dump());
        EXPECT_EQ(before, after) << "refused command changed the tree";
    }

    static pvc::test::ZkServer* server_;
    std::unique_ptr<pvc::test::TempDir> dir_;
};
pvc::test::ZkServer* PvcCli::server_ = nullptr;

std::string P(const std::string& uuid, const std::string& key = "") {
    return "/domains/" + uuid + (key.empty() ? "" : "/" + key);
}

// ---------------------------------------------------------------- define

TEST_F(PvcCli, DefineWritesEveryReferenceKeyInOneTransaction) {
    auto xml = domain_xml("web1", kUuid);
    auto r = pvc({"vm", "define", write_file("web1.xml", xml), "--node", "hv2", "--node-limit", "hv1,hv2",
                  "--node-selector", "memprov", "--autostart", "--migration-method", "live", "--tag", "prod",
                  "--protected-tag", "keep"});
    ASSERT_EQ(r.status, 0) << r.err;
    json t = dump();
    EXPECT_EQ(value(t, P(kUuid)), "web1");
    EXPECT_EQ(value(t, P(kUuid, "xml")), xml);
    EXPECT_EQ(value(t, P(kUuid, "state")), "stop");
    EXPECT_EQ(value(t, P(kUuid, "profile")), "None");
    EXPECT_EQ(value(t, P(kUuid, "stats")), "");
    EXPECT_EQ(value(t, P(kUuid, "node")), "hv2");
    EXPECT_EQ(value(t, P(kUuid, "lastnode")), "");
    EXPECT_EQ(value(t, P(kUuid, "failedreason")), "");
    EXPECT_EQ(value(t, P(kUuid, "rbdlist")), "vms/web1_disk0,vms/web1_disk1");
    EXPECT_EQ(value(t, P(kUuid, "consolelog")), "");
    EXPECT_EQ(value(t, P(kUuid, "vnc")), "");
    EXPECT_EQ(value(t, P(kUuid, "node_autostart")), "True");
    EXPECT_EQ(value(t, P(kUuid, "migration_method")), "live");
    EXPECT_EQ(value(t, P(kUuid, "node_limit")), "hv1,hv2");
    EXPECT_EQ(value(t, P(kUuid, "node_selector")), "memprov");
    EXPECT_EQ(value(t, P(kUuid, "tags")), "");
    EXPECT_EQ(value(t, P(kUuid, "migrate_sync_lock")), "");
    EXPECT_EQ(value(t, P(kUuid, "tags/prod")), "prod");
    EXPECT_EQ(value(t, P(kUuid, "tags/prod/type")), "user");
    EXPECT_EQ(value(t, P(kUuid, "tags/prod/protected")), "False");
    EXPECT_EQ(value(t, P(kUuid, "tags/keep/protected")), "True");
    // One multi-op: every key of the define carries the same creation zxid.
    auto zxid = t[P(kUuid)]["czxid"];
    for (auto k : {"xml", "state", "profile", "stats", "node", "lastnode", "failedreason", "rbdlist", "consolelog",
                   "vnc", "node_autostart", "migration_method", "node_limit", "node_selector", "tags",
                   "migrate_sync_lock"})
        EXPECT_EQ(t[P(kUuid, k)]["czxid"], zxid) << k;
    EXPECT_NE(t[P(kUuid, "tags/prod")]["czxid"], zxid);  // tags: a transaction of their own
    // Nothing else under the VM.
    int count = 0;
    for (auto& [k, v] : t.items()) count += k.rfind(P(kUuid) + "/", 0) == 0 ? 1 : 0;
    EXPECT_EQ(count, 16 + 6);
}

TEST_F(PvcCli, DefineDefaultsAndSelectorPlacement) {
    // No --node: the cluster selector (mem) picks the node with most free memory (hv3).
    auto r = pvc({"vm", "define", write_file("a.xml", domain_xml("a", kUuid))});
    ASSERT_EQ(r.status, 0) << r.err;
    json t = dump();
    EXPECT_EQ(value(t, P(kUuid, "node")), "hv3");
    EXPECT_EQ(value(t, P(kUuid, "node_autostart")), "False");
    EXPECT_EQ(value(t, P(kUuid, "migration_method")), "none");
    EXPECT_EQ(value(t, P(kUuid, "node_selector")), "none");
    EXPECT_EQ(value(t, P(kUuid, "node_limit")), "");
}

TEST_F(PvcCli, DefineInsertsAGeneratedUuidWhenTheXmlHasNone) {
    auto r = pvc({"vm", "define", write_file("n.xml", domain_xml("nouuid", "")), "--node", "hv1"});
    ASSERT_EQ(r.status, 0) << r.err;
    json t = dump();
    std::string uuid;
    for (auto& [k, v] : t.items())
        if (k.rfind("/domains/", 0) == 0 && std::count(k.begin(), k.end(), '/') == 2) uuid = k.substr(9);
    ASSERT_EQ(uuid.size(), 36u);
    std::string xml = value(t, P(uuid, "xml"));
    EXPECT_NE(xml.find("<uuid>" + uuid + "</uuid>"), std::string::npos) << xml;
    // The stored XML is still well-formed, with the uuid right after the name.
    auto check = pvc::test::run_python(
        "import sys, xml.etree.ElementTree as E; r = E.fromstring(sys.argv[1]); "
        "print(r[0].tag, r[1].tag, r.find('uuid').text)", {xml});
    EXPECT_EQ(check.out, "name uuid " + uuid + "\n") << check.err;
}

// A reference client refuses XML without <uuid> and cannot show a VM without
// <emulator> (or <os><type arch/machine>, <console type>): `vm define`
// names each missing element on stderr, and defines the VM all the same.
TEST_F(PvcCli, DefineWarnsAboutWhatAReferenceClientNeeds) {
    std::string complete = "<domain type='kvm'>\n  <name>full</name>\n  <uuid>" + kUuid +
                           "</uuid>\n  <memory unit='MiB'>64</memory>\n  <vcpu>1</vcpu>\n"
                           "  <os><type arch='x86_64' machine='pc'>hvm</type></os>\n"
                           "  <devices>\n    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n"
                           "    <console type='pty'><target type='serial' port='0'/></console>\n  </devices>\n"
                           "</domain>\n";
    auto r = pvc({"vm", "define", write_file("full.xml", complete), "--node", "hv1"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;

    std::string bare = "<domain type='kvm'>\n  <name>bare</name>\n  <memory unit='MiB'>64</memory>\n"
                       "  <vcpu>1</vcpu>\n  <os><type arch='x86_64' machine='pc'>hvm</type></os>\n"
                       "  <devices>\n    <console type='pty'/>\n  </devices>\n</domain>\n";
    r = pvc({"vm", "define", write_file("bare.xml", bare), "--node", "hv1"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("warning: the VM XML has no <uuid>"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("warning: the VM XML has no <devices><emulator>"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("<os>"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("<console"), std::string::npos) << r.err;
    // Defined all the same.
    auto vms = json::parse(pvc({"vm", "list", "--format", "json"}).out);
    ASSERT_EQ(vms.size(), 2u);
    EXPECT_EQ(vms[0]["name"], "bare");

    // And every such element, by name.
    std::string none = "<domain type='kvm'>\n  <name>none</name>\n  <uuid>11111111-2222-4333-8444-555555555555</uuid>\n"
                       "  <memory unit='MiB'>64</memory>\n  <vcpu>1</vcpu>\n</domain>\n";
    r = pvc({"vm", "define", write_file("none.xml", none), "--node", "hv1"});
    ASSERT_EQ(r.status, 0) << r.err;
    for (auto e : {"<os><type arch=...>", "<os><type machine=...>", "<devices><console type=...>",
                   "<devices><emulator>"})
        EXPECT_NE(r.err.find(std::string("warning: the VM XML has no ") + e), std::string::npos) << e << r.err;
    EXPECT_EQ(r.err.find("<uuid>"), std::string::npos) << r.err;
}

// The lab's VM (tools/lab/tiny-vm.xml) is complete for a reference client.
TEST_F(PvcCli, TheLabVmXmlIsCompleteForAReferenceClient) {
    auto r = pvc({"vm", "define", std::string(PVC_TEST_SOURCE_DIR) + "/tools/lab/tiny-vm.xml", "--node", "hv1",
                  "--no-resource-check"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
    auto info = json::parse(pvc({"vm", "info", "tiny1", "--format", "json"}).out);
    EXPECT_EQ(info["memory"], 64);
}

// A <memory> without unit is KiB for the client as for the daemon's memprov
// (libvirt's default unit).
TEST_F(PvcCli, MemoryWithoutUnitIsKiB) {
    std::string xml = domain_xml("kib", kUuid);
    auto pos = xml.find("<memory unit='MiB'>1024</memory>");
    ASSERT_NE(pos, std::string::npos);
    xml.replace(pos, std::string("<memory unit='MiB'>1024</memory>").size(), "<memory>2097152</memory>");
    auto r = pvc({"vm", "define", write_file("kib.xml", xml), "--node", "hv1"});
    ASSERT_EQ(r.status, 0) << r.err;
    auto vms = json::parse(pvc({"vm", "list", "--format", "json"}).out);
    ASSERT_EQ(vms.size(), 1u);
    EXPECT_EQ(vms[0]["memory"], 2048);
}

TEST_F(PvcCli, DefineRefusesBadInputAndWritesNothing) {
    expect_refused({"vm", "define", write_file("bad.xml", "<domain><name>x</name><uuid>")}, 1, "invalid VM XML");
    expect_refused({"vm", "define", write_file("noname.xml", domain_xml("x", kUuid, 1024, 2, false))}, 1, "<name>");
    expect_refused({"vm", "define", write_file("baduuid.xml", domain_xml("x", "not-a-uuid"))}, 1, "<uuid>");
    expect_refused({"vm", "define", write_file("x.xml", domain_xml("x", kUuid)), "--node", "hv9"}, 1, "hv9");
    expect_refused({"vm", "define", write_file("x.xml", domain_xml("x", kUuid)), "--node-limit", "hv1,nope"}, 1, "nope");
    expect_refused({"vm", "define", write_file("x.xml", domain_xml("x", kUuid)), "--node-selector", "fastest"}, 2,
                   "fastest");
    expect_refused({"vm", "define", write_file("big.xml", domain_xml("x", kUuid, 64000)), "--node", "hv1"}, 1, "memory");
    expect_refused({"vm", "define", write_file("cpu.xml", domain_xml("x", kUuid, 1024, 14)), "--node", "hv1"}, 1, "vCPU");
    expect_refused({"vm", "define", dir_->path().string() + "/missing.xml"}, 1, "cannot read");
    define("x", kUuid);
    expect_refused({"vm", "define", write_file("dup.xml", domain_xml("x", "11111111-2222-4333-8444-555555555555"))}, 1,
                   "already exists");
    expect_refused({"vm", "define", write_file("dup2.xml", domain_xml("y", kUuid))}, 1, "already exists");
}

// ---------------------------------------------------------------- state changes

TEST_F(PvcCli, StartByNameOrUuidWritesStart) {
    define("web1", kUuid);
    ASSERT_EQ(pvc({"vm", "start", "web1"}).status, 0);
    EXPECT_EQ(value(dump(), P(kUuid, "state")), "start");
    ASSERT_EQ(pvc({"vm", "stop", kUuid}).status, 0);
    EXPECT_EQ(value(dump(), P(kUuid, "state")), "stop");
}

TEST_F(PvcCli, StateChangeWaitsForTheKazooLockOnState) {
    define("web1", kUuid);
    // kazoo holds the exclusive lock for 2 s; pvc must not write meanwhile.
    auto holder = std::async(std::launch::async, [&] {
        return pvc::test::run_python(kKazoo, {server_->hosts(), "hold_lock", P(kUuid, "state"), "2",
                                              P(kUuid, "state")});
    });
    pvc::zk::SessionOptions o;
    o.hosts = server_->hosts();
    auto zk = pvc::zk::Session::connect(o);
    ASSERT_TRUE(pvc::test::eventually([&] {
        auto c = zk->raw_children(P(kUuid, "state"));
        return c && !c->empty();
    }));
    auto started = std::chrono::steady_clock::now();
    auto r = pvc({"vm", "start", "web1"});
    auto took = std::chrono::steady_clock::now() - started;
    EXPECT_EQ(r.status, 0) << r.err;
    auto held = holder.get();
    EXPECT_EQ(held.out, "held\nstop\n") << held.err;  // state unchanged while kazoo held the lock
    EXPECT_GE(took, 1s);
    EXPECT_EQ(zk->get(P(kUuid, "state")).value_or(""), "start");
    // pvc released its contender.
    EXPECT_TRUE(zk->raw_children(P(kUuid, "state")).value_or(std::vector<std::string>{"x"}).empty());
    zk->close();
}

TEST_F(PvcCli, RestartAndShutdownRefusedUnlessStarted) {
    define("web1", kUuid);
    expect_refused({"vm", "restart", "web1"}, 1, "not start");
    expect_refused({"vm", "shutdown", "web1"}, 1, "not start");
    expect_refused({"vm", "start", "nosuchvm"}, 1, "nosuchvm");
    expect_refused({"vm", "migrate", "web1", "--node", "hv7"}, 1, "hv7");
}

TEST_F(PvcCli, StartWaitReturnsWhenTheNodeRunsIt) {
    define("web1", kUuid);
    // Stand-in daemon on hv1: sees start, then lists the VM as running.
    auto daemon = std::async(std::launch::async, [&] {
        pvc::zk::SessionOptions o;
        o.hosts = server_->hosts();
        auto zk = pvc::zk::Session::connect(o);
        bool seen = pvc::test::eventually([&] { return zk->get(P(kUuid, "state")) == "start"; }, 20s);
        std::this_thread::sleep_for(1500ms);
        zk->write("/nodes/hv1/runningdomains", kUuid);
        zk->close();
        return seen;
    });
    auto started = std::chrono::steady_clock::now();
    auto r = pvc({"vm", "start", "web1", "--wait"});
    auto took = std::chrono::steady_clock::now() - started;
    EXPECT_TRUE(daemon.get());
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_GE(took, 1500ms);
    EXPECT_NE(r.out.find("running on hv1"), std::string::npos) << r.out;
}

TEST_F(PvcCli, StartWaitFailsWhenTheNodeReportsFail) {
    define("web1", kUuid);
    auto daemon = std::async(std::launch::async, [&] {
        pvc::zk::SessionOptions o;
        o.hosts = server_->hosts();
        auto zk = pvc::zk::Session::connect(o);
        pvc::test::eventually([&] { return zk->get(P(kUuid, "state")) == "start"; }, 20s);
        std::this_thread::sleep_for(800ms);
        zk->write({{P(kUuid, "state"), "fail"}, {P(kUuid, "failedreason"), "no such disk"}});
        zk->close();
    });
    auto r = pvc({"vm", "start", "web1", "--wait"});
    daemon.get();
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("no such disk"), std::string::npos) << r.err;
}

TEST_F(PvcCli, ShutdownWaitAndDisable) {
    define("web1", kUuid);
    set(P(kUuid, "state"), "start");
    auto daemon = std::async(std::launch::async, [&] {
        pvc::zk::SessionOptions o;
        o.hosts = server_->hosts();
        auto zk = pvc::zk::Session::connect(o);
        pvc::test::eventually([&] { return zk->get(P(kUuid, "state")) == "shutdown"; }, 20s);
        std::this_thread::sleep_for(700ms);
        zk->write(P(kUuid, "state"), "stop");
        zk->close();
    });
    auto r = pvc({"vm", "disable", "web1"});
    daemon.get();
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(value(dump(), P(kUuid, "state")), "disable");
}

// ---------------------------------------------------------------- migrate / move / unmigrate

TEST_F(PvcCli, MigrateUnmigrateMoveWriteStateNodeLastnode) {
    define("web1", kUuid);
    set(P(kUuid, "state"), "start");
    ASSERT_EQ(pvc({"vm", "migrate", "web1", "--node", "hv2"}).status, 0);
    json t = dump();
    EXPECT_EQ(value(t, P(kUuid, "state")), "migrate");
    EXPECT_EQ(value(t, P(kUuid, "node")), "hv2");
    EXPECT_EQ(value(t, P(kUuid, "lastnode")), "hv1");
    // One transaction: the three keys changed at the same zxid.
    EXPECT_EQ(t[P(kUuid, "state")]["mzxid"], t[P(kUuid, "node")]["mzxid"]);
    EXPECT_EQ(t[P(kUuid, "state")]["mzxid"], t[P(kUuid, "lastnode")]["mzxid"]);

    set(P(kUuid, "state"), "start");
    expect_refused({"vm", "migrate", "web1", "--node", "hv3"}, 1, "migrated already");
    // --force keeps the original home.
    ASSERT_EQ(pvc({"vm", "migrate", "web1", "--node", "hv3", "--force", "--live"}).status, 0);
    t = dump();
    EXPECT_EQ(value(t, P(kUuid, "state")), "migrate-live");
    EXPECT_EQ(value(t, P(kUuid, "node")), "hv3");
    EXPECT_EQ(value(t, P(kUuid, "lastnode")), "hv1");

    set(P(kUuid, "state"), "start");
    ASSERT_EQ(pvc({"vm", "unmigrate", "web1"}).status, 0);
    t = dump();
    EXPECT_EQ(value(t, P(kUuid, "state")), "migrate");
    EXPECT_EQ(value(t, P(kUuid, "node")), "hv1");
    EXPECT_EQ(value(t, P(kUuid, "lastnode")), "");
    expect_refused({"vm", "unmigrate", "web1"}, 1, "not been migrated");

    // A stopped VM is re-assigned, its state kept.
    set(P(kUuid, "state"), "stop");
    ASSERT_EQ(pvc({"vm", "move", "web1", "--node", "hv2"}).status, 0);
    t = dump();
    EXPECT_EQ(value(t, P(kUuid, "state")), "stop");
    EXPECT_EQ(value(t, P(kUuid, "node")), "hv2");
    EXPECT_EQ(value(t, P(kUuid, "lastnode")), "");
    expect_refused({"vm", "move", "web1", "--node", "hv2"}, 1, "already on node");
}

TEST_F(PvcCli, MoveToCurrentNodeMakesAMigrationPermanent) {
    define("web1", kUuid);
    set(P(kUuid, "node"), "hv2");
    set(P(kUuid, "lastnode"), "hv1");
    ASSERT_EQ(pvc({"vm", "move", "web1", "--node", "hv2"}).status, 0);
    json t = dump();
    EXPECT_EQ(value(t, P(kUuid, "lastnode")), "");
    EXPECT_EQ(value(t, P(kUuid, "node")), "hv2");
}

TEST_F(PvcCli, MigrateRespectsNodeLimitAndSelector) {
    define("web1", kUuid);
    set(P(kUuid, "node_limit"), "hv1,hv2");
    set(P(kUuid, "state"), "start");
    expect_refused({"vm", "migrate", "web1", "--node", "hv3"}, 1, "node limit");
    ASSERT_EQ(pvc({"vm", "migrate", "web1"}).status, 0);  // only hv2 qualifies
    EXPECT_EQ(value(dump(), P(kUuid, "node")), "hv2");
}

TEST_F(PvcCli, MigrateWaitReturnsWhenTheTargetHasIt) {
    define("web1", kUuid);
    set(P(kUuid, "state"), "start");
    auto daemon = std::async(std::launch::async, [&] {
        pvc::zk::SessionOptions o;
        o.hosts = server_->hosts();
        auto zk = pvc::zk::Session::connect(o);
        pvc::test::eventually([&] { return zk->get(P(kUuid, "state")) == "migrate"; }, 20s);
        std::this_thread::sleep_for(1s);
        zk->write({{"/nodes/hv2/runningdomains", kUuid}, {P(kUuid, "state"), "start"}});
        zk->close();
    });
    auto r = pvc({"vm", "migrate", "web1", "--node", "hv2", "--wait"});
    daemon.get();
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("Migrated VM web1 to node hv2"), std::string::npos) << r.out;
}

// A migration by shutdown: the source writes `stop` once the VM is off,
// then the target starts it. The wait reports the migration done, not the
// passing `stop` (api_daemon_test's walk through pvc failed so under load).
TEST_F(PvcCli, MigrateWaitSeesAShutdownMigrationThroughItsStop) {
    define("web1", kUuid);
    set(P(kUuid, "state"), "start");
    auto daemons = std::async(std::launch::async, [&] {
        pvc::zk::SessionOptions o;
        o.hosts = server_->hosts();
        auto zk = pvc::zk::Session::connect(o);
        bool seen = pvc::test::eventually([&] { return zk->get(P(kUuid, "state")) == "migrate"; }, 30s);
        zk->write(P(kUuid, "state"), "stop");  // the source, the VM shut down
        // The command's wait (0.5 s polls) has seen `stop` by then.
        std::this_thread::sleep_for(1500ms);
        zk->write({{"/nodes/hv2/runningdomains", kUuid}, {P(kUuid, "state"), "start"}});  // the target
        zk->close();
        return seen;
    });
    auto r = pvc({"vm", "migrate", "web1", "--node", "hv2", "--wait"});
    EXPECT_TRUE(daemons.get());
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("Migrated VM web1 to node hv2"), std::string::npos) << r.out;
}

// ---------------------------------------------------------------- modify / remove

TEST_F(PvcCli, ModifyReplacesXmlAndMetadata) {
    define("web1", kUuid);
    std::string xml = domain_xml("web1", kUuid, 2048, 4);
    ASSERT_EQ(pvc({"vm", "modify", "web1", write_file("new.xml", xml), "--node-limit", "hv1", "--no-autostart",
                   "--migration-method", "shutdown"})
                  .status,
              0);
    json t = dump();
    EXPECT_EQ(value(t, P(kUuid, "xml")), xml);
    EXPECT_EQ(value(t, P(kUuid, "node_limit")), "hv1");
    EXPECT_EQ(value(t, P(kUuid, "node_autostart")), "False");
    EXPECT_EQ(value(t, P(kUuid, "migration_method")), "shutdown");
    expect_refused({"vm", "modify", "web1", write_file("ren.xml", domain_xml("other", kUuid))}, 1, "renam");
    expect_refused({"vm", "modify", "web1", write_file("new.xml", xml), "--restart"}, 1, "not in state start");
    expect_refused({"vm", "modify", "web1"}, 2, "nothing to modify");
}

TEST_F(PvcCli, RemoveStopsThenDeletesTheSubtree) {
    define("web1", kUuid);
    set(P(kUuid, "state"), "start");
    // Watch the state values a node would see.
    auto watcher = std::async(std::launch::async, [&] {
        pvc::zk::SessionOptions o;
        o.hosts = server_->hosts();
        auto zk = pvc::zk::Session::connect(o);
        std::vector<std::string> seen;
        std::mutex m;
        auto w = zk->watch_data(P(kUuid, "state"), [&](const std::optional<std::string>& d, const pvc::zk::Stat&) {
            std::lock_guard g(m);
            seen.push_back(d.value_or("<gone>"));
        });
        pvc::test::eventually([&] {
            std::lock_guard g(m);
            return !seen.empty() && seen.back() == "<gone>";
        }, 20s);
        w->cancel();
        zk->close();
        std::lock_guard g(m);
        return seen;
    });
    std::this_thread::sleep_for(300ms);
    auto r = pvc({"vm", "remove", "web1", "--yes"});
    EXPECT_EQ(r.status, 0) << r.err;
    auto seen = watcher.get();
    EXPECT_EQ(seen, (std::vector<std::string>{"start", "stop", "delete", "<gone>"}));
    json t = dump();
    EXPECT_FALSE(t.contains(P(kUuid)));
    expect_refused({"vm", "remove", "web1", "--yes"}, 1, "web1");
}

// ---------------------------------------------------------------- SR-IOV

// SR-IOV VF used/used_by through the command line: the client library's VF
// bookkeeping on define, refusal, move and remove.
TEST_F(PvcCli, SriovVfIsClaimedRefusedMovedAndReleased) {
    for (const auto& n : {"hv1", "hv2"}) {
        std::string vf = std::string("/nodes/") + n + "/sriov/vf/ens1f0v0";
        set(vf, "");
        set(vf + "/phy_mac", "00:00:00:00:00:00");
        set(vf + "/mac", "00:00:00:00:00:00");
        set(vf + "/used", "False");
        set(vf + "/used_by", "");
    }
    auto with_vf = [](const std::string& name, const std::string& uuid, const std::string& mac) {
        std::string x = domain_xml(name, uuid);
        std::string bridge = "<interface type='bridge'><mac address='52:54:00:12:34:56'/><source bridge='vmbr100'/>"
                             "<model type='virtio'/></interface>";
        x.replace(x.find(bridge), bridge.size(),
                  "<interface type='direct'><mac address='" + mac + "'/><source dev='ens1f0v0' mode='passthrough'/></interface>");
        return x;
    };
    auto r = pvc({"vm", "define", write_file("sr1.xml", with_vf("sr1", kUuid, "52:54:00:aa:00:01")), "--node", "hv1"});
    ASSERT_EQ(r.status, 0) << r.err;
    json t = dump();
    EXPECT_EQ(value(t, "/nodes/hv1/sriov/vf/ens1f0v0/used"), "True");
    EXPECT_EQ(value(t, "/nodes/hv1/sriov/vf/ens1f0v0/used_by"), kUuid);
    EXPECT_EQ(value(t, "/nodes/hv1/sriov/vf/ens1f0v0/mac"), "52:54:00:aa:00:01");
    // The VM's keys and the VF's in one transaction.
    EXPECT_EQ(t[P(kUuid, "xml")]["mzxid"], t["/nodes/hv1/sriov/vf/ens1f0v0/used"]["mzxid"]);

    const std::string other = "0c7d3a52-1111-4a3b-9c2d-1e0f2a3b4c5d";
    expect_refused({"vm", "define", write_file("sr2.xml", with_vf("sr2", other, "52:54:00:aa:00:02")), "--node", "hv1"}, 1,
                   "SR-IOV network \"ens1f0v0\" which is already used by VM \"sr1\"");

    ASSERT_EQ(pvc({"vm", "move", "sr1", "--node", "hv2"}).status, 0);
    t = dump();
    EXPECT_EQ(value(t, "/nodes/hv1/sriov/vf/ens1f0v0/used"), "False");
    EXPECT_EQ(value(t, "/nodes/hv1/sriov/vf/ens1f0v0/used_by"), "");
    EXPECT_EQ(value(t, "/nodes/hv2/sriov/vf/ens1f0v0/used_by"), kUuid);

    ASSERT_EQ(pvc({"vm", "remove", "sr1", "--yes"}).status, 0);
    t = dump();
    EXPECT_EQ(value(t, "/nodes/hv2/sriov/vf/ens1f0v0/used"), "False");
    EXPECT_EQ(value(t, "/nodes/hv2/sriov/vf/ens1f0v0/used_by"), "");
    EXPECT_EQ(value(t, "/nodes/hv2/sriov/vf/ens1f0v0/mac"), "00:00:00:00:00:00");
}

// ---------------------------------------------------------------- nodes

TEST_F(PvcCli, FlushWaitFollowsUntilFlushed) {
    set("/nodes/hv1/runningdomains", kUuid);
    auto daemon = std::async(std::launch::async, [&] {
        pvc::zk::SessionOptions o;
        o.hosts = server_->hosts();
        auto zk = pvc::zk::Session::connect(o);
        bool seen = pvc::test::eventually([&] { return zk->get("/nodes/hv1/domainstate") == "flush"; }, 20s);
        std::this_thread::sleep_for(1500ms);
        zk->write({{"/nodes/hv1/runningdomains", ""}, {"/nodes/hv1/domainstate", "flushed"}});
        zk->close();
        return seen;
    });
    auto r = pvc({"node", "flush", "hv1", "--wait"});
    EXPECT_TRUE(daemon.get());
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("1 VM(s) running"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Removed node hv1"), std::string::npos) << r.out;
    // Already flushed: nothing written.
    json before = dump();
    r = pvc({"node", "flush", "hv1"});
    EXPECT_EQ(r.status, 0);
    EXPECT_NE(r.out.find("already flushed"), std::string::npos);
    EXPECT_EQ(before, dump());
}

TEST_F(PvcCli, ReadyWritesUnflushAndWaits) {
    set("/nodes/hv2/domainstate", "flushed");
    auto daemon = std::async(std::launch::async, [&] {
        pvc::zk::SessionOptions o;
        o.hosts = server_->hosts();
        auto zk = pvc::zk::Session::connect(o);
        pvc::test::eventually([&] { return zk->get("/nodes/hv2/domainstate") == "unflush"; }, 20s);
        std::this_thread::sleep_for(1s);
        zk->write("/nodes/hv2/domainstate", "ready");
        zk->close();
    });
    auto r = pvc({"node", "ready", "hv2", "--wait"});
    daemon.get();
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(value(dump(), "/nodes/hv2/domainstate"), "ready");
    expect_refused({"node", "flush", "hv9"}, 1, "hv9");
}

TEST_F(PvcCli, PrimaryAndSecondaryWriteTheRequest) {
    ASSERT_EQ(pvc({"node", "primary", "hv2"}).status, 0);
    EXPECT_EQ(value(dump(), "/config/primary_node"), "hv2");
    ASSERT_EQ(pvc({"node", "secondary", "hv1"}).status, 0);
    EXPECT_EQ(value(dump(), "/config/primary_node"), "none");
    expect_refused({"node", "primary", "hv3"}, 1, "non-coordinator");
    set("/nodes/hv2/daemonstate", "stop");
    expect_refused({"node", "primary", "hv2"}, 1, "not active");
}

TEST_F(PvcCli, NodeLogShowsTheLastLines) {
    auto r = pvc({"node", "log", "hv1", "--lines", "2"});
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out, "2024/01/01 00:00:03.000000 line 3 on hv1\n2024/01/01 00:00:04.000000 line 4 on hv1\n");
}

TEST_F(PvcCli, VmLogShowsTheConsoleLog) {
    define("web1", kUuid);
    set(P(kUuid, "consolelog"), "boot 1\nboot 2\nlogin: \n");
    auto r = pvc({"vm", "log", "web1", "--lines", "2"});
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out, "boot 2\nlogin: \n");
}

TEST_F(PvcCli, MaintenanceWritesLowercaseBooleans) {
    ASSERT_EQ(pvc({"cluster", "maintenance", "on"}).status, 0);
    EXPECT_EQ(value(dump(), "/config/maintenance"), "true");
    ASSERT_EQ(pvc({"cluster", "maintenance", "off"}).status, 0);
    EXPECT_EQ(value(dump(), "/config/maintenance"), "false");
    expect_refused({"cluster", "maintenance", "maybe"}, 2, "maybe");
}

// ---------------------------------------------------------------- JSON output

TEST_F(PvcCli, JsonOutputCarriesTheFields) {
    define("web1", kUuid);
    set(P(kUuid, "state"), "start");
    auto vms = json::parse(pvc({"vm", "list", "--format", "json"}).out);
    ASSERT_EQ(vms.size(), 1u);
    EXPECT_EQ(vms[0]["name"], "web1");
    EXPECT_EQ(vms[0]["uuid"], kUuid);
    EXPECT_EQ(vms[0]["state"], "start");
    EXPECT_EQ(vms[0]["node"], "hv1");
    EXPECT_EQ(vms[0]["memory"], 1024);
    EXPECT_EQ(vms[0]["vcpu"], 2);

    auto info = json::parse(pvc({"vm", "info", "web1", "--format", "json"}).out);
    EXPECT_EQ(info["rbd_list"], json::array({"vms/web1_disk0", "vms/web1_disk1"}));
    EXPECT_EQ(info["networks"][0]["source"], "vmbr100");
    EXPECT_EQ(info["description"], "test VM");

    auto nodes = json::parse(pvc({"node", "list", "--format", "json"}).out);
    ASSERT_EQ(nodes.size(), 3u);
    EXPECT_EQ(nodes[0]["name"], "hv1");
    EXPECT_EQ(nodes[0]["coordinator_state"], "primary");
    EXPECT_EQ(nodes[2]["memory"]["free"], 22000);
    EXPECT_EQ(nodes[0]["cpu_count"], 16);

    auto node = json::parse(pvc({"node", "info", "hv2", "--format", "json"}).out);
    EXPECT_EQ(node["domain_state"], "ready");
    EXPECT_EQ(node["health"], 100);

    auto status = json::parse(pvc({"cluster", "status", "--format", "json"}).out);
    EXPECT_EQ(status["primary_node"], "hv1");
    EXPECT_EQ(status["maintenance"], false);
    EXPECT_EQ(status["nodes"]["total"], 3);
    EXPECT_EQ(status["nodes"]["run,ready"], 3);
    EXPECT_EQ(status["vms"]["total"], 1);
    EXPECT_EQ(status["vms"]["start"], 1);
    EXPECT_EQ(status["cluster_health"]["health"], 100);
}

TEST_F(PvcCli, TablesAreReadableAndUncolouredWhenPiped) {
    define("web1", kUuid);
    auto r = pvc({"vm", "list"});
    EXPECT_EQ(r.status, 0);
    EXPECT_NE(r.out.find("NAME"), std::string::npos);
    EXPECT_NE(r.out.find("web1"), std::string::npos);
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
    r = pvc({"cluster", "status"});
    EXPECT_EQ(r.status, 0);
    EXPECT_NE(r.out.find("hv3"), std::string::npos);
}

// ---------------------------------------------------------------- connection, usage, help

TEST_F(PvcCli, ExitCodesAndUsageErrors) {
    EXPECT_EQ(pvc({}).status, 2);
    EXPECT_EQ(pvc({"vm"}).status, 2);
    EXPECT_EQ(pvc({"vm", "frobnicate"}).status, 2);
    EXPECT_EQ(pvc({"vm", "start"}).status, 2);
    EXPECT_EQ(pvc({"vm", "list", "--format", "xml"}).status, 2);
    auto r = pvc::test::run_command({PVC_CLI_BINARY, "vm", "list"});  // no cluster given anywhere
    EXPECT_TRUE(r.status == 2 || r.status == 0) << r.err;
}

TEST_F(PvcCli, UnreachableClusterFailsWithinTheTimeout) {
    auto started = std::chrono::steady_clock::now();
    auto r = pvc::test::run_command({PVC_CLI_BINARY, "--zookeeper", "127.0.0.1:9", "--connect-timeout", "2", "vm", "list"});
    auto took = std::chrono::steady_clock::now() - started;
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("cannot reach"), std::string::npos) << r.err;
    EXPECT_LT(took, 6s);
}

TEST_F(PvcCli, ConnectsThroughTheEnvironmentAndAConfigFile) {
    std::string cfg = write_file("pvcnoded.yaml", "pvc:\n  cluster:\n    coordinators:\n      - " + server_->hosts() + "\n");
    auto r = pvc::test::run_command({PVC_CLI_BINARY, "--config", cfg, "node", "list", "--format", "json"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).size(), 3u);
    r = pvc::test::run_command({"/usr/bin/env", "PVC_ZOOKEEPER=" + server_->hosts(), PVC_CLI_BINARY, "node", "list"});
    EXPECT_EQ(r.status, 0) << r.err;
}

TEST_F(PvcCli, EveryCommandHasHelpWithExamples) {
    std::vector<std::vector<std::string>> cmds = {
        {}, {"cluster"}, {"cluster", "status"}, {"cluster", "maintenance"}, {"node"}, {"node", "list"},
        {"node", "info"}, {"node", "flush"}, {"node", "ready"}, {"node", "primary"}, {"node", "secondary"},
        {"node", "log"}, {"vm"}, {"vm", "list"}, {"vm", "info"}, {"vm", "define"}, {"vm", "modify"},
        {"vm", "start"}, {"vm", "stop"}, {"vm", "shutdown"}, {"vm", "restart"}, {"vm", "disable"},
        {"vm", "migrate"}, {"vm", "unmigrate"}, {"vm", "move"}, {"vm", "remove"}, {"vm", "log"}, {"completion"}};
    for (auto c : cmds) {
        c.insert(c.begin(), PVC_CLI_BINARY);
        c.push_back("--help");
        auto r = pvc::test::run_command(c);
        EXPECT_EQ(r.status, 0) << c.back();
        EXPECT_NE(r.out.find("Examples:"), std::string::npos) << c[c.size() - 2];
    }
}

TEST_F(PvcCli, BashCompletionIsValidBash) {
    auto r = pvc::test::run_command({PVC_CLI_BINARY, "completion", "bash"});
    ASSERT_EQ(r.status, 0);
    EXPECT_NE(r.out.find("complete -F _pvc pvc"), std::string::npos);
    auto script = write_file("pvc.bash", r.out);
    // Source it and complete "pvc vm mi" -> migrate.
    auto b = pvc::test::run_command(
        {"/bin/bash", "-c", "source " + script + "; COMP_WORDS=(pvc vm mi); COMP_CWORD=2; _pvc; echo ${COMPREPLY[@]}"});
    EXPECT_EQ(b.status, 0) << b.err;
    EXPECT_EQ(b.out, "migrate\n");
}

}  // namespace
