// Tier 2: the fencing module's own keys through pvcnoded with the built module.
// `pvcnoded --check-config` reports a bad fencing key (the module's, read by its
// configure) with the core's problems, each with its YAML path and line, in
// line order, exit 78; a running daemon gives the module's flat dictionary keys
// to legacy plugins.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <fstream>

#include <fmt/format.h>

#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"

namespace {

pvc::test::NodeConfigOptions fencing_node(const std::filesystem::path& base) {
    pvc::test::NodeConfigOptions o;
    o.node = "hv1";
    o.base_dir = base;
    o.module_dir = std::filesystem::path(PVC_TEST_BUILD_DIR) / "modules";  // the fencing module is `always`
    return o;
}

std::string insert_after(std::string text, const std::string& anchor, const std::string& what) {
    auto pos = text.find(anchor);
    EXPECT_NE(pos, std::string::npos) << anchor;
    if (pos != std::string::npos) text.insert(pos + anchor.size(), what);
    return text;
}

TEST(FencingModuleConfig, CheckConfigReportsABadFencingKeyWithTheCoresProblems) {
    pvc::test::TempDir dir("fencecfg");
    auto o = fencing_node(dir.path());
    o.keepalive_interval = 0;  // the core's problem
    auto file = pvc::test::write_node_config(o);
    // The module's: a negative saving throw count and an ipmitool deadline of 0 s.
    std::string text = insert_after(pvc::test::slurp(file), "    fencing:\n", "      saving_throws: -1\n");
    text = insert_after(text, "        pass: s3cr3tpass\n", "        timeout: 0\n");
    std::ofstream(file) << text;
    auto line = [&](const std::string& needle) {
        auto pos = text.find(needle);
        return 1 + std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n');
    };
    auto r = pvc::test::run_command({pvc::test::pvcnoded_binary(), "--check-config", file.string()});
    EXPECT_EQ(r.status, 78) << r.out << r.err;
    auto core = r.err.find(fmt::format("{}:{}: pvc.system.intervals.keepalive_interval: must be at least 1",
                                       file.string(), line("keepalive_interval: 0")));
    auto throws = r.err.find(fmt::format("{}:{}: pvc.system.fencing.saving_throws: must be between 0 and 1000",
                                         file.string(), line("saving_throws: -1")));
    auto timeout = r.err.find(fmt::format("{}:{}: pvc.system.fencing.ipmi.timeout: must be between 1 and 600",
                                          file.string(), line("timeout: 0")));
    EXPECT_NE(core, std::string::npos) << r.err;
    EXPECT_NE(throws, std::string::npos) << r.err;
    EXPECT_NE(timeout, std::string::npos) << r.err;
    EXPECT_LT(core, throws) << "problems are listed in line order\n" << r.err;
    EXPECT_LT(throws, timeout) << "problems are listed in line order\n" << r.err;
    EXPECT_NE(r.err.find("(3 problems)"), std::string::npos) << r.err;
    EXPECT_EQ((r.out + r.err).find("s3cr3tpass"), std::string::npos) << "a password was printed";
}

TEST(FencingModuleConfig, CheckConfigAcceptsValidFencingKeys) {
    pvc::test::TempDir dir("fencecfg");
    auto o = fencing_node(dir.path());
    auto file = pvc::test::write_node_config(o);
    std::string text = insert_after(pvc::test::slurp(file), "    fencing:\n",
                                    "      saving_throws: 0\n      suicide_command: \"/bin/true\"\n");
    text = insert_after(text, "        pass: s3cr3tpass\n", "        timeout: 3\n        ipmitool_args: [\"-C\", \"3\"]\n");
    std::ofstream(file) << text;
    auto r = pvc::test::run_command({pvc::test::pvcnoded_binary(), "--check-config", file.string()});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
}

// The reference's dictionary has the fencing keys on every node: with the
// fencing module installed, a legacy plugin reads them from self.config as it
// does on a reference node (the module gives them through flat_keys).
TEST(FencingModuleConfig, ALegacyPluginSeesTheFencingKeys) {
    using namespace std::chrono_literals;
    pvc::test::ZkServer server;
    {
        auto zk = pvc::zk::Session::connect({server.hosts()});
        pvc::init_cluster(*zk);
    }
    pvc::test::TempDir dir("fencecfg");
    auto o = fencing_node(dir.path());
    o.coordinators = "[hv1:" + std::to_string(server.port()) + "]";
    o.plugin_dir = dir.path() / "plugins";
    std::filesystem::create_directories(o.plugin_dir);
    std::ofstream(o.plugin_dir / "fencekeys")
        << "#!/usr/bin/env python3\n"
        << "from pvcnoded.objects.MonitoringInstance import MonitoringPlugin\n"
        << "PLUGIN_NAME = \"fencekeys\"\n"
        << "class MonitoringPluginScript(MonitoringPlugin):\n"
        << "    def setup(self):\n"
        << "        pass\n"
        << "    def run(self, coordinator_state=None):\n"
        << "        import json\n"
        << "        c = self.config\n"
        << "        self.plugin_result.set_message(json.dumps([c['fence_intervals'], c['suicide_intervals'], "
           "c['successful_fence'], c['failed_fence'], c['ipmi_username']]))\n"
        << "        return self.plugin_result\n"
        << "    def cleanup(self):\n"
        << "        pass\n";
    auto file = pvc::test::write_node_config(o);
    pvc::test::DaemonProcess d("hv1", file, o.base_dir / "out.log");
    auto zk = pvc::zk::Session::connect({server.hosts()});
    auto message = [&] {
        return zk->get(pvc::schema::path("monitoring_plugin.message", {"hv1", "fencekeys"})).value_or("");
    };
    // Its first result replaces the health host's "Initializing".
    EXPECT_TRUE(pvc::test::eventually([&] { return message().rfind("[", 0) == 0; }, 30s))
        << pvc::test::slurp(o.base_dir / "out.log") << pvc::test::slurp(o.base_dir / "out.log.err");
    EXPECT_EQ(message(), R"([6, 0, "migrate", "None", "admin"])");
    auto log = pvc::test::slurp(o.base_dir / "log" / "pvc.log");
    EXPECT_EQ(log.find("Module fencing is not installed"), std::string::npos) << log;
    d.signal(SIGTERM);
    EXPECT_EQ(d.wait(30s), 0);
}

}  // namespace
