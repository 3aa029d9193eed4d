// The fencing module inside real pvcnoded processes (two coordinators), with
// an ipmi_sim BMC for the node that dies.
#include <signal.h>

#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "bmc.hpp"
#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"

using namespace std::chrono_literals;
using pvc::schema::path;
using pvc::test::DaemonProcess;
using pvc::test::eventually;
using pvc::test::slurp;

namespace {

void replace(std::string& s, const std::string& from, const std::string& to) {
    auto p = s.find(from);
    ASSERT_NE(p, std::string::npos) << from;
    s.replace(p, from.size(), to);
}

class FencingDaemon : public ::testing::Test {
protected:
    pvc::test::ZkServer server;
    pvc::test::TempDir dir{"fencing-daemon"};
    std::shared_ptr<pvc::zk::Session> zk;
    int port = pvc::test::reserve_port();

    void SetUp() override {
        zk = pvc::zk::Session::connect({server.hosts()});
        pvc::init_cluster(*zk);
    }
    std::string state(const std::string& node) {
        return zk->get(path("node.state.daemon", {node})).value_or("<absent>");
    }
    // Keepalive 1 s, dead after 3, no saving throws; the node's BMC at 127.0.0.<30+n>.
    std::filesystem::path config(const std::string& node, int n, int suicide_intervals = 0,
                                 const std::string& suicide_command = "/bin/true") {
        pvc::test::NodeConfigOptions o;
        o.node = node;
        std::string p = std::to_string(server.port());
        o.coordinators = "[hv1:" + p + ", hv2:" + p + "]";
        o.base_dir = dir.path() / node;
        o.module_dir = pvc::test::build_dir() + "/modules";
        std::string yaml = pvc::test::node_config_yaml(o);
        replace(yaml, "      fence_intervals: 6", "      fence_intervals: 3");
        replace(yaml, "      suicide_intervals: 0", "      suicide_intervals: " + std::to_string(suicide_intervals));
        replace(yaml, "    fencing:\n", "    fencing:\n      saving_throws: 0\n      suicide_command: \"" +
                                             suicide_command + "\"\n");
        replace(yaml, "        host: \"\"\n", "        host: 127.0.0." + std::to_string(30 + n) +
                                                 "\n        timeout: 3\n        ipmitool_args: [\"-C\", \"3\", \"-p\", \"" +
                                                 std::to_string(port) + "\"]\n");
        replace(yaml, "        pass: s3cr3tpass", "        pass: pass");
        std::filesystem::create_directories(o.base_dir);
        auto file = o.base_dir / "pvcnoded.yaml";
        std::ofstream(file) << yaml;
        return file;
    }
    std::string log_of(const std::string& node) { return slurp(dir.path() / node / "log" / "pvc.log"); }
};

}  // namespace

TEST_F(FencingDaemon, CoordinatorFencesAPeerThatLostPowerAndSparesAPausedOne) {
    pvc::fencing::test::Bmc bmc(dir.path() / "bmc-hv2", "127.0.0.32", port);
    pvc::fencing::test::Bmc own_bmc(dir.path() / "bmc-hv1", "127.0.0.31", port);
    auto c1 = config("hv1", 1);
    auto c2 = config("hv2", 2);
    DaemonProcess hv1("hv1", c1, dir.path() / "hv1.out");
    DaemonProcess hv2("hv2", c2, dir.path() / "hv2.out");
    ASSERT_TRUE(eventually([&] { return state("hv1") == "run" && state("hv2") == "run"; }, 60s))
        << slurp(dir.path() / "hv1.out.err") << slurp(dir.path() / "hv1.out") << slurp(dir.path() / "hv2.out.err");
    EXPECT_NE(log_of("hv1").find("This coordinator fences dead nodes"), std::string::npos) << log_of("hv1");
    bmc.set_node_process(hv2.pid());
    // The start-up check of the node's own BMC: extra arguments honoured, password through the environment.
    EXPECT_TRUE(eventually([&] { return log_of("hv1").find("Our IPMI interface is reachable") != std::string::npos; },
                           10s))
        << log_of("hv1");
    // This node's BMC, registered by the module (the peers fence the node with it).
    EXPECT_EQ(zk->get(path("node.ipmi.hostname", {"hv1"})).value_or(""), "127.0.0.31");
    EXPECT_EQ(zk->get(path("node.ipmi.username", {"hv1"})).value_or(""), "admin");
    EXPECT_EQ(zk->get(path("node.ipmi.password", {"hv1"})).value_or(""), "pass");

    // Paused for less than the 3 s deadline (SIGSTOP): never marked dead. Its
    // last keepalive came up to an interval before the pause, so the silence
    // is the pause plus up to 1 s: a 1.5 s pause stays below the deadline (a
    // 2 s one would reach it, and a node silent for the deadline is dead).
    std::this_thread::sleep_for(4s);  // the fencers' trust window
    hv2.signal(SIGSTOP);
    std::this_thread::sleep_for(1500ms);
    hv2.signal(SIGCONT);
    std::this_thread::sleep_for(5s);
    EXPECT_EQ(state("hv2"), "run");
    EXPECT_EQ(log_of("hv1").find("seems dead"), std::string::npos) << log_of("hv1");
    EXPECT_TRUE(bmc.power_commands().empty());

    // Power loss: the daemon dies with no last word.
    hv2.signal(SIGKILL);
    hv2.wait(5s);
    ASSERT_TRUE(eventually([&] { return state("hv2") == "fenced"; }, 30s)) << log_of("hv1");
    EXPECT_TRUE(eventually([&] { return bmc.power_commands().size() == 2; }, 10s));
    EXPECT_EQ(bmc.power_commands(), (std::vector<std::string>{"set power 0", "set power 1"}));
    EXPECT_TRUE(eventually([&] { return zk->get(path("node.state.domain", {"hv2"})).value_or("") == "flushed"; }, 10s));
    EXPECT_EQ(state("hv1"), "run");
    // The peer's password never appears in the fencer's log.
    EXPECT_EQ(log_of("hv1").find("-P pass"), std::string::npos);
}

