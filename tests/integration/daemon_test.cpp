// pvcnoded against a real ZooKeeper: start -> run -> SIGTERM -> stop, the
// node's full key set, one daemon per node name, and the refusals.
#include <csignal>
#include <ctime>
#include <fstream>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_health.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

using namespace std::chrono_literals;
using pvc::schema::path;
using pvc::test::DaemonProcess;
using pvc::test::slurp;

namespace {

std::string build_dir() { return pvc::test::build_dir(); }
std::string pvcnoded() { return pvc::test::pvcnoded_binary(); }

class DaemonTest : public ::testing::Test {
protected:
    void SetUp() override {
        zk = pvc::zk::Session::connect({server.hosts()});
        pvc::init_cluster(*zk);
    }
    pvc::test::NodeConfigOptions options(const std::string& node) {
        pvc::test::NodeConfigOptions o;
        o.node = node;
        o.coordinators = "[" + node + ":" + std::to_string(server.port()) + "]";
        o.base_dir = dir.path() / node;
        o.module_dir = build_dir() + "/test-modules/none";
        return o;
    }
    std::string state(const std::string& node) { return zk->get(path("node.state.daemon", {node})).value_or("<absent>"); }

    pvc::test::ZkServer server;
    pvc::test::TempDir dir{"daemon"};
    std::shared_ptr<pvc::zk::Session> zk;
};

TEST_F(DaemonTest, StartsRunsAndStopsCleanlyOnSigterm) {
    auto o = options("hv1");
    auto cfg = pvc::test::write_node_config(o);
    DaemonProcess d("hv1", cfg, o.base_dir / "out.log");

    ASSERT_TRUE(pvc::test::eventually([&] { return state("hv1") == "run"; }, 15s))
        << "daemon never reached run; state " << state("hv1") << "\n" << slurp(o.base_dir / "out.log.err")
        << slurp(o.base_dir / "out.log");
    // The keepalive advances (interval 1 s).
    long k1 = std::stol(zk->get(path("node.keepalive", {"hv1"})).value());
    ASSERT_TRUE(pvc::test::eventually(
        [&] { return std::stol(zk->get(path("node.keepalive", {"hv1"})).value()) >= k1 + 2; }, 10s));

    d.signal(SIGTERM);
    EXPECT_EQ(d.wait(20s), 0);
    EXPECT_EQ(state("hv1"), "stop");
    EXPECT_EQ(zk->get(path("node.monitoring.health", {"hv1"})).value_or(""), "None");
    auto log = slurp(o.base_dir / "log" / "pvc.log");
    EXPECT_NE(log.find("Node is in daemon state run"), std::string::npos) << log;
    EXPECT_NE(log.find("keepalive @"), std::string::npos);
    EXPECT_EQ(log.find("s3cr3tpass"), std::string::npos) << "a password reached the log";
    // ZooKeeper copy of the log.
    auto zlog = zk->get(path("logs.messages", {"hv1"})).value_or("");
    EXPECT_NE(zlog.find("Node is in daemon state run"), std::string::npos);
}

// The reference waits up to 120 s for a successor whenever another node
// exists; with every other coordinator stopped nobody can take over, so the
// primary keeps its role and stops at once.
TEST_F(DaemonTest, PrimaryWithNoOtherRunningCoordinatorStopsWithoutWaitingForASuccessor) {
    // hv8: a coordinator that is stopped; hv9: a running hypervisor (never a primary).
    for (const auto& [n, mode, st] : {std::tuple{"hv8", "coordinator", "stop"}, {"hv9", "hypervisor", "run"}}) {
        zk->ensure_path(path("node.name", {n}));
        ASSERT_TRUE(zk->write({{path("node.mode", {n}), mode}, {path("node.state.daemon", {n}), st}}));
    }
    auto o = options("hv1");
    auto cfg = pvc::test::write_node_config(o);
    DaemonProcess d("hv1", cfg, o.base_dir / "out.log");
    ASSERT_TRUE(pvc::test::eventually(
        [&] { return zk->get(path("node.state.router", {"hv1"})).value_or("") == "primary" && state("hv1") == "run"; },
        15s))
        << slurp(o.base_dir / "out.log");

    d.signal(SIGTERM);
    EXPECT_EQ(d.wait(20s), 0) << "the primary waited for a successor that cannot exist";
    EXPECT_EQ(state("hv1"), "stop");
    EXPECT_EQ(zk->get(path("base.config.primary_node")).value_or(""), "hv1");
    auto log = slurp(o.base_dir / "log" / "pvc.log");
    EXPECT_NE(log.find("keeping the primary role through shutdown"), std::string::npos) << log;
}

TEST_F(DaemonTest, RegistersTheFullKeySetWithTheReferenceEncodings) {
    auto o = options("hv2");
    auto cfg = pvc::test::write_node_config(o);
    DaemonProcess d("hv2", cfg, o.base_dir / "out.log");
    ASSERT_TRUE(pvc::test::eventually([&] { return state("hv2") == "run"; }, 15s));
    // A lone coordinator claims the primary role and takes it over (0.5 s delay).
    ASSERT_TRUE(pvc::test::eventually(
        [&] { return zk->get(path("node.state.router", {"hv2"})).value_or("") == "primary"; }, 10s));

    // Every per-node key of the schema exists (read by an independent client, kazoo).
    std::string script = R"(
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start()
n = '/nodes/' + sys.argv[2]
for k in sorted(zk.get_children(n)):
    print(k + '=' + zk.get(n + '/' + k)[0].decode())
print('ROOT=' + zk.get(n)[0].decode())
zk.stop()
)";
    auto r = pvc::test::run_python(script, {server.hosts(), "hv2"});
    ASSERT_EQ(r.status, 0) << r.err;
    std::map<std::string, std::string> kv;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
        auto eq = line.find('=');
        if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    for (const auto& key : pvc::schema::keys_of(pvc::schema::Class::node)) {
        std::string p = path(key.name, {"hv2"});
        if (key.name == "node.name") continue;
        std::string leaf = p.substr(std::string("/nodes/hv2/").size());
        if (leaf.find('/') != std::string::npos) continue;  // sriov/pf etc. checked by parent
        EXPECT_TRUE(kv.count(leaf)) << "missing key " << p;
    }
    EXPECT_EQ(kv["ROOT"], "coordinator");
    EXPECT_EQ(kv["daemonmode"], "coordinator");
    EXPECT_EQ(kv["routerstate"], "primary");  // a lone coordinator claims and takes primary
    EXPECT_EQ(kv["domainstate"], "flushed");
    EXPECT_EQ(kv["activeschema"], "10");
    EXPECT_EQ(kv["latestschema"], "10");
    EXPECT_EQ(kv["pvcversion"], PVC_PROJECT_VERSION);
    // This node's BMC is the fencing module's to register (none is installed
    // here: modules/fencing/tests/fencing_daemon_test.cpp): the keys exist
    // with the schema's registration default.
    EXPECT_EQ(kv["ipmiusername"], "");
    EXPECT_EQ(kv["ipmipassword"], "");
    // staticdata: CPU count, kernel release, OS, machine.
    std::istringstream sd(kv["staticdata"]);
    std::vector<std::string> fields{std::istream_iterator<std::string>(sd), {}};
    ASSERT_EQ(fields.size(), 4u) << kv["staticdata"];
    EXPECT_GT(std::stoi(fields[0]), 0);
    EXPECT_EQ(fields[2], "GNU/Linux");
    // Integers and a Python float.
    EXPECT_GT(std::stol(kv["memtotal"]), 0);
    EXPECT_GT(std::stol(kv["keepalive"]), 1700000000L);
    EXPECT_NE(kv["cpuload"].find('.'), std::string::npos) << kv["cpuload"];
    EXPECT_EQ(kv["runningdomains"], "");
    EXPECT_EQ(zk->get(path("base.config.primary_node")).value_or(""), "hv2");

