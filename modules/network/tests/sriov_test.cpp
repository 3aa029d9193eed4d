// SR-IOV without hardware: a fake sysfs tree (a temporary
// directory shaped like /sys/class/net/<pf>/device/sriov_numvfs and
// /sys/class/net/<vf>/device/uevent), a fake VF control that records what
// would be sent to the kernel, and a real ZooKeeper for the registration.
#include <gtest/gtest.h>

#include <fstream>

#include "pvc/cluster.hpp"
#include "pvc/test/zk_server.hpp"
#include "sriov.hpp"

using namespace pvc::network;

namespace {

struct FakeVfControl : VfControl {
    std::map<std::string, std::vector<VfInfo>> pfs;
    std::vector<std::tuple<std::string, uint32_t, VfConfig>> configured;
    std::map<std::string, unsigned> mtus;
    std::vector<VfInfo> vfs(const std::string& pf) override {
        auto it = pfs.find(pf);
        if (it == pfs.end()) throw std::runtime_error("no PF " + pf);
        return it->second;
    }
    void configure(const std::string& pf, uint32_t vf, const VfConfig& c) override { configured.emplace_back(pf, vf, c); }
    bool set_mtu(const std::string& netdev, unsigned mtu) override {
        mtus[netdev] = mtu;
        return true;
    }
};

class FakeSysfs {
public:
    FakeSysfs() : dir_("pvc-sysfs") {}
    // A PF with SR-IOV (sriov_numvfs = `numvfs`).
    void pf(const std::string& name, unsigned numvfs) {
        auto d = root() / "class" / "net" / name / "device";
        std::filesystem::create_directories(d);
        std::ofstream(d / "sriov_numvfs") << numvfs << "\n";
    }
    // A VF netdev with its PCI address.
    void vf(const std::string& name, const std::string& slot) {
        auto d = root() / "class" / "net" / name / "device";
        std::filesystem::create_directories(d);
        std::ofstream(d / "uevent") << "DRIVER=iavf\nPCI_CLASS=20000\nPCI_SLOT_NAME=" << slot << "\nMODALIAS=pci:v1\n";
    }
    std::string numvfs(const std::string& pf) {
        std::ifstream f(root() / "class" / "net" / pf / "device" / "sriov_numvfs");
        return std::string((std::istreambuf_iterator<char>(f)), {});
    }
    std::filesystem::path root() const { return dir_.path(); }

private:
    pvc::test::TempDir dir_;
};

}  // namespace

TEST(SriovSysfs, PciAddressFromTheVfsUevent) {
    auto a = parse_pci_slot("DRIVER=x\nPCI_SLOT_NAME=0000:03:10.1\n");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->domain, "0000");
    EXPECT_EQ(a->bus, "03");
    EXPECT_EQ(a->slot, "10");
    EXPECT_EQ(a->function, "1");
    EXPECT_FALSE(parse_pci_slot("DRIVER=x\n"));
    EXPECT_FALSE(parse_pci_slot("PCI_SLOT_NAME=garbage\n"));
}

TEST(SriovSysfs, PfsGetTheirVfCountAndADeviceWithoutSriovIsAWarning) {
    FakeSysfs fake;
    fake.pf("ens1f0", 0);
    SriovSysfs sys(fake.root());
    auto lines = prepare_pfs(sys, {{"ens1f0", 9000, 4}, {"eno1", std::nullopt, 2}});
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0], "ok: SR-IOV PF ens1f0: 4 VFs");
    EXPECT_NE(lines[1].find("warning: SR-IOV PF eno1: no sriov_numvfs"), std::string::npos) << lines[1];
    EXPECT_EQ(fake.numvfs("ens1f0"), "4");
    EXPECT_EQ(sys.numvfs("ens1f0"), 4u);
    EXPECT_FALSE(sys.numvfs("eno1"));
    EXPECT_FALSE(sys.allow_unsafe_interrupts());  // no vfio module in the fake tree
}

TEST(SriovConfig, DefaultsForMissingKeysLenientBooleansAndLinkState) {
    std::vector<std::string> w;
    VfConfig none = parse_vf_config({}, w);
    EXPECT_EQ(none, VfConfig{});
    EXPECT_EQ(none.link_state, "auto");  // not the reference's invalid "on"
    EXPECT_TRUE(w.empty());
    VfConfig c = parse_vf_config({{"vlan_id", "100"}, {"vlan_qos", "3"}, {"tx_rate_min", "10"}, {"tx_rate_max", "1000"},
                                  {"spoof_check", "True"}, {"trust", "yes"}, {"query_rss", "maybe"},
                                  {"link_state", "disable"}},
                                 w);
    EXPECT_EQ(c.vlan_id, 100u);
    EXPECT_EQ(c.vlan_qos, 3u);
    EXPECT_EQ(c.tx_rate_min, 10u);
    EXPECT_EQ(c.tx_rate_max, 1000u);
    EXPECT_TRUE(c.spoof_check);
    EXPECT_TRUE(c.trust);       // accepted, with a warning
    EXPECT_FALSE(c.query_rss);  // not a boolean: off, with a warning
    EXPECT_EQ(c.link_state, "disable");
    EXPECT_EQ(w.size(), 2u);
    w.clear();
    EXPECT_EQ(parse_vf_config({{"link_state", "on"}, {"vlan_id", "x"}}, w), VfConfig{});
    EXPECT_EQ(w.size(), 2u);
}

class SriovRegistrationTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        zk_ = new pvc::test::ZkServer();
        pvc::zk::SessionOptions o;
        o.hosts = zk_->hosts();
        session_ = pvc::zk::Session::connect(o);
        pvc::init_cluster(*session_);
    }
    static void TearDownTestSuite() {
        session_->close();
        session_.reset();
        delete zk_;
    }
    std::string get(const std::string& path) { return session_->get(path).value_or("<absent>"); }
    static pvc::test::ZkServer* zk_;
    static std::shared_ptr<pvc::zk::Session> session_;
};
pvc::test::ZkServer* SriovRegistrationTest::zk_;
std::shared_ptr<pvc::zk::Session> SriovRegistrationTest::session_;

TEST_F(SriovRegistrationTest, PfAndVfKeysAsTheReferenceWritesThemAndAVfWithoutPciIsSkipped) {
    FakeSysfs fake;
    fake.pf("ens1f0", 3);
    fake.vf("ens1f0v0", "0000:03:10.0");
    fake.vf("ens1f0v1", "0000:03:10.2");
    // ens1f0v2: bound to vfio, no netdev, no uevent.
    FakeVfControl control;
    VfInfo v0;
    v0.index = 0;
    v0.mac = "52:54:00:aa:00:00";
    v0.vlan = 7;
    v0.spoof_check = true;
    VfInfo v1;  // a driver that reports little: defaults
    v1.index = 1;
    VfInfo v2;
    v2.index = 2;
    control.pfs["ens1f0"] = {v0, v1, v2};
    SriovSysfs sys(fake.root());
    auto reg = register_sriov(*session_, "hv1", {{"ens1f0", 9000, 3}}, sys, control);
    EXPECT_EQ(reg.vfs, (std::vector<std::string>{"ens1f0v0", "ens1f0v1"}));

    const std::string pf = "/nodes/hv1/sriov/pf/ens1f0", vf0 = "/nodes/hv1/sriov/vf/ens1f0v0";
    EXPECT_EQ(get(pf), "");
    EXPECT_EQ(get(pf + "/mtu"), "9000");
    EXPECT_EQ(get(pf + "/vfcount"), "3");
    EXPECT_EQ(get(vf0 + "/pf"), "ens1f0");
    EXPECT_EQ(get(vf0 + "/mtu"), "9000");
    EXPECT_EQ(get(vf0 + "/mac"), "52:54:00:aa:00:00");
    EXPECT_EQ(get(vf0 + "/phy_mac"), "52:54:00:aa:00:00");
    EXPECT_EQ(get(vf0 + "/config/vlan_id"), "7");
    EXPECT_EQ(get(vf0 + "/config/vlan_qos"), "0");
    EXPECT_EQ(get(vf0 + "/config/spoof_check"), "True");
    EXPECT_EQ(get(vf0 + "/config/link_state"), "auto");
    EXPECT_EQ(get(vf0 + "/config/trust"), "False");
    EXPECT_EQ(get(vf0 + "/config/query_rss"), "False");
    EXPECT_EQ(get(vf0 + "/pci/domain"), "0000");
    EXPECT_EQ(get(vf0 + "/pci/bus"), "03");
    EXPECT_EQ(get(vf0 + "/pci/slot"), "10");
    EXPECT_EQ(get(vf0 + "/pci/function"), "0");
    EXPECT_EQ(get(vf0 + "/used"), "False");
    EXPECT_EQ(get(vf0 + "/used_by"), "");
    EXPECT_EQ(get("/nodes/hv1/sriov/vf/ens1f0v1/pci/function"), "2");
    EXPECT_EQ(get("/nodes/hv1/sriov/vf/ens1f0v1/mac"), "00:00:00:00:00:00");
    EXPECT_EQ(get("/nodes/hv1/sriov/vf/ens1f0v2"), "<absent>");
    bool said = false;
    for (const auto& l : reg.log) said |= l.find("ens1f0v2: no PCI address") != std::string::npos;
    EXPECT_TRUE(said);
}

