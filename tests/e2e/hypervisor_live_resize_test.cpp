// A volume of a running VM resized live (the Ceph client library's
// resize_volume, what `pvc storage volume resize` and the API's PUT
// /storage/ceph/volume/<pool>/<volume> call): the RBD image grows, then
// libvirt on the VM's node resizes the disk QEMU has open (block resize),
// and QEMU reports the new capacity (virDomainGetBlockInfo). QEMU does not
// notice a grown RBD image by itself: without the block resize (libvirt on
// the node unreachable) its capacity stays the old one, so this checks the
// block resize itself. The guest's own view is not read (the lab's guest
// kernel has no virtio-blk driver in its initramfs).
//
// The guest's disk is a real RBD image of the private mini Ceph
// (tests/support), opened by QEMU's rbd driver with cephx (a libvirt secret
// on hv1). The mini Ceph listens on 127.0.0.1 only, so it is started from
// inside hv1's network namespace (this test's thread enters it; the Ceph
// daemons it starts live there), where hv1's QEMU reaches it; the test
// reaches hv1's libvirtd and the lab's ZooKeeper from there as from anywhere.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

#include <libvirt/libvirt.h>

#include "lab.hpp"
#include "pvc/ceph_client.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/ceph_cluster.hpp"

namespace {

using namespace std::chrono_literals;
using pvc::schema::path;
using pvc::e2e::Client;
using pvc::e2e::Lab;
using pvc::e2e::NodeView;
using pvc::e2e::since;
using pvc::e2e::wait_for;

constexpr const char* kSecretUuid = "5e0c7e57-0000-4000-8000-00000000ce9f";
constexpr unsigned long long kMiB = 1024 * 1024;

// This thread in another network namespace for its lifetime, then back.
class NetnsGuard {
public:
    explicit NetnsGuard(const std::string& name) {
        home_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        int fd = open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
        if (home_ < 0 || fd < 0) throw std::runtime_error("no network namespace " + name);
        int rc = setns(fd, CLONE_NEWNET);
        close(fd);
        if (rc != 0) throw std::runtime_error("cannot enter network namespace " + name);
    }
    ~NetnsGuard() {
        if (setns(home_, CLONE_NEWNET) != 0) std::cerr << "cannot return to the root network namespace\n";
        close(home_);
    }
    NetnsGuard(const NetnsGuard&) = delete;
    NetnsGuard& operator=(const NetnsGuard&) = delete;

private:
    int home_ = -1;
};

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string base64_decode(const std::string& in) {
    const std::string chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    unsigned int buf = 0;
    int bits = 0;
    for (char c : in) {
        auto v = chars.find(c);
        if (v == std::string::npos) continue;  // '=' and whitespace
        buf = (buf << 6) | static_cast<unsigned int>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<char>((buf >> bits) & 0xff));
        }
    }
    return out;
}

class LiveResize : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        try {
            lab_ = std::make_unique<Lab>(pvc::e2e::LabOptions{{1}, 3, 5});
        } catch (const std::exception& e) {
            setup_error_ = e.what();
        }
    }
    static void TearDownTestSuite() { lab_.reset(); }
    void SetUp() override { ASSERT_TRUE(lab_) << "lab did not come up: " << setup_error_; }

    static inline std::unique_ptr<Lab> lab_;
    static inline std::string setup_error_;
};

// QEMU's view of disk `target` of domain `name` on `conn`: its capacity in bytes (0 when unknown).
unsigned long long capacity(virConnectPtr conn, const std::string& name, const std::string& target) {
    virDomainPtr d = virDomainLookupByName(conn, name.c_str());
    if (!d) return 0;
    virDomainBlockInfo info{};
    int rc = virDomainGetBlockInfo(d, target.c_str(), &info, 0);
    virDomainFree(d);
    return rc == 0 ? info.capacity : 0;
}