    d.signal(SIGTERM);
    EXPECT_EQ(d.wait(20s), 0);
}

TEST_F(DaemonTest, RefusesASecondDaemonForTheSameNode) {
    auto o = options("hv3");
    auto cfg = pvc::test::write_node_config(o);
    DaemonProcess first("hv3", cfg, o.base_dir / "first.log");
    ASSERT_TRUE(pvc::test::eventually([&] { return state("hv3") == "run"; }, 15s));

    DaemonProcess second("hv3", cfg, o.base_dir / "second.log");
    int status = second.wait(30s);
    EXPECT_EQ(status, 1);
    auto err = slurp(o.base_dir / "second.log");
    EXPECT_NE(err.find("already running"), std::string::npos) << err;
    // The first one is untouched and still running.
    EXPECT_TRUE(first.running());
    EXPECT_EQ(state("hv3"), "run");
    first.signal(SIGTERM);
    EXPECT_EQ(first.wait(20s), 0);
}

TEST_F(DaemonTest, RestartsAfterACrashOnceTheOldSessionIsGone) {
    auto o = options("hv4");
    auto cfg = pvc::test::write_node_config(o);
    {
        DaemonProcess crashed("hv4", cfg, o.base_dir / "crashed.log");
        ASSERT_TRUE(pvc::test::eventually([&] { return state("hv4") == "run"; }, 15s));
        crashed.signal(SIGKILL);
        crashed.wait(5s);
    }
    long dead_ka = std::stol(zk->get(path("node.keepalive", {"hv4"})).value());
    DaemonProcess again("hv4", cfg, o.base_dir / "again.log");
    // It waits for the dead session's node lock to expire, then starts and keepalives.
    ASSERT_TRUE(pvc::test::eventually(
        [&] {
            return state("hv4") == "run" && std::stol(zk->get(path("node.keepalive", {"hv4"})).value()) > dead_ka + 1;
        },
        30s))
        << slurp(o.base_dir / "again.log");
    again.signal(SIGTERM);
    EXPECT_EQ(again.wait(20s), 0);
}

