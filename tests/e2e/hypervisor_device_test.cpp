// Device hot-plug on a REAL running guest through the node task queue: `pvc vm
// network add|remove` and `pvc vm volume add|remove` (default --live) change
// the VM's stored XML and have the node's pvcnoded run vm.device_attach /
// vm.device_detach against its libvirtd. The guest is a Debian kernel with a
// busybox initramfs (tools/lab/guest.sh) that stays up; its kernel handles
// ACPI PCI hot-plug, so a detached device really leaves (QEMU waits for the
// guest's eject). Failures (absent VM, VM not running, a device libvirt
// refuses) end the task FAILURE with a clear status.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <libvirt/virterror.h>

#include "lab.hpp"
#include "pvc/schema.hpp"
#include "pvc/strings.hpp"
#include "pvc/tasks.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using pvc::schema::path;
using pvc::trim;
using pvc::e2e::Client;
using pvc::e2e::Lab;
using pvc::e2e::NodeView;
using pvc::e2e::since;
using pvc::e2e::wait_for;
namespace tasks = pvc::tasks;

constexpr const char* kMac = "52:54:00:e2:e0:01";

fs::path source_dir() {
    const char* s = std::getenv("PVC_SOURCE_DIR");
    return s && *s ? s : PVC_TEST_SOURCE_DIR;
}
fs::path build_dir() {
    const char* b = std::getenv("PVC_BUILD_DIR");
    return b && *b ? b : PVC_TEST_BUILD_DIR;
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// A guest that stays up (guest.sh's poweroff comes after `delay` seconds).
std::string guest_xml(const std::string& type, const std::string& name, const std::string& uuid,
                      const fs::path& console_dir, const std::string& kernel, const std::string& initrd,
                      const std::string& cmdline) {
    std::ostringstream x;
    x << "<domain type='" << type << "'>\n"
      << "  <name>" << name << "</name>\n"
      << "  <uuid>" << uuid << "</uuid>\n"
      << "  <memory unit='MiB'>128</memory>\n"
      << "  <vcpu>1</vcpu>\n"
      << "  <os>\n"
      << "    <type arch='x86_64' machine='pc'>hvm</type>\n"
      << "    <kernel>" << kernel << "</kernel>\n"
      << "    <initrd>" << initrd << "</initrd>\n"
      << "    <cmdline>" << cmdline << "</cmdline>\n"
      << "  </os>\n"
      << "  <features><acpi/></features>\n"
      << "  <on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot><on_crash>restart</on_crash>\n"
      << "  <devices>\n"
      << "    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n"
      << "    <serial type='pty'><log file='" << (console_dir / (name + ".log")).string()
      << "' append='on'/><target port='0'/></serial>\n"
      << "    <console type='pty'><target type='serial' port='0'/></console>\n"
      << "    <memballoon model='none'/>\n"
      << "  </devices>\n"
      << "</domain>\n";
    return x.str();
}

class DeviceHotplug : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        try {
            lab_ = std::make_unique<Lab>(pvc::e2e::LabOptions{{1}, 3, 5});
        } catch (const std::exception& e) {
            setup_error_ = e.what();
        }
    }
    static void TearDownTestSuite() { lab_.reset(); }

    void SetUp() override {
        ASSERT_TRUE(lab_) << "lab did not come up: " << setup_error_;
        client_ = std::make_unique<Client>(lab_->zk());
        view_ = std::make_unique<NodeView>(lab_->libvirt_uri(1));
        conn_ = virConnectOpen(lab_->libvirt_uri(1).c_str());
        ASSERT_NE(conn_, nullptr);
        pvc_ = (build_dir() / "bin" / "pvc").string();
        ASSERT_TRUE(fs::exists(pvc_)) << "pvc not built: " << pvc_;
    }
    void TearDown() override {
        if (HasFailure() && lab_) std::cerr << lab_->all_daemon_logs();
        for (const auto& u : defined_)
            if (lab_->zk()->get(path("domain.state", {u})).value_or("") == "start") {
                client_->change_state(u, "stop");
                wait_for([&] { return !view_->running(u); }, 30s);
            }
        if (conn_) virConnectClose(conn_);
    }

    std::string guest_sh(const std::vector<std::string>& args) {
        std::vector<std::string> argv{(source_dir() / "tools" / "lab" / "guest.sh").string()};
        argv.insert(argv.end(), args.begin(), args.end());
        auto r = pvc::e2e::run(argv);
        EXPECT_EQ(r.status, 0) << "guest.sh " << args.front() << ": " << r.output;
        std::string out = trim(r.output);
        return out.substr(out.find_last_of('\n') + 1);
    }

    // `pvc --zookeeper <lab> args...`; a task it follows is waited for 120 s at most.
    pvc::e2e::CommandResult pvc(const std::vector<std::string>& args) {
        std::vector<std::string> argv{pvc_, "--zookeeper", lab_->zk_hosts(), "--timeout", "120"};
        argv.insert(argv.end(), args.begin(), args.end());
        return pvc::e2e::run(argv);
    }

    // The running domain's XML on hv1 ("" when not there).
    std::string live_xml(const std::string& uuid) {
        virDomainPtr d = virDomainLookupByUUIDString(conn_, uuid.c_str());
        if (!d) return "";
        char* x = virDomainGetXMLDesc(d, 0);
        virDomainFree(d);
        std::string s = x ? x : "";
        free(x);
        return s;
    }
    std::string stored_xml(const std::string& uuid) { return client_->get("domain.xml", uuid); }

    // Defines a staying-up guest and, with `start`, waits until its kernel runs /init.
    std::string guest(const std::string& name, bool start) {
        fs::path dir = lab_->console_dir().parent_path();
        std::string initrd = (dir / "device-guest-initrd.img").string();
        if (!fs::exists(initrd)) guest_sh({"initramfs", initrd, "600"});
        std::string type = guest_sh({"accel", initrd});
        std::string uuid = pvc::e2e::random_uuid();
        client_->define(uuid, name,
                        guest_xml(type, name, uuid, lab_->console_dir(), guest_sh({"kernel"}), initrd,
                                  guest_sh({"cmdline"})),
                        "hv1");
        defined_.push_back(uuid);
        if (!start) return uuid;
        auto t0 = std::chrono::steady_clock::now();
        client_->change_state(uuid, "start");
        fs::path console = lab_->console_dir() / (name + ".log");
        EXPECT_TRUE(wait_for([&] { return slurp(console).find("pvc-guest: up") != std::string::npos; }, 120s))
            << "guest never came up; console:\n" << slurp(console);
        std::cout << "guest " << name << " (" << type << ") up in " << since(t0) << " s" << std::endl;
        return uuid;
    }

    tasks::Progress task(const std::string& name, const std::string& vm, const std::string& xml) {
        auto q = tasks::submit(*lab_->zk(), name, "hv1", {{"domain", vm}, {"xml", xml}});
        tasks::Progress p;
        EXPECT_TRUE(wait_for([&] {
            p = tasks::progress(*lab_->zk(), q.id);
            return p.state == tasks::success || p.state == tasks::failure;
        }, 60s, 50ms)) << "task " << q.id << " did not end: " << p.state << " " << p.status;
        return p;
    }

    static inline std::unique_ptr<Lab> lab_;
    static inline std::string setup_error_;
    std::unique_ptr<Client> client_;
    std::unique_ptr<NodeView> view_;
    virConnectPtr conn_ = nullptr;
    std::string pvc_;
    std::vector<std::string> defined_;
};