TEST_F(SriovRegistrationTest, ARestartKeepsTheAdministratorsConfigAndUsageAndRemovesUnconfiguredPfs) {
    FakeSysfs fake;
    fake.pf("ens2f0", 1);
    fake.pf("ens3f0", 1);
    fake.vf("ens2f0v0", "0000:04:10.0");
    fake.vf("ens3f0v0", "0000:05:10.0");
    FakeVfControl control;
    control.pfs["ens2f0"] = {VfInfo{}};
    control.pfs["ens3f0"] = {VfInfo{}};
    SriovSysfs sys(fake.root());
    register_sriov(*session_, "hv2", {{"ens2f0", std::nullopt, 1}, {"ens3f0", std::nullopt, 1}}, sys, control);
    EXPECT_EQ(get("/nodes/hv2/sriov/pf/ens2f0/mtu"), "1500");  // unset: 1500
    // The client uses the VF and configures it.
    ASSERT_TRUE(session_->write({{"/nodes/hv2/sriov/vf/ens2f0v0/used", "True"},
                                 {"/nodes/hv2/sriov/vf/ens2f0v0/used_by", "1b1c0a5e-0000-4000-8000-000000000001"},
                                 {"/nodes/hv2/sriov/vf/ens2f0v0/config/vlan_id", "200"}}));
    // Restart with ens3f0 no longer configured.
    auto reg = register_sriov(*session_, "hv2", {{"ens2f0", std::nullopt, 1}}, sys, control);
    EXPECT_EQ(get("/nodes/hv2/sriov/vf/ens2f0v0/used"), "True");
    EXPECT_EQ(get("/nodes/hv2/sriov/vf/ens2f0v0/used_by"), "1b1c0a5e-0000-4000-8000-000000000001");
    EXPECT_EQ(get("/nodes/hv2/sriov/vf/ens2f0v0/config/vlan_id"), "200");
    EXPECT_EQ(get("/nodes/hv2/sriov/pf/ens3f0"), "<absent>");
    EXPECT_EQ(get("/nodes/hv2/sriov/vf/ens3f0v0"), "<absent>");
    EXPECT_EQ(reg.vfs, std::vector<std::string>{"ens2f0v0"});
}

TEST_F(SriovRegistrationTest, VfConfigurationReadFromZooKeeperIsAppliedInOneRequest) {
    FakeSysfs fake;
    fake.pf("ens4f0", 1);
    fake.vf("ens4f0v0", "0000:06:10.0");
    FakeVfControl control;
    control.pfs["ens4f0"] = {VfInfo{}};
    SriovSysfs sys(fake.root());
    register_sriov(*session_, "hv3", {{"ens4f0", std::nullopt, 1}}, sys, control);
    ASSERT_TRUE(session_->write({{"/nodes/hv3/sriov/vf/ens4f0v0/config/vlan_id", "300"},
                                 {"/nodes/hv3/sriov/vf/ens4f0v0/config/vlan_qos", "5"},
                                 {"/nodes/hv3/sriov/vf/ens4f0v0/config/tx_rate_max", "2500"},
                                 {"/nodes/hv3/sriov/vf/ens4f0v0/config/trust", "True"},
                                 {"/nodes/hv3/sriov/vf/ens4f0v0/config/link_state", "enable"}}));
    std::vector<std::string> w;
    auto applied = apply_vf_config(*session_, "hv3", "ens4f0v0", "ens4f0", 0, control, std::nullopt, w);
    EXPECT_TRUE(w.empty());
    ASSERT_TRUE(applied);
    ASSERT_EQ(control.configured.size(), 1u);
    const auto& [pf, index, sent] = control.configured[0];
    EXPECT_EQ(pf, "ens4f0");
    EXPECT_EQ(index, 0u);
    EXPECT_EQ(sent.vlan_id, 300u);
    EXPECT_EQ(sent.vlan_qos, 5u);
    EXPECT_EQ(sent.tx_rate_min, 0u);
    EXPECT_EQ(sent.tx_rate_max, 2500u);
    EXPECT_TRUE(sent.trust);
    EXPECT_FALSE(sent.spoof_check);
    EXPECT_EQ(sent.link_state, "enable");
    // Unchanged: nothing sent; one key changed: the whole configuration again.
    EXPECT_FALSE(apply_vf_config(*session_, "hv3", "ens4f0v0", "ens4f0", 0, control, applied, w));
    EXPECT_EQ(control.configured.size(), 1u);
    ASSERT_TRUE(session_->write("/nodes/hv3/sriov/vf/ens4f0v0/config/spoof_check", "True"));
    auto again = apply_vf_config(*session_, "hv3", "ens4f0v0", "ens4f0", 0, control, applied, w);
    ASSERT_TRUE(again);
    ASSERT_EQ(control.configured.size(), 2u);
    EXPECT_TRUE(std::get<2>(control.configured[1]).spoof_check);
    EXPECT_EQ(std::get<2>(control.configured[1]).vlan_id, 300u);
}