TEST_F(DaemonTest, RefusesAClusterAtAnotherSchemaVersion) {
    zk->write(path("base.schema.version"), "11");
    auto o = options("hv5");
    auto cfg = pvc::test::write_node_config(o);
    DaemonProcess d("hv5", cfg, o.base_dir / "out.log");
    EXPECT_EQ(d.wait(20s), 1);
    auto out = slurp(o.base_dir / "out.log");
    EXPECT_NE(out.find("supports exactly version 10"), std::string::npos) << out;
    EXPECT_FALSE(zk->exists(path("node.name", {"hv5"}))) << "registered despite the schema mismatch";
}

TEST_F(DaemonTest, RefusesAnUninitialisedCluster) {
    zk->remove_recursive(path("base.schema"));
    auto o = options("hv6");
    auto cfg = pvc::test::write_node_config(o);
    DaemonProcess d("hv6", cfg, o.base_dir / "out.log");
    EXPECT_EQ(d.wait(20s), 1);
    EXPECT_NE(slurp(o.base_dir / "out.log").find("cluster not initialised"), std::string::npos);
}

TEST_F(DaemonTest, MissingEnabledModuleStopsTheDaemonBeforeAnythingIsWritten) {
    auto o = options("hv7");
    o.enable_hypervisor = true;  // module dir "none" has no hypervisor module
    auto cfg = pvc::test::write_node_config(o);
    DaemonProcess d("hv7", cfg, o.base_dir / "out.log");
    EXPECT_EQ(d.wait(20s), 1);
    auto out = slurp(o.base_dir / "out.log");
    EXPECT_NE(out.find("enable_hypervisor"), std::string::npos) << out;
    EXPECT_FALSE(zk->exists(path("node.name", {"hv7"})));
}

TEST_F(DaemonTest, ModuleThatFailsToStartIsNamedAndTheDaemonExitsWithoutReachingRun) {
    auto o = options("hv6");
    o.enable_hypervisor = true;
    o.module_dir = build_dir() + "/test-modules/startfails";  // its hypervisor module's start() throws
    auto cfg = pvc::test::write_node_config(o);
    DaemonProcess d("hv6", cfg, o.base_dir / "out.log");
    int status = d.wait(30s);
    auto out = slurp(o.base_dir / "out.log");
    EXPECT_EQ(status, 1) << out << slurp(o.base_dir / "out.log.err");
    EXPECT_NE(out.find("Module hypervisor failed to start: test module cannot start"), std::string::npos) << out;
    EXPECT_EQ(out.find("Node is in daemon state run"), std::string::npos) << out;
    // Registered before the modules start, so it is left in `stop`, never `run`.
    EXPECT_EQ(state("hv6"), "stop");
    EXPECT_EQ(slurp(o.base_dir / "out.log.err").find("terminate called"), std::string::npos);
}

TEST(DaemonConfig, MissingSectionExits78NamingTheKey) {
    pvc::test::TempDir dir("cfg");
    auto file = dir.path() / "bad.yaml";
    std::ofstream(file) << "pvc:\n  functions: {}\n";
    auto r = pvc::test::run_command({pvcnoded(), "--check-config", file.string()});
    EXPECT_EQ(r.status, 78);
    EXPECT_NE((r.out + r.err).find("bad.yaml:1: pvc.cluster: required section is missing"), std::string::npos)
        << r.out << r.err;
}

TEST(DaemonConfig, ShippedSampleIsValid) {
    auto r = pvc::test::run_command({pvcnoded(), "--check-config", std::string(PVC_TEST_SOURCE_DIR) + "/etc/pvcnoded.sample.yaml"});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
}

}  // namespace

