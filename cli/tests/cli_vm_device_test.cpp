// `pvc vm network add|remove` and `pvc vm volume add|remove` against a real
// ZooKeeper and a real task runner for hv1 in this process (handlers standing
// in for the hypervisor module's vm.device_attach/detach, recording the
// device XML they get): the stored XML and rbdlist, the hot-plug task and its
// failure, the refusals. What a real guest does with the device is
// e2e-hypervisor_device_test's.
#include <gtest/gtest.h>

#include <mutex>

#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/tasks.hpp"
#include "pvc/test/zk_server.hpp"

using namespace std::chrono_literals;
using pvc::schema::path;

namespace {

constexpr const char* kUuid = "c1200000-0000-4000-8000-000000000001";
constexpr const char* kXml = R"(<domain type="kvm">
  <name>web1</name>
  <uuid>c1200000-0000-4000-8000-000000000001</uuid>
  <description>Café &amp; bar</description>
  <memory unit="MiB">512</memory>
  <vcpu>1</vcpu>
  <os><type arch="x86_64" machine="pc">hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type="network" device="disk">
      <driver name="qemu" discard="unmap"/>
      <auth username="libvirt"><secret type="ceph" uuid="a5f3c1b2-0000-4000-8000-00000000cafe"/></auth>
      <source protocol="rbd" name="vms/web1_disk0"><host name="10.0.0.1" port="6789"/></source>
      <target dev="sda" bus="scsi"/>
      <address type="drive" controller="0" bus="0" target="0" unit="0"/>
    </disk>
    <interface type="bridge"><mac address="52:54:00:00:00:01"/><source bridge="vmbr10"/><model type="virtio"/></interface>
    <console type="pty"/>
  </devices>
</domain>
)";

class PvcVmDevice : public ::testing::Test {
protected:
    void SetUp() override {
        zk = pvc::zk::Session::connect({server.hosts()});
        pvc::init_cluster(*zk);
        zk->ensure_path(path("node.name", {"hv1"}));
        zk->write({{path("domain.name", {kUuid}), "web1"},
                   {path("domain.xml", {kUuid}), kXml},
                   {path("domain.state", {kUuid}), "start"},
                   {path("domain.node", {kUuid}), "hv1"},
                   {path("domain.storage.volumes", {kUuid}), "vms/web1_disk0"}});
        runner = std::make_shared<pvc::tasks::Runner>(pvc::zk::Session::connect({server.hosts()}), "hv1",
                                                      pvc::Logger());
        auto handler = [this](bool attach) {
            return [this, attach](pvc::services::TaskRun& run) -> std::string {
                std::string xml = run.kwargs().value("xml", "");
                std::lock_guard g(m);
                (attach ? attached : detached).push_back(run.kwargs().value("domain", "") + " " + xml);
                if (xml.find("vmbr666") != std::string::npos)
                    throw pvc::services::TaskFailure("Cannot get interface MTU on 'vmbr666': No such device");
                return attach ? "Successfully hot-attached XML device to VM web1"
                              : "Successfully hot-detached XML device from VM web1";
            };
        };
        handles.push_back(runner->handle("vm.device_attach", handler(true)));
        handles.push_back(runner->handle("vm.device_detach", handler(false)));
        runner->start();
    }
    void TearDown() override { runner->stop(); }

    pvc::test::ProcResult pvc(std::vector<std::string> args) {
        std::vector<std::string> argv = {PVC_CLI_BINARY, "--zookeeper", server.hosts()};
        argv.insert(argv.end(), args.begin(), args.end());
        return pvc::test::run_command(argv, 60s);
    }
    std::string xml() { return zk->get(path("domain.xml", {kUuid})).value_or(""); }
    std::vector<std::string> got(bool attach) {
        std::lock_guard g(m);
        return attach ? attached : detached;
    }

    pvc::test::ZkServer server;
    std::shared_ptr<pvc::zk::Session> zk;
    std::shared_ptr<pvc::tasks::Runner> runner;
    std::vector<std::shared_ptr<void>> handles;
    std::mutex m;
    std::vector<std::string> attached, detached;
};

