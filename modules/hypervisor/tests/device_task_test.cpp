// The node tasks vm.device_attach and vm.device_detach, run by a real task
// runner against a real ZooKeeper and libvirt's test driver (its domain
// `test` runs from the start). The test driver cannot hot-plug
// (virDomainAttachDeviceFlags is not supported there), so a task that
// reaches libvirt ends with libvirt's own refusal: what a real QEMU guest
// accepts is the e2e lab's to show.
#include <gtest/gtest.h>

#include "device_task.hpp"
#include "libvirt.hpp"
#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/tasks.hpp"
#include "pvc/test/zk_server.hpp"

using namespace std::chrono_literals;
using pvc::schema::path;
using pvc::test::eventually;
namespace tasks = pvc::tasks;

namespace {

constexpr const char* kTestUuid = "6695eb01-f6a4-8304-79aa-97f2502e193f";  // the test driver's `test`
constexpr const char* kDisk =
    "<disk type='file' device='disk'><source file='/nonexistent.img'/><target dev='vdb' bus='virtio'/></disk>";

TEST(DeviceTask, AttachAndDetachReachTheVmsLibvirtOnlyWhenItRuns) {
    pvc::test::ZkServer zk;
    auto session = pvc::zk::Session::connect({zk.hosts()});
    pvc::init_cluster(*session);
    std::string node = pvc::test::unique_name("hv");
    session->ensure_path(path("node.name", {node}));
    session->write({{path("domain.name", {kTestUuid}), "test"},
                    {path("domain.state", {kTestUuid}), "stop"},
                    {path("domain.node", {kTestUuid}), node}});
    pvc::hv::Connection lv("test:///default", pvc::Logger());
    auto runner = std::make_shared<tasks::Runner>(pvc::zk::Session::connect({zk.hosts()}), node, pvc::Logger());
    auto attach = runner->handle("vm.device_attach", pvc::hv::device_task(session, lv, true));
    auto detach = runner->handle("vm.device_detach", pvc::hv::device_task(session, lv, false));
    runner->start();
    auto run = [&](const std::string& name, const std::string& vm) {
        auto q = tasks::submit(*session, name, node, {{"domain", vm}, {"xml", kDisk}});
        tasks::Progress p;
        eventually([&] {
            p = tasks::progress(*session, q.id);
            return p.state == tasks::success || p.state == tasks::failure;
        }, 30s);
        return p;
    };
    // Not running: refused before libvirt is asked.
    auto p = run("vm.device_attach", "test");
    EXPECT_EQ(p.state, tasks::failure);
    EXPECT_EQ(p.status, "TaskFailure: VM test not in start state; hot-attach unnecessary or impossible");
    p = run("vm.device_detach", kTestUuid);
    EXPECT_EQ(p.status, std::string("TaskFailure: VM ") + kTestUuid +
                            " not in start state; hot-detach unnecessary or impossible");
    // Running: the device goes to libvirt, whose answer is the task's.
    session->write(path("domain.state", {kTestUuid}), "start");
    p = run("vm.device_attach", "test");
    EXPECT_EQ(p.state, tasks::failure);
    EXPECT_NE(p.status.find("virDomainAttachDevice"), std::string::npos) << p.status;
    p = run("vm.device_detach", "test");
    EXPECT_NE(p.status.find("virDomainDetachDevice"), std::string::npos) << p.status;
    // A VM this node's libvirt does not know.
    std::string other = "0e0e0e0e-0000-4000-8000-000000000001";
    session->write({{path("domain.name", {other}), "ghost"},
                    {path("domain.state", {other}), "start"},
                    {path("domain.node", {other}), node}});
    p = run("vm.device_attach", "ghost");
    EXPECT_EQ(p.status, "TaskFailure: Failed to find Libvirt object for VM ghost");
    runner->stop();
}

}  // namespace