namespace {

// A plugin file in the reference's legacy format, as an operator drops it in.
void legacy_plugin(const std::filesystem::path& dir, const std::string& name, const std::string& run_body) {
    std::ofstream(dir / name) << "#!/usr/bin/env python3\n"
                              << "from pvcnoded.objects.MonitoringInstance import MonitoringPlugin\n"
                              << "PLUGIN_NAME = \"" << name << "\"\n"
                              << "class MonitoringPluginScript(MonitoringPlugin):\n"
                              << "    def setup(self):\n"
                              << "        pass\n"
                              << "    def run(self, coordinator_state=None):\n"
                              << run_body
                              << "    def cleanup(self):\n"
                              << "        pass\n";
}

TEST_F(DaemonTest, DroppedLegacyPluginReportsWithinTwoKeepalivesAndAHungOneNeverDelaysThem) {
    auto o = options("hv8");
    o.plugin_dir = o.base_dir / "plugins";
    o.keepalive_interval = 2;
    o.extra_system_yaml = "";
    std::filesystem::create_directories(o.plugin_dir);
    legacy_plugin(o.plugin_dir, "example",
                  "        self.plugin_result.set_health_delta(25)\n"
                  "        self.plugin_result.set_message('example says hello')\n"
                  "        self.plugin_result.set_data({'answer': 42})\n"
                  "        return self.plugin_result\n");
    legacy_plugin(o.plugin_dir, "sleeper", "        import time\n        time.sleep(1e9)\n");
    auto cfg = pvc::test::write_node_config(o);
    // The hung plugin's deadline: short, so the test sees it reported.
    {
        std::string text = slurp(cfg);
        auto pos = text.find("      suicide_intervals: 0\n");
        text.insert(pos, "      plugin_timeout: 3\n");
        std::ofstream(cfg) << text;
    }
    DaemonProcess d("hv8", cfg, o.base_dir / "out.log");
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(pvc::test::eventually([&] { return state("hv8") == "run"; }, 15s)) << slurp(o.base_dir / "out.log.err");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, pvc::test::scaled(5s));

    // Within two keepalives (plus the plugin's own run) its result is in ZooKeeper.
    auto pkey = [&](const char* k, const char* p) { return zk->get(path(k, {"hv8", p})).value_or(""); };
    ASSERT_TRUE(pvc::test::eventually([&] { return pkey("monitoring_plugin.health_delta", "example") == "25"; }, 6s));
    EXPECT_EQ(pkey("monitoring_plugin.message", "example"), "example says hello");
    EXPECT_EQ(nlohmann::json::parse(pkey("monitoring_plugin.data", "example"))["answer"], 42);
    EXPECT_EQ(zk->get(path("node.monitoring.plugins", {"hv8"})).value_or(""), "example sleeper");
    ASSERT_TRUE(pvc::test::eventually([&] { return zk->get(path("node.monitoring.health", {"hv8"})) == "75"; }, 10s));

    // Keepalives keep their rhythm although `sleeper` never returns: watch the
    // znode's modification times for a few intervals.
    std::vector<int64_t> mtimes;
    pvc::zk::Stat st;
    int64_t last = 0;
    auto until = std::chrono::steady_clock::now() + 9s;
    while (std::chrono::steady_clock::now() < until) {
        zk->get(path("node.keepalive", {"hv8"}), &st);
        if (st.mzxid != last) {
            last = st.mzxid;
            mtimes.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count());
        }
        std::this_thread::sleep_for(20ms);
    }
    ASSERT_GE(mtimes.size(), 4u);
    for (size_t i = 2; i < mtimes.size(); ++i)
        EXPECT_NEAR(mtimes[i] - mtimes[i - 1], 2000, 200) << "keepalive " << i << " delayed";
    auto log = slurp(o.base_dir / "log" / "pvc.log");
    EXPECT_NE(log.find("Monitoring plugin sleeper failed: Timeout"), std::string::npos) << log;

    d.signal(SIGTERM);
    EXPECT_EQ(d.wait(30s), 0) << "shutdown waited on the hung plugin";
    EXPECT_EQ(state("hv8"), "stop");
}