TEST_F(LiveResize, ARunningVmsRbdDiskGrowsInQemu) {
    auto t0 = std::chrono::steady_clock::now();
    const char* lab_name = std::getenv("PVC_LAB_NAME");  // set by the Lab; node N's namespace is <name>-hvN
    NetnsGuard in_hv1(std::string(lab_name ? lab_name : "pvce2e") + "-hv1");
    pvc::test::CephCluster ceph(1);
    std::cout << "mini Ceph up in hv1's namespace in " << since(t0) << " s" << std::endl;
    auto zk = lab_->zk();
    // The mini Ceph's `rbd` pool, recorded as a pool add records one.
    ASSERT_TRUE(zk->write({{path("pool.name", {"rbd"}), ""},
                           {path("pool.pgs", {"rbd"}), "8"},
                           {path("pool.tier", {"rbd"}), "default"},
                           {path("pool.stats", {"rbd"}), R"({"id": 1, "free_bytes": 1073741824})"},
                           {"/ceph/volumes/rbd", ""},
                           {"/ceph/snapshots/rbd", ""}}));
    pvc::ceph::Settings settings;
    settings.config_file = ceph.conf().string();
    settings.keyring = ceph.keyring().string();
    settings.timeout = 10s;
    settings.vm_uri = lab_->libvirt_uri(1);  // the VM's node is hv1
    pvc::ceph::Client client(zk, settings);
    const std::string vm = "e2eresize", volume = "e2eresize_disk1";
    auto r = client.add_volume("rbd", volume, "64M");
    ASSERT_EQ(r.status, 200) << r.message;

    // cephx for QEMU: client.admin's key as a libvirt secret on hv1.
    std::smatch key, mon;
    std::string keyring = slurp(ceph.keyring()), conf = slurp(ceph.conf());
    ASSERT_TRUE(std::regex_search(keyring, key, std::regex(R"(\[client\.admin\]\s*key\s*=\s*(\S+))"))) << keyring;
    ASSERT_TRUE(std::regex_search(conf, mon, std::regex(R"(v1:127\.0\.0\.1:(\d+))"))) << conf;
    virConnectPtr conn = virConnectOpen(lab_->libvirt_uri(1).c_str());
    ASSERT_NE(conn, nullptr);
    std::string secret_xml = std::string("<secret ephemeral='no' private='no'><uuid>") + kSecretUuid +
                             "</uuid><usage type='ceph'><name>e2e client.admin</name></usage></secret>";
    virSecretPtr secret = virSecretDefineXML(conn, secret_xml.c_str(), 0);
    ASSERT_NE(secret, nullptr);
    std::string raw = base64_decode(key[1].str());
    ASSERT_EQ(virSecretSetValue(secret, reinterpret_cast<const unsigned char*>(raw.data()), raw.size(), 0), 0);

    std::string uuid = pvc::e2e::random_uuid();
    std::string xml = pvc::e2e::tiny_domain_xml(lab_->domain_type(), vm, uuid, lab_->console_dir());
    std::string disk = "    <disk type='network' device='disk'><driver name='qemu' type='raw' cache='none'/>"
                       "<auth username='admin'><secret type='ceph' uuid='" + std::string(kSecretUuid) +
                       "'/></auth><source protocol='rbd' name='rbd/" + volume + "'><host name='127.0.0.1' port='" +
                       mon[1].str() + "'/></source><target dev='vdb' bus='virtio'/></disk>\n";
    xml.insert(xml.find("  </devices>"), disk);
    Client pvc_client(zk);
    pvc_client.define(uuid, vm, xml, "hv1");
    pvc_client.change_state(uuid, "start");
    NodeView view(lab_->libvirt_uri(1));
    wait_for([&] { return view.running(uuid) || pvc_client.get("domain.state", uuid) == "fail"; }, 60s);
    ASSERT_TRUE(view.running(uuid)) << pvc_client.get("domain.state", uuid) << ": "
                                    << pvc_client.get("domain.failed_reason", uuid) << "\n"
                                    << lab_->all_daemon_logs() << "\n----- QEMU's log -----\n"
                                    << slurp(lab_->console_dir().parent_path() / "hv1" / "libvirt" / "log" / "qemu" /
                                             (vm + ".log"));
    EXPECT_EQ(capacity(conn, vm, "vdb"), 64 * kMiB);

    auto t1 = std::chrono::steady_clock::now();
    r = client.resize_volume("rbd", volume, "128M");
    ASSERT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(r.message, "Resized RBD volume '" + volume + "' to size '128M' in pool 'rbd'.");
    double took = since(t1);
    // The library waits for the block resize (up to 10 s): QEMU has the new size when it returns.
    EXPECT_EQ(capacity(conn, vm, "vdb"), 128 * kMiB);
    std::cout << "resize (RBD, ZooKeeper, block resize on hv1) took " << took << " s" << std::endl;
    EXPECT_NE(zk->get(path("volume.stats", {"rbd", volume})).value_or("").find("\"size\":134217728"),
              std::string::npos)
        << zk->get(path("volume.stats", {"rbd", volume})).value_or("");
    EXPECT_TRUE(view.running(uuid));

    // A VM that is not running: the RBD image grows, libvirt is not asked.
    pvc_client.change_state(uuid, "stop");
    ASSERT_TRUE(wait_for([&] { return !view.running(uuid); }, 30s));
    r = client.resize_volume("rbd", volume, "192M");
    EXPECT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(client.volume_info("rbd", volume).value_or("").find("\"size\":201326592") != std::string::npos, true);

    virSecretUndefine(secret);
    virSecretFree(secret);
    virConnectClose(conn);
    std::cout << "whole test " << since(t0) << " s" << std::endl;
}

}  // namespace
