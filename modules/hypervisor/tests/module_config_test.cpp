// Tier 2: `pvcnoded --check-config` with the built hypervisor module reports
// the module's problems and the core's at once, in line order.
#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"

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

}  // namespace
