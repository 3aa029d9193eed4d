// The out-of-tree example module (examples/module-hello), built against a
// staged install of the SDK by integration-example-module-build, loaded by a
// real pvcnoded against a real ZooKeeper: the core knows nothing of it but
// its flag in the config.
#include <algorithm>
#include <csignal>
#include <fstream>

#include <gtest/gtest.h>

#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

using namespace std::chrono_literals;
using pvc::test::slurp;

namespace {

std::filesystem::path hello_so() {
    return std::filesystem::path(pvc::test::build_dir()) / "example-module-hello" / "build" / "libpvc-module-hello.so";
}

class ExampleModuleTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(std::filesystem::exists(hello_so())) << hello_so() << ": run integration-example-module-build";
        zk = pvc::zk::Session::connect({server.hosts()});
        pvc::init_cluster(*zk);
        std::filesystem::create_directories(modules);
        std::filesystem::copy_file(hello_so(), modules / hello_so().filename());
    }
    pvc::test::NodeConfigOptions options(bool hello_on) {
        pvc::test::NodeConfigOptions o;
        o.node = "hv1";
        o.coordinators = "[hv1:" + std::to_string(server.port()) + "]";
        o.base_dir = dir.path() / "hv1";
        o.module_dir = modules;
        o.keepalive_interval = 1;
        o.extra_functions_yaml = hello_on ? "    enable_hello: true\n" : "";
        return o;
    }
    std::string hello() { return zk->get(pvc::schema::path("node.name", {"hv1"}) + "/hello").value_or("<absent>"); }

    pvc::test::ZkServer server;
    pvc::test::TempDir dir{"example"};
    std::filesystem::path modules = dir.path() / "modules";
    std::shared_ptr<pvc::zk::Session> zk;
};

// Keepalive contribution and event subscription: the key is written in each
// keepalive and counts the keepalive ticks the module was told about.
TEST_F(ExampleModuleTest, LoadedByItsFlagContributesToTheKeepaliveAndCountsTicks) {
    auto o = options(true);
    auto cfg = pvc::test::write_node_config(o);
    pvc::test::DaemonProcess d("hv1", cfg, o.base_dir / "out.log");
    ASSERT_TRUE(pvc::test::eventually([&] { return hello().find("after 3 keepalives") != std::string::npos; }, 30s))
        << hello() << "\n" << slurp(o.base_dir / "out.log") << slurp(o.base_dir / "out.log.err");
    EXPECT_EQ(hello().rfind("hello from hv1 after ", 0), 0u) << hello();
    d.signal(SIGTERM);
    EXPECT_EQ(d.wait(20s), 0);
    auto log = slurp(o.base_dir / "log" / "pvc.log");
    EXPECT_NE(log.find("Loaded module hello 1.0.0 (enable_hello)"), std::string::npos) << log;
    EXPECT_NE(log.find("hello module started on hv1"), std::string::npos) << log;
    EXPECT_NE(log.find("Modules loaded from " + modules.string() + ": hello (enable_hello)"), std::string::npos) << log;
}

// The module reads its own key (Module::configure): the greeting configured
// is the one it writes.
TEST_F(ExampleModuleTest, ItsOwnConfigKeyIsUsed) {
    auto o = options(true);
    auto cfg = pvc::test::write_node_config(o);
    std::ofstream(cfg, std::ios::app) << "  hello:\n    greeting: good morning\n";
    pvc::test::DaemonProcess d("hv1", cfg, o.base_dir / "out.log");
    ASSERT_TRUE(pvc::test::eventually([&] { return hello().find("after 1 keepalives") != std::string::npos; }, 30s))
        << hello() << "\n" << slurp(o.base_dir / "out.log") << slurp(o.base_dir / "out.log.err");
    EXPECT_EQ(hello().rfind("good morning from hv1 after ", 0), 0u) << hello();
    d.signal(SIGTERM);
    EXPECT_EQ(d.wait(20s), 0);
}

// A bad value of the module's key is reported by `pvcnoded --check-config`
// with the core's problems, with its YAML path and line, and exits 78.
TEST_F(ExampleModuleTest, CheckConfigPrintsItsProblemWithPathAndLine) {
    auto o = options(true);
    auto cfg = pvc::test::write_node_config(o);
    std::string text = slurp(cfg);
    int line = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 2;  // the greeting's line
    std::ofstream(cfg, std::ios::app) << "  hello:\n    greeting: \"\"\n";
    auto r = pvc::test::run_command({pvc::test::pvcnoded_binary(), "--check-config", cfg.string()});
    EXPECT_EQ(r.status, 78) << r.out << r.err;
    EXPECT_NE((r.out + r.err).find(":" + std::to_string(line) + ": pvc.hello.greeting: expected a greeting of 1 to 64 characters"),
              std::string::npos)
        << r.out << r.err;

    // Valid: accepted.
    auto good = pvc::test::write_node_config(o);
    std::ofstream(good, std::ios::app) << "  hello:\n    greeting: hi\n";
    auto ok = pvc::test::run_command({pvc::test::pvcnoded_binary(), "--check-config", good.string()});
    EXPECT_EQ(ok.status, 0) << ok.out << ok.err;
}

TEST_F(ExampleModuleTest, NotLoadedWhenItsFlagIsOff) {
    auto o = options(false);
    auto cfg = pvc::test::write_node_config(o);
    pvc::test::DaemonProcess d("hv1", cfg, o.base_dir / "out.log");
    ASSERT_TRUE(pvc::test::eventually(
        [&] { return zk->get(pvc::schema::path("node.state.daemon", {"hv1"})).value_or("") == "run"; }, 15s))
        << slurp(o.base_dir / "out.log");
    d.signal(SIGTERM);
    EXPECT_EQ(d.wait(20s), 0);
    EXPECT_EQ(hello(), "<absent>");
    EXPECT_EQ(slurp(o.base_dir / "log" / "pvc.log").find("Loaded module hello"), std::string::npos);
}

}  // namespace