// A module's health items (KeepaliveReport::health, core/README.md "Module
// health"): published as the plugin-like entry module-<module>, counted with
// the real plugins' deltas, read back as reference clients read them, and
// cleared when the module stops reporting them.
TEST_F(DaemonTest, AModulesHealthItemsAreAPluginLikeEntryCountedWithThePluginsAndClearedWhenGone) {
    auto o = options("hv7");
    o.module_dir = build_dir() + "/test-modules/health";  // hello reporting /test/hv7/health
    o.extra_functions_yaml = "    enable_hello: true\n";
    o.plugin_dir = o.base_dir / "plugins";
    std::filesystem::create_directories(o.plugin_dir);
    legacy_plugin(o.plugin_dir, "example",
                  "        self.plugin_result.set_health_delta(5)\n"
                  "        self.plugin_result.set_message('example says hello')\n"
                  "        return self.plugin_result\n");
    zk->ensure_path("/test/hv7");
    auto cfg = pvc::test::write_node_config(o);
    DaemonProcess d("hv7", cfg, o.base_dir / "out.log");
    auto log = [&] { return slurp(o.base_dir / "out.log") + slurp(o.base_dir / "out.log.err"); };
    ASSERT_TRUE(pvc::test::eventually([&] { return state("hv7") == "run"; }, 15s)) << log();

    auto health = [&] { return zk->get(path("node.monitoring.health", {"hv7"})).value_or(""); };
    auto plugins = [&] { return zk->get(path("node.monitoring.plugins", {"hv7"})).value_or(""); };
    auto pkey = [&](const char* k, const char* p) { return zk->get(path(k, {"hv7", p})); };
    auto as_clients_read = [&] {
        auto r = pvc::test::run_python(pvc::test::node_health_py, {server.hosts(), "hv7"});
        EXPECT_EQ(r.status, 0) << r.out << r.err;
        return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
    };
    // The plugin alone: no module entry.
    ASSERT_TRUE(pvc::test::eventually([&] { return health() == "95"; }, 15s)) << health() << log();
    EXPECT_EQ(plugins(), "example");
    EXPECT_FALSE(zk->exists(path("monitoring_plugin.name", {"hv7", "module-hello"})));

    // Two items: one entry, the sum of their deltas, with the plugin's.
    auto t0 = std::time(nullptr);
    zk->write("/test/hv7/health", "net1 10 Network one refused\nnet2 20 Network two refused");
    ASSERT_TRUE(pvc::test::eventually([&] { return health() == "65"; }, 15s)) << health() << log();
    EXPECT_EQ(plugins(), "example module-hello");
    EXPECT_EQ(pkey("monitoring_plugin.name", "module-hello"), "module-hello");
    EXPECT_EQ(pkey("monitoring_plugin.health_delta", "module-hello"), "30");
    EXPECT_EQ(pkey("monitoring_plugin.message", "module-hello"), "Network one refused; Network two refused");
    EXPECT_EQ(pkey("monitoring_plugin.runtime", "module-hello"), "0.00");
    EXPECT_GE(std::stoll(pkey("monitoring_plugin.last_run", "module-hello").value_or("0")), t0 - 1);
    auto data = nlohmann::json::parse(pkey("monitoring_plugin.data", "module-hello").value_or("null"));
    EXPECT_EQ(data, nlohmann::json::parse(R"({"net1": {"health_delta": 10, "message": "Network one refused"},
                                              "net2": {"health_delta": 20, "message": "Network two refused"}})"));
    EXPECT_EQ(pkey("monitoring_plugin.health_delta", "example"), "5");  // the plugin's own keys untouched
    auto read = as_clients_read();
    EXPECT_EQ(read["health"], 65);
    EXPECT_EQ(read["plugins"], nlohmann::json::parse(R"(["example", "module-hello"])"));
    ASSERT_EQ(read["details"].size(), 2u) << read.dump();
    EXPECT_EQ(read["details"][1]["name"], "module-hello");
    EXPECT_EQ(read["details"][1]["health_delta"], 30);
    EXPECT_EQ(read["details"][1]["message"], "Network one refused; Network two refused");

    // One item goes away: the next pass counts only the other.
    zk->write("/test/hv7/health", "net2 20 Network two refused");
    ASSERT_TRUE(pvc::test::eventually([&] { return health() == "75"; }, 15s)) << health() << log();
    EXPECT_EQ(pkey("monitoring_plugin.health_delta", "module-hello"), "20");
    EXPECT_EQ(pkey("monitoring_plugin.message", "module-hello"), "Network two refused");

    // None left: the entry is gone, the plugin stays.
    zk->write("/test/hv7/health", "");
    ASSERT_TRUE(pvc::test::eventually([&] { return health() == "95"; }, 15s)) << health() << log();
    EXPECT_EQ(plugins(), "example");
    EXPECT_FALSE(zk->exists(path("monitoring_plugin.name", {"hv7", "module-hello"})));
    EXPECT_EQ(pkey("monitoring_plugin.health_delta", "example"), "5");
    read = as_clients_read();
    EXPECT_EQ(read["health"], 95);
    EXPECT_EQ(read["details"].size(), 1u) << read.dump();

    d.signal(SIGTERM);
    EXPECT_EQ(d.wait(20s), 0);
}

}  // namespace