TEST_F(PvcVmDevice, NetworkAddAndRemoveStoreTheNicAndHotPlugIt) {
    auto r = pvc({"vm", "network", "add", "web1", "100"});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "pvc: error: Network 100 is not present in the cluster.\n");
    EXPECT_EQ(xml(), kXml);
    zk->ensure_path(path("network.vni", {"100"}));
    r = pvc({"vm", "network", "add", "web1", "100", "--macaddr", "zz:54:00:12:34:56"});
    EXPECT_EQ(r.status, 2) << r.err;

    r = pvc({"vm", "network", "add", "web1", "100", "--macaddr", "52:54:00:12:34:56"});
    ASSERT_EQ(r.status, 0) << r.err << r.out;
    EXPECT_NE(r.out.find("Network 100 (MAC 52:54:00:12:34:56) added to VM web1's configuration and hot-attached"),
              std::string::npos)
        << r.out;
    const std::string nic = R"(<interface type="bridge"><mac address="52:54:00:12:34:56"/><source bridge="vmbr100"/>)"
                            R"(<model type="virtio"/></interface>)";
    // After the existing NIC, the rest of the document as it was.
    std::string want = kXml;
    std::string after = R"(<model type="virtio"/></interface>)";
    want.insert(want.find(after) + after.size(), nic);
    EXPECT_EQ(xml(), want);
    ASSERT_EQ(got(true).size(), 1u);
    EXPECT_EQ(got(true)[0], "web1 " + nic);

    r = pvc({"vm", "network", "add", "web1", "100"});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "pvc: error: Network '100' is already configured for VM 'web1'.\n");

    r = pvc({"vm", "network", "remove", "web1", "100"});
    ASSERT_EQ(r.status, 0) << r.err << r.out;
    EXPECT_NE(r.out.find("hot-detached from the running VM"), std::string::npos) << r.out;
    EXPECT_EQ(xml(), kXml);
    ASSERT_EQ(got(false).size(), 1u);
    EXPECT_EQ(got(false)[0], "web1 " + nic);
    r = pvc({"vm", "network", "remove", "web1", "100"});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "pvc: error: Network 100 is not configured for VM 'web1'.\n");
    // By MAC, without hot-plug.
    r = pvc({"vm", "network", "remove", kUuid, "--macaddr", "52:54:00:00:00:01", "--no-live"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(xml().find("vmbr10\""), std::string::npos) << xml();
    EXPECT_EQ(got(false).size(), 1u);
}

TEST_F(PvcVmDevice, AFailedHotPlugExitsOneWithTheTasksStatusAndKeepsTheStoredChange) {
    zk->ensure_path(path("network.vni", {"666"}));
    auto r = pvc({"vm", "network", "add", "web1", "666"});
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.err.find("hot-attaching it failed"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("TaskFailure: Cannot get interface MTU on 'vmbr666': No such device"), std::string::npos)
        << r.err;
    EXPECT_NE(xml().find("vmbr666"), std::string::npos);
    // A VM that does not run: stored only, no task.
    zk->write(path("domain.state", {kUuid}), "stop");
    zk->ensure_path(path("network.vni", {"200"}));
    r = pvc({"vm", "network", "add", "web1", "200"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("is not running (state stop), nothing to hot-plug"), std::string::npos) << r.out;
    EXPECT_NE(xml().find("vmbr200"), std::string::npos);
    EXPECT_EQ(got(true).size(), 1u);
    r = pvc({"vm", "network", "add", "nosuchvm", "200"});
    EXPECT_EQ(r.status, 1);
}

TEST_F(PvcVmDevice, VolumeAddCopiesTheRbdDiskAndRemoveTakesItOut) {
    auto r = pvc({"vm", "volume", "add", "web1", "vms/web1_data"});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "pvc: error: Volume vms/web1_data is not present in the cluster.\n");
    r = pvc({"vm", "volume", "add", "web1", "web1_data"});
    EXPECT_EQ(r.status, 2);
    zk->ensure_path(path("volume.name", {"vms", "web1_data"}));
    r = pvc({"vm", "volume", "add", "web1", "vms/web1_data", "--disk-id", "sda"});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "pvc: error: Manually specified disk ID sda is already in use for VM web1.\n");

    r = pvc({"vm", "volume", "add", "web1", "vms/web1_data"});
    ASSERT_EQ(r.status, 0) << r.err << r.out;
    EXPECT_NE(r.out.find("Volume vms/web1_data (sdb) added"), std::string::npos) << r.out;
    const std::string disk = R"(<disk type="network" device="disk">
      <driver name="qemu" discard="unmap"/>
      <auth username="libvirt"><secret type="ceph" uuid="a5f3c1b2-0000-4000-8000-00000000cafe"/></auth>
      <source protocol="rbd" name="vms/web1_data"><host name="10.0.0.1" port="6789"/></source>
      <target dev="sdb" bus="scsi"/>
    </disk>)";
    EXPECT_NE(xml().find("</disk>" + disk), std::string::npos) << xml();
    EXPECT_EQ(zk->get(path("domain.storage.volumes", {kUuid})).value_or(""), "vms/web1_disk0,vms/web1_data");
    ASSERT_EQ(got(true).size(), 1u);
    EXPECT_EQ(got(true)[0], "web1 " + disk);
    r = pvc({"vm", "volume", "add", "web1", "vms/web1_data"});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "pvc: error: Volume vms/web1_data is already configured for VM web1.\n");

    // A file, stored only: the next free target of the first disk's prefix.
    r = pvc({"vm", "volume", "add", "web1", "/srv/scratch.img", "--type", "file", "--bus", "virtio", "--no-live"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("applies at the VM's next start"), std::string::npos) << r.out;
    EXPECT_NE(xml().find(R"(<disk type="file" device="disk"><driver name="qemu" type="raw"/>)"
                         R"(<source file="/srv/scratch.img"/><target dev="sdc" bus="virtio"/></disk>)"),
              std::string::npos)
        << xml();
    EXPECT_EQ(got(true).size(), 1u);

    r = pvc({"vm", "volume", "remove", "web1", "vms/web1_data"});
    ASSERT_EQ(r.status, 0) << r.err << r.out;
    EXPECT_EQ(xml().find("web1_data"), std::string::npos) << xml();
    EXPECT_EQ(zk->get(path("domain.storage.volumes", {kUuid})).value_or(""), "vms/web1_disk0");
    ASSERT_EQ(got(false).size(), 1u);
    EXPECT_EQ(got(false)[0], "web1 " + disk);
    r = pvc({"vm", "volume", "remove", "web1", "/srv/scratch.img", "--no-live"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(xml().find("scratch"), std::string::npos) << xml();
    r = pvc({"vm", "volume", "remove", "web1", "vms/nothing"});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "pvc: error: Volume vms/nothing is not configured for VM web1.\n");
}

}  // namespace
