// Tier 2: `pvcnoded --check-config` with the built hypervisor module reports
// the module's problems and the core's at once, in line order.
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

using namespace std::chrono_literals;

namespace {

pvc::test::NodeConfigOptions hypervisor_node(const std::filesystem::path& base) {
    pvc::test::NodeConfigOptions o;
    o.node = "hv1";
    o.base_dir = base;
    o.enable_hypervisor = true;
    o.module_dir = std::filesystem::path(PVC_TEST_BUILD_DIR) / "modules";
    return o;
}

TEST(HypervisorModuleConfig, CheckConfigReportsTheModulesProblemsWithTheCores) {
    pvc::test::TempDir dir("hvcfg");
    auto o = hypervisor_node(dir.path());
    o.keepalive_interval = 0;  // the core's problem
    o.extra_system_yaml = "    hypervisor:\n      max_parallel_migrations: 0\n";  // the module's
    auto file = pvc::test::write_node_config(o);
    auto text = pvc::test::slurp(file);
    auto line = [&](const std::string& needle) {
        auto pos = text.find(needle);
        return 1 + std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n');
    };
    auto r = pvc::test::run_command({pvc::test::pvcnoded_binary(), "--check-config", file.string()});
    EXPECT_EQ(r.status, 78) << r.out << r.err;
    auto core = r.err.find(fmt::format("{}:{}: pvc.system.intervals.keepalive_interval: must be at least 1",
                                       file.string(), line("keepalive_interval: 0")));
    auto module = r.err.find(fmt::format("{}:{}: pvc.system.hypervisor.max_parallel_migrations: must be at least 1",
                                         file.string(), line("max_parallel_migrations: 0")));
    EXPECT_NE(core, std::string::npos) << r.err;
    EXPECT_NE(module, std::string::npos) << r.err;
    EXPECT_LT(core, module) << "problems are listed in line order\n" << r.err;
    EXPECT_NE(r.err.find("(2 problems)"), std::string::npos) << r.err;
}

TEST(HypervisorModuleConfig, CheckConfigAcceptsAValidHypervisorNode) {
    pvc::test::TempDir dir("hvcfg");
    auto o = hypervisor_node(dir.path());
    o.extra_system_yaml = "    hypervisor:\n      libvirt_uri: \"test:///default\"\n";
    auto r = pvc::test::run_command({pvc::test::pvcnoded_binary(), "--check-config",
                                     pvc::test::write_node_config(o).string()});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
}

// The selector is the module's key: --check-config names a bad one with its
// line (the core reads none of the module's keys).
TEST(HypervisorModuleConfig, CheckConfigReportsAnUnknownSelector) {
    pvc::test::TempDir dir("hvcfg");
    auto o = hypervisor_node(dir.path());
    auto file = pvc::test::write_node_config(o);
    auto text = pvc::test::slurp(file);
    auto at = text.find("target_selector: mem");
    ASSERT_NE(at, std::string::npos);
    text.replace(at, std::string("target_selector: mem").size(), "target_selector: fastest");
    std::ofstream(file) << text;
    auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(at), '\n');
    auto r = pvc::test::run_command({pvc::test::pvcnoded_binary(), "--check-config", file.string()});
    EXPECT_EQ(r.status, 78) << r.out << r.err;
    EXPECT_NE(r.err.find(fmt::format("{}:{}: pvc.system.migration.target_selector: unknown migration target selector "
                                     "'fastest'",
                                     file.string(), line)),
              std::string::npos)
        << r.err;
}

// The primary publishes its configured migration_target_selector and knows
// the cluster's value from a watch, not a read per tick: a client's change is
// put back, every time. The module's part of the keepalive, with a real
// pvcnoded and the built module on libvirt's test driver.
TEST(HypervisorModuleDaemon, ThePrimaryPutsItsMigrationSelectorBackAfterEachClientChange) {
    pvc::test::ZkServer server;
    auto zk = pvc::zk::Session::connect({.hosts = server.hosts()});
    pvc::init_cluster(*zk);
    pvc::test::TempDir dir("hvsel");
    auto o = hypervisor_node(dir.path() / "hv1");
    o.coordinators = "[hv1:" + server.hosts().substr(server.hosts().rfind(':') + 1) + "]";
    o.extra_system_yaml = "    hypervisor:\n      libvirt_uri: \"test:///default\"\n";  // target_selector: mem
    pvc::test::DaemonProcess d("hv1", pvc::test::write_node_config(o), o.base_dir / "out.log");
    const std::string key = pvc::schema::path("base.config.migration_target_selector");
    auto selector = [&] { return zk->get(key).value_or(""); };
    auto log = [&] { return pvc::test::slurp(o.base_dir / "out.log") + pvc::test::slurp(o.base_dir / "out.log.err"); };
    ASSERT_TRUE(pvc::test::eventually(
        [&] { return zk->get(pvc::schema::path("node.state.router", {"hv1"})).value_or("") == "primary"; }, 30s))
        << log();
    for (const char* other : {"vms", "load", "vcpus"}) {
        zk->write(key, other);
        // Keepalive every second: put back within a few ticks.
        EXPECT_TRUE(pvc::test::eventually([&] { return selector() == "mem"; }, 10s)) << other << ": " << selector();
    }
    d.signal(SIGTERM);
    EXPECT_EQ(d.wait(20s), 0) << log();
}

}  // namespace