TEST_F(DeviceHotplug, NicAndDiskAttachedAndDetachedLiveThroughTasks) {
    // The bridge of network 100 on hv1 (the network module is not loaded in this lab) and the network's key.
    auto br = lab_->in_node(1, {"sh", "-c", "ip link add vmbr100 type bridge 2>/dev/null; ip link set vmbr100 up"});
    ASSERT_EQ(br.status, 0) << br.output;
    lab_->zk()->ensure_path(path("network.vni", {"100"}));
    fs::path disk = lab_->console_dir().parent_path() / "device-disk.img";
    {
        std::ofstream f(disk);
        f.close();
        fs::resize_file(disk, 16 << 20);
    }
    std::string uuid = guest("e2e-dev1", true);
    auto t0 = std::chrono::steady_clock::now();

    auto r = pvc({"vm", "network", "add", "e2e-dev1", "100", "--macaddr", kMac});
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("hot-attached"), std::string::npos) << r.output;
    EXPECT_NE(live_xml(uuid).find(kMac), std::string::npos) << live_xml(uuid);
    EXPECT_NE(live_xml(uuid).find("vmbr100"), std::string::npos);
    EXPECT_NE(stored_xml(uuid).find(kMac), std::string::npos) << stored_xml(uuid);
    std::cout << "NIC attached (" << since(t0) << " s)" << std::endl;

    r = pvc({"vm", "volume", "add", "e2e-dev1", disk.string(), "--type", "file", "--bus", "virtio"});
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(live_xml(uuid).find(disk.string()), std::string::npos) << live_xml(uuid);
    EXPECT_NE(stored_xml(uuid).find(disk.string()), std::string::npos) << stored_xml(uuid);
    EXPECT_NE(stored_xml(uuid).find("dev=\"vda\""), std::string::npos) << stored_xml(uuid);
    std::cout << "disk attached (" << since(t0) << " s)" << std::endl;

    // A second NIC on the same network is refused before anything changes.
    r = pvc({"vm", "network", "add", "e2e-dev1", "100"});
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("already configured"), std::string::npos) << r.output;

    // Detach: the guest's kernel ejects the PCI device, then libvirt drops it from the live XML.
    r = pvc({"vm", "network", "remove", "e2e-dev1", "100"});
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("hot-detached"), std::string::npos) << r.output;
    EXPECT_EQ(stored_xml(uuid).find(kMac), std::string::npos) << stored_xml(uuid);
    EXPECT_TRUE(wait_for([&] { return live_xml(uuid).find(kMac) == std::string::npos; }, 60s)) << live_xml(uuid);
    std::cout << "NIC detached (" << since(t0) << " s)" << std::endl;

    r = pvc({"vm", "volume", "remove", "e2e-dev1", disk.string()});
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(stored_xml(uuid).find(disk.string()), std::string::npos) << stored_xml(uuid);
    EXPECT_TRUE(wait_for([&] { return live_xml(uuid).find(disk.string()) == std::string::npos; }, 60s))
        << live_xml(uuid);
    std::cout << "disk detached (" << since(t0) << " s)" << std::endl;
    EXPECT_TRUE(view_->running(uuid));
}

