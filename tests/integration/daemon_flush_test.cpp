// pvcnoded's shutdown with a flush of its node in progress (the shutdown's
// first step): the daemon waits for the flush to end before it lets go, and
// keeps proving liveness meanwhile. A real daemon with the hypervisor module
// on libvirt's test driver; the flush's target is a registered node without
// a daemon, and the test holds the VM's state lock, so the VM's migration
// cannot begin and the flush stays in progress as long as the test wants.
#include <csignal>

#include <gtest/gtest.h>

#include "pvc/client.hpp"
#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

using namespace std::chrono_literals;
using pvc::schema::path;
using pvc::test::eventually;
using pvc::test::slurp;

namespace {

const std::string kUuid = "5a0e1d2c-0000-4000-8000-00000000f1a5";

std::string test_vm_xml(const std::string& name, const std::string& uuid) {
    return "<domain type='test'><name>" + name + "</name><uuid>" + uuid +
           "</uuid><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os>"
           "<devices><console type='pty'/></devices></domain>";
}

class DaemonFlush : public ::testing::Test {
protected:
    void SetUp() override {
        zk = pvc::zk::Session::connect({.hosts = server.hosts()});
        pvc::init_cluster(*zk);
        // hv2: a ready node without a daemon, the flush's only target.
        ASSERT_TRUE(zk->write({{path("node.name", {"hv2"}), "hypervisor"}}));
        ASSERT_TRUE(zk->write({{path("node.state.daemon", {"hv2"}), "run"},
                               {path("node.state.domain", {"hv2"}), "ready"},
                               {path("node.memory.free", {"hv2"}), "100000"}}));
        o.node = "hv1";
        o.coordinators = "[hv1:" + server.hosts().substr(server.hosts().rfind(':') + 1) + "]";
        o.base_dir = dir.path() / "hv1";
        o.module_dir = pvc::test::build_dir() + "/modules";
        o.enable_hypervisor = true;
        o.extra_system_yaml = "    hypervisor:\n      libvirt_uri: \"test:///default\"\n";
        d = std::make_unique<pvc::test::DaemonProcess>("hv1", pvc::test::write_node_config(o), o.base_dir / "out.log");
        ASSERT_TRUE(eventually([&] { return value(path("node.state.daemon", {"hv1"})) == "run"; }, 30s)) << log();
    }
    std::string value(const std::string& p) { return zk->get(p).value_or("<absent>"); }
    std::string log() { return slurp(o.base_dir / "out.log") + slurp(o.base_dir / "out.log.err"); }

    pvc::test::ZkServer server;
    pvc::test::TempDir dir{"pvc-flush"};
    std::shared_ptr<pvc::zk::Session> zk;
    pvc::test::NodeConfigOptions o;
    std::unique_ptr<pvc::test::DaemonProcess> d;
};

TEST_F(DaemonFlush, ShutdownWaitsForAFlushInProgressAndKeepsTheKeepalive) {
    pvc::client::VmDefinition vm;
    vm.uuid = kUuid;
    vm.name = "flushme";
    vm.xml = test_vm_xml(vm.name, vm.uuid);
    vm.node = "hv1";
    vm.migrate_method = "live";
    ASSERT_TRUE(pvc::client::define_vm(*zk, vm));
    ASSERT_TRUE(zk->write({{path("domain.state", {kUuid}), "start"}}));
    ASSERT_TRUE(eventually([&] { return value(path("node.running_domains", {"hv1"})).find(kUuid) != std::string::npos; },
                           20s))
        << log();

    // The VM's state lock held: its migration, once asked, cannot begin.
    auto held = std::make_unique<pvc::zk::Lock>(zk, path("domain.state", {kUuid}), pvc::zk::LockKind::exclusive);
    ASSERT_TRUE(held->acquire(30s));
    ASSERT_TRUE(pvc::client::set_node_domain_state(*zk, "hv1", "flush"));
    ASSERT_TRUE(eventually([&] { return value(path("domain.node", {kUuid})) == "hv2"; }, 20s)) << log();
    ASSERT_EQ(value(path("node.state.domain", {"hv1"})), "flush");

    d->signal(SIGTERM);
    ASSERT_TRUE(eventually([&] {
        return log().find("Waiting for the flush of this node in progress to complete before shutdown") != std::string::npos;
    }, 10s)) << log();
    // Still there, in shutdown, its keepalive advancing, the flush untouched.
    std::string ka = value(path("node.keepalive", {"hv1"}));
    std::this_thread::sleep_for(3s);
    EXPECT_TRUE(d->running()) << log();
    EXPECT_EQ(value(path("node.state.daemon", {"hv1"})), "shutdown");
    EXPECT_EQ(value(path("node.state.domain", {"hv1"})), "flush");
    EXPECT_NE(value(path("node.keepalive", {"hv1"})), ka) << "the keepalive stopped during the wait";

    // The operator cancels the flush: the unflush brings the VM back, the node
    // ends ready, and only then does the daemon stop.
    ASSERT_TRUE(pvc::client::set_node_domain_state(*zk, "hv1", "unflush"));
    held.reset();
    int status = d->wait(60s);
    EXPECT_EQ(status, 0) << log();
    EXPECT_EQ(value(path("node.state.domain", {"hv1"})), "ready") << log();
    EXPECT_EQ(value(path("node.state.daemon", {"hv1"})), "stop");
    EXPECT_NE(log().find("The flush of this node ended (domain state ready); shutting down"), std::string::npos) << log();
}

}  // namespace