TEST_F(FencingDaemon, NodeCutOffFromZooKeeperRunsItsResetAction) {
    auto marker = dir.path() / "reset-ran";
    auto c1 = config("hv1", 1, 3, "touch " + marker.string());
    DaemonProcess hv1("hv1", c1, dir.path() / "hv1.out");
    ASSERT_TRUE(eventually([&] { return state("hv1") == "run"; }, 60s)) << slurp(dir.path() / "hv1.out.err");
    std::this_thread::sleep_for(4s);
    EXPECT_FALSE(std::filesystem::exists(marker));
    zk.reset();
    server.stop();
    EXPECT_TRUE(eventually([&] { return std::filesystem::exists(marker); }, 20s)) << log_of("hv1");
    EXPECT_NE(log_of("hv1").find("SELF-FENCING"), std::string::npos);
    server.start();
}

// The bundled ipmi health plugin reaches this node's BMC with the module's
// ipmitool arguments (ipmi_sim needs -C 3 and here a port of its own): the
// plugin's ipmitool call uses the flat key ipmitool_args.
TEST_F(FencingDaemon, BundledIpmiPluginUsesTheModulesIpmitoolArguments) {
    pvc::fencing::test::Bmc own_bmc(dir.path() / "bmc-hv1", "127.0.0.31", port);
    auto c1 = config("hv1", 1);
    std::filesystem::copy_file(pvc::test::build_dir() + "/plugins/ipmi", dir.path() / "hv1" / "plugins" / "ipmi");
    DaemonProcess hv1("hv1", c1, dir.path() / "hv1.out");
    auto message = [&] { return zk->get(path("monitoring_plugin.message", {"hv1", "ipmi"})).value_or(""); };
    ASSERT_TRUE(eventually([&] { return message().rfind("IPMI via", 0) == 0; }, 60s))
        << slurp(dir.path() / "hv1.out.err") << log_of("hv1");
    EXPECT_EQ(message(), "IPMI via admin@127.0.0.31 is responding") << log_of("hv1");
    EXPECT_EQ(zk->get(path("monitoring_plugin.health_delta", {"hv1", "ipmi"})).value_or(""), "0");
}

// A health plugin whose setup() takes 6 s delays the first keepalive by as
// much (start-up loads the plugins before the keepalive starts): with
// self-fencing after 3 intervals of 1 s, the node must not reset itself —
// its ZooKeeper was reachable all along. It still does once cut off.
TEST_F(FencingDaemon, SlowPluginSetupAtStartDoesNotResetTheNode) {
    auto marker = dir.path() / "reset-ran";
    auto c1 = config("hv1", 1, 3, "touch " + marker.string());
    std::ofstream(dir.path() / "hv1" / "plugins" / "slowsetup")
        << "import time\n"
           "from pvcnoded.objects.MonitoringInstance import MonitoringPlugin\n"
           "PLUGIN_NAME = \"slowsetup\"\n"
           "class MonitoringPluginScript(MonitoringPlugin):\n"
           "    def setup(self):\n"
           "        time.sleep(6)\n"
           "    def run(self, coordinator_state=None):\n"
           "        return self.plugin_result\n"
           "    def cleanup(self):\n"
           "        pass\n";
    DaemonProcess hv1("hv1", c1, dir.path() / "hv1.out");
    ASSERT_TRUE(eventually([&] { return state("hv1") == "run"; }, 60s)) << slurp(dir.path() / "hv1.out.err");
    EXPECT_NE(log_of("hv1").find("slowsetup"), std::string::npos) << log_of("hv1");
    std::this_thread::sleep_for(3s);
    EXPECT_FALSE(std::filesystem::exists(marker)) << log_of("hv1");
    EXPECT_EQ(log_of("hv1").find("SELF-FENCING"), std::string::npos) << log_of("hv1");
    zk.reset();
    server.stop();
    EXPECT_TRUE(eventually([&] { return std::filesystem::exists(marker); }, 20s)) << log_of("hv1");
    server.start();
}