TEST_F(DeviceHotplug, FailuresEndTheTaskWithAClearStatus) {
    const std::string nic = std::string("<interface type='bridge'><mac address='") + kMac +
                            "'/><source bridge='vmbr100'/><model type='virtio'/></interface>";
    // An absent VM.
    auto p = task("vm.device_attach", "e2e-nosuchvm", nic);
    EXPECT_EQ(p.state, tasks::failure);
    EXPECT_EQ(p.status, "TaskFailure: Could not find VM e2e-nosuchvm in the cluster");
    // A VM that is not running.
    guest("e2e-dev2", false);
    p = task("vm.device_detach", "e2e-dev2", nic);
    EXPECT_EQ(p.status, "TaskFailure: VM e2e-dev2 not in start state; hot-detach unnecessary or impossible");
    auto r = pvc({"vm", "network", "add", "e2e-dev2", "100", "--macaddr", kMac});
    EXPECT_EQ(r.status, 0) << r.output;  // stored only
    EXPECT_NE(r.output.find("not running"), std::string::npos) << r.output;

    // A running VM and a device libvirt refuses: a bridge hv1 does not have.
    std::string uuid = guest("e2e-dev3", true);
    lab_->zk()->ensure_path(path("network.vni", {"200"}));
    r = pvc({"vm", "network", "add", "e2e-dev3", "200"});
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("hot-attaching it failed"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("vmbr200"), std::string::npos) << r.output;  // libvirt's message names the bridge
    EXPECT_NE(stored_xml(uuid).find("vmbr200"), std::string::npos);      // the configuration changed all the same
    EXPECT_EQ(live_xml(uuid).find("vmbr200"), std::string::npos);
    // A device XML libvirt cannot parse, and a detach of a device the guest does not have.
    p = task("vm.device_attach", "e2e-dev3", "<nonsense/>");
    EXPECT_EQ(p.state, tasks::failure);
    EXPECT_GT(p.status.size(), 0u);
    p = task("vm.device_detach", uuid, nic);
    EXPECT_EQ(p.state, tasks::failure);
    EXPECT_NE(p.status.find("not found"), std::string::npos) << p.status;
    std::cout << "libvirt's refusals: " << p.status << std::endl;
    EXPECT_TRUE(view_->running(uuid));
}

}  // namespace
