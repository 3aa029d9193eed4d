// ModuleHost: loading built .so modules, ABI check, missing and disabled modules,
// and a module started with a NodeContext against a real ZooKeeper.
#include <gtest/gtest.h>

#include "daemon/module_host.hpp"
#include "pvc/cluster.hpp"
#include "pvc/config.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"

namespace {

std::filesystem::path modules(const std::string& which) {
    return std::filesystem::path(PVC_TEST_BUILD_DIR) / "test-modules" / which;
}

pvc::Config config(bool hypervisor, const std::string& zk_hosts = "127.0.0.1:1") {
    pvc::test::TempDir dir("modcfg");
    pvc::test::NodeConfigOptions o;
    o.node = "hv1";
    o.coordinators = "[\"" + zk_hosts + "\"]";
    o.base_dir = dir.path();
    o.enable_hypervisor = hypervisor;
    o.zookeeper_logging = false;
    return pvc::parse_config(pvc::test::node_config_yaml(o), "test.yaml", pvc::HostIdentity::from_hostname("hv1"));
}

pvc::Logger quiet() { return pvc::Logger(pvc::make_log_sink(nullptr), "test"); }

TEST(ModuleHost, LoadsAGoodModule) {
    pvc::ModuleHost host(modules("good"), quiet());
    auto& m = host.load_file(pvc::module_file(modules("good"), "hypervisor"));
    EXPECT_EQ(m.name(), "hypervisor");
    EXPECT_EQ(host.modules().size(), 1u);
}

TEST(ModuleHost, RefusesAModuleWithAnotherAbi) {
    pvc::ModuleHost host(modules("badabi"), quiet());
    try {
        host.load(config(true));
        FAIL() << "a module with another ABI was accepted";
    } catch (const pvc::ModuleLoadError& e) {
        EXPECT_NE(std::string(e.what()).find("ABI"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(host.modules().empty());
}

TEST(ModuleHost, MissingEnabledModuleIsAnErrorNamingItsFlag) {
    pvc::test::TempDir empty("nomods");
    pvc::ModuleHost host(empty.path(), quiet());
    try {
        host.load(config(true));
        FAIL() << "a missing enabled module was accepted";
    } catch (const pvc::ModuleLoadError& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("enable_hypervisor"), std::string::npos) << what;
        EXPECT_NE(what.find("libpvc-module-hypervisor.so"), std::string::npos) << what;
    }
}

TEST(ModuleHost, DisabledModuleIsNeverOpened) {
    // The badabi dir holds a hypervisor module that would be refused if opened.
    pvc::ModuleHost host(modules("badabi"), quiet());
    EXPECT_NO_THROW(host.load(config(false)));
    EXPECT_TRUE(host.modules().empty());
}

TEST(ModuleHost, FencingIsLoadedWheneverInstalled) {
    pvc::ModuleHost host(modules("good"), quiet());
    host.load(config(false));
    ASSERT_EQ(host.modules().size(), 1u);
    EXPECT_EQ(host.modules()[0]->name(), "fencing");
}

TEST(ModuleHost, StartedModuleGetsAWorkingContext) {
    pvc::test::ZkServer server;
    auto zk = pvc::zk::Session::connect({server.hosts()});
    pvc::init_cluster(*zk);
    zk->create(pvc::schema::path("node.name", {"hv1"}), "hypervisor");
    zk->create(pvc::schema::path("node.count.networks", {"hv1"}), "0");

    auto cfg = config(true, server.hosts());
    pvc::ModuleHost host(modules("good"), quiet());
    host.load(cfg);
    ASSERT_EQ(host.modules().size(), 2u);
    pvc::Executor ex(1);
    pvc::CoreEvents events;
    pvc::ServiceRegistry services;
    host.start_all(cfg, pvc::make_log_sink(nullptr), zk, ex, events, services);
    EXPECT_EQ(zk->get(pvc::schema::path("node.count.networks", {"hv1"})).value_or(""), "42");
    host.stop_all();
    ex.stop_pool();
}

TEST(ModuleHost, StartThatThrowsNamesTheModuleAndItsReason) {
    pvc::test::ZkServer server;
    auto zk = pvc::zk::Session::connect({server.hosts()});
    auto cfg = config(true, server.hosts());
    pvc::ModuleHost host(modules("startfails"), quiet());
    host.load(cfg);
    ASSERT_EQ(host.modules().size(), 1u);
    pvc::Executor ex(1);
    pvc::CoreEvents events;
    pvc::ServiceRegistry services;
    try {
        host.start_all(cfg, pvc::make_log_sink(nullptr), zk, ex, events, services);
        FAIL() << "a module whose start() throws was reported started";
    } catch (const pvc::ModuleStartError& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("module hypervisor failed to start"), std::string::npos) << what;
        EXPECT_NE(what.find("its dependency is unusable"), std::string::npos) << what;
    }
    EXPECT_NO_THROW(host.stop_all());
    ex.stop_pool();
}

}  // namespace
